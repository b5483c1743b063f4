// Command chatd is the chat and game server: one node of a deployment that
// shares one Redis or Redis Cluster. See the README for flags and the API.
//
// This file is wiring only: configuration, Redis, the web server, shutdown.
package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/chatd/chatd/internal/embedded"
	"github.com/chatd/chatd/web"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Getenv, os.Stderr); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			os.Exit(0)
		}
		fmt.Fprintln(os.Stderr, "chatd:", err)
		os.Exit(2)
	}
}

// run starts chatd and blocks until ctx ends, then shuts down cleanly.
func run(ctx context.Context, args []string, getenv func(string) string, stderr io.Writer) error {
	cfg, err := parseConfig(args, getenv, stderr)
	if err != nil {
		return err
	}
	log := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: cfg.LogLevel}))
	redis.SetLogger(redisLogger{log})

	var rdb redis.UniversalClient
	generatedAdmin := false
	if cfg.Redis == "" {
		emb, err := embedded.Start()
		if err != nil {
			return err
		}
		defer emb.Close()
		log.Warn("NO --redis GIVEN: using an EMBEDDED Redis (miniredis, in this process, nothing persisted). This node can not share state with other nodes, and everything is lost when it stops. Use --redis for anything but a single-node trial.", "addr", emb.Addr())
		if cfg.AdminToken == "" {
			cfg.AdminToken = randomToken()
			generatedAdmin = true
		}
		rdb = redis.NewClient(&redis.Options{Addr: emb.Addr()})
	} else {
		spec, _ := redisOptions(cfg.Redis)
		rdb = spec.client()
	}
	defer rdb.Close()

	pingCtx, cancel := context.WithTimeout(ctx, 5*time.Second)
	err = rdb.Ping(pingCtx).Err()
	cancel()
	if err != nil {
		return fmt.Errorf("--redis %s: cannot reach Redis: %v", redactURL(cfg.Redis), err)
	}

	ln, err := net.Listen("tcp", cfg.Addr)
	if err != nil {
		return fmt.Errorf("--addr %s: %v", cfg.Addr, err)
	}
	srv, err := web.New(web.Config{
		Redis:          rdb,
		Node:           cfg.NodeID,
		Addr:           ln.Addr().String(),
		Prefix:         cfg.Prefix,
		Secret:         []byte(cfg.Secret),
		AdminToken:     cfg.AdminToken,
		AllowedOrigins: cfg.AllowedOrigins,
		Auth:           cfg.Auth,
		TrustedProxies: cfg.TrustedProxies,
		Logger:         log,
	})
	if err != nil {
		_ = ln.Close()
		return err
	}
	if err := srv.Start(ctx); err != nil {
		_ = ln.Close()
		return err
	}
	if cfg.DebugAddr != "" {
		dln, err := net.Listen("tcp", cfg.DebugAddr)
		if err != nil {
			return fmt.Errorf("--debug-addr %s: %v", cfg.DebugAddr, err)
		}
		mux := http.NewServeMux()
		mux.HandleFunc("/debug/pprof/", pprof.Index)
		mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
		mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
		mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
		mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
		dsrv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
		go func() { _ = dsrv.Serve(dln) }()
		defer dsrv.Close()
		log.Warn("profiling endpoint open: keep it off public networks", "addr", "http://"+dln.Addr().String()+"/debug/pprof/")
	}
	serveErr := make(chan error, 1)
	go func() { serveErr <- srv.Serve(ln) }()
	openAt := openURL(ln.Addr())
	log.Info("chatd listening: open "+openAt, "addr", ln.Addr().String(), "node", srv.Node(), "redis", redactURL(cfg.Redis), "auth", cfg.Auth)
	if generatedAdmin {
		// as Jupyter prints its token URL: the admin console of a trial
		// node works at once, and the token is new on every start
		log.Info("admin console (embedded mode, a new admin token each start; set --admin-token to choose one): " + openAt + "admin#token=" + cfg.AdminToken)
	}

	select {
	case <-ctx.Done():
	case err := <-serveErr:
		return fmt.Errorf("serve: %w", err)
	}
	log.Info("shutting down", "grace", cfg.ShutdownGrace)
	sctx, cancel := context.WithTimeout(context.Background(), cfg.ShutdownGrace)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil {
		log.Warn("shutdown was not clean", "err", err)
	}
	log.Info("stopped")
	return nil
}

// redactURL hides a password in a Redis URL for logs, by the same rule as
// the configuration errors (redactRedis).
func redactURL(s string) string {
	if s == "" {
		return "(embedded)"
	}
	return redactRedis(s, s)
}

// redisLogger sends go-redis's internal log lines (reconnect attempts) to
// slog at debug, so they neither clutter the one-line start-up errors nor
// go missing when debugging.
type redisLogger struct{ log *slog.Logger }

func (l redisLogger) Printf(ctx context.Context, format string, v ...any) {
	l.log.DebugContext(ctx, "go-redis: "+fmt.Sprintf(format, v...))
}

// openURL is the address to open in a browser for a listener: a wildcard
// host ([::] or 0.0.0.0) becomes localhost.
func openURL(a net.Addr) string {
	host, port, err := net.SplitHostPort(a.String())
	if err != nil {
		return "http://" + a.String() + "/"
	}
	if ip := net.ParseIP(host); host == "" || (ip != nil && ip.IsUnspecified()) {
		host = "localhost"
	}
	return "http://" + net.JoinHostPort(host, port) + "/"
}

// randomToken is a fresh 128-bit secret, hex-encoded.
func randomToken() string {
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic(err)
	}
	return hex.EncodeToString(b[:])
}
