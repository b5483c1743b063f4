// Command chatd is the chat and game server: one node of a deployment that
// shares one Redis or Redis Cluster. See the README for flags and the API.
//
// This file is wiring only: configuration, logs, metrics, Redis, TLS, the
// node's components (cmd/chatd/compose: the realtime core, then the web
// front given its use cases), shutdown in the reverse order.
package main

import (
	"context"
	"crypto/rand"
	"crypto/tls"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/chatd/chatd/cmd/chatd/compose"
	"github.com/chatd/chatd/hooks"
	"github.com/chatd/chatd/internal/embedded"
	"github.com/chatd/chatd/internal/redismetrics"
	"github.com/chatd/chatd/realtime"
	"github.com/chatd/chatd/web"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Getenv, os.Stdout, os.Stderr); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			os.Exit(0)
		}
		fmt.Fprintln(os.Stderr, "chatd:", err)
		os.Exit(2)
	}
}

// run starts chatd and blocks until ctx ends, then shuts down cleanly.
// --version and --print-config write to stdout and return at once; logs
// go to stderr.
func run(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	cfg, res, err := loadConfig(args, getenv, stderr)
	if err != nil {
		return err
	}
	build := readBuildInfo()
	switch {
	case cfg.Version:
		_, err := fmt.Fprintln(stdout, build)
		return err
	case cfg.PrintConfig:
		out, err := printConfig(cfg, res)
		if err == nil {
			_, err = stdout.Write(out)
		}
		return err
	}
	node := nodeID(cfg)
	handler := newLogHandler(cfg, stderr)
	log := slog.New(handler).With("node", node)
	redis.SetLogger(redisLogger{log})
	for _, w := range cfg.warnings {
		log.Warn(w)
	}
	if cfg.ConfigFile != "" {
		log.Info("configuration file read", "file", cfg.ConfigFile)
	}

	reg := newRegistry(build)
	var certs *certReloader
	if cfg.TLSCert != "" {
		if certs, err = loadCerts(cfg.TLSCert, cfg.TLSKey); err != nil {
			return err
		}
		reg.MustRegister(certs.collectors()...)
	}

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
	redismetrics.New(reg).Instrument(rdb)

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
	// The node's components, on the Redis client: the realtime core (the
	// domain services, the bus, the Hub, the use cases), then the web front
	// serving the core's use cases (cmd/chatd/compose). They start in that
	// order, and stop in the reverse one (srv.Shutdown below) before the
	// Redis client closes.
	hk := cfg.Hooks
	hk.Node, hk.Redis, hk.Prefix, hk.Logger, hk.Registerer = node, rdb, cfg.Prefix, log, reg
	appHooks, err := hooks.New(hk)
	if err != nil {
		return err
	}
	secret := []byte(cfg.Secret)
	if len(secret) == 0 {
		secret = []byte(randomToken()) // embedded Redis: one node, a secret of its own
	}
	srv, err := compose.New(compose.Config{
		Realtime: realtime.Config{
			Redis:        rdb,
			Node:         node,
			Addr:         ln.Addr().String(),
			Prefix:       cfg.Prefix,
			MatchRoomKey: secret, // shared by every node: one room id per match
			SendWindow:   cfg.SendWindow,
			Version:      build.Version,
			Logger:       log,
			Registerer:   reg,
			Hooks:        appHooks, // nil = every hook off
		},
		Web: web.Config{
			Node:           node,
			Secret:         secret,
			AdminToken:     cfg.AdminToken,
			AdminReadToken: cfg.AdminReadToken,
			ServerKeys:     cfg.ServerKeys,
			AllowedOrigins: cfg.AllowedOrigins,
			Auth:           cfg.Auth,
			JWTAudience:    cfg.JWTAudience,
			JWTIssuer:      cfg.JWTIssuer,
			TrustedProxies: cfg.TrustedProxies,
			Logger:         slog.New(handler), // web adds "node" to every logger it makes
			Registry:       reg,
			PrivateMetrics: cfg.MetricsAddr != "",
			// 0 on the command line is no cap; web's zero is its default
			MaxRequestsPerAddr: noCap(cfg.MaxRequestsPerAddr),
			MaxRequestsPerUser: noCap(cfg.MaxRequestsPerUser),
			MaxPollsPerAddr:    noCap(cfg.MaxPollsPerAddr),
			MaxPollsPerUser:    noCap(cfg.MaxPollsPerUser),
			MaxHistoryBuilds:   cfg.MaxHistoryBuilds,
		},
	})
	if err != nil {
		_ = ln.Close()
		return err
	}
	reg.MustRegister(readyCollector(srv.Web))
	if err := srv.Start(ctx); err != nil {
		_ = ln.Close()
		return err
	}
	if cfg.MetricsAddr != "" {
		m, err := startMetrics(cfg.MetricsAddr, reg, log)
		if err != nil {
			_ = ln.Close()
			return err
		}
		defer m.stop()
		log.Info("metrics listening: keep it off public networks (it serves profiles too)", "metrics_addr", m.ln.Addr().String(),
			"metrics", "http://"+m.ln.Addr().String()+"/metrics", "pprof", "http://"+m.ln.Addr().String()+"/debug/pprof/")
	}
	scheme := "http"
	if certs != nil {
		scheme = "https"
		ln = tls.NewListener(ln, certs.config())
		log.Info("TLS certificate loaded", describe(certs.leaf())...)
		stopHUP := reloadOnHUP(certs, log)
		defer stopHUP()
	}
	serveErr := make(chan error, 1)
	go func() { serveErr <- srv.Serve(ln) }()
	openAt := openURL(scheme, ln.Addr())
	log.Info("chatd listening: open "+openAt, "addr", ln.Addr().String(), "redis", redactURL(cfg.Redis), "auth", cfg.Auth,
		"version", build.Version, "revision", build.revision())
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

// reloadOnHUP reloads the certificate on each SIGHUP until the returned
// function is called (which waits for a reload in progress). A refused
// reload (certReloader.reload) is logged at WARN and the certificate in
// use stays.
func reloadOnHUP(certs *certReloader, log *slog.Logger) (stop func()) {
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	done, quit := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		for {
			select {
			case <-quit:
				return
			case <-hup:
				leaf, err := certs.reload()
				if err != nil {
					log.Warn("TLS certificate reload failed on SIGHUP: refused, still serving the previous one", "err", err)
					continue
				}
				log.Info("TLS certificate reloaded on SIGHUP", describe(leaf)...)
			}
		}
	}()
	return func() {
		signal.Stop(hup)
		close(quit)
		<-done
	}
}

// redactURL hides a password in a Redis URL for logs, by the same rule as
// the configuration errors (redactRedis).
func redactURL(s string) string {
	if s == "" {
		return "(embedded)"
	}
	return redactRedis(s, s)
}

// openURL is the address to open in a browser for a listener: a wildcard
// host ([::] or 0.0.0.0) becomes localhost.
func openURL(scheme string, a net.Addr) string {
	host, port, err := net.SplitHostPort(a.String())
	if err != nil {
		return scheme + "://" + a.String() + "/"
	}
	if ip := net.ParseIP(host); host == "" || (ip != nil && ip.IsUnspecified()) {
		host = "localhost"
	}
	return scheme + "://" + net.JoinHostPort(host, port) + "/"
}

// randomToken is a fresh 128-bit secret, hex-encoded.
func randomToken() string {
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic(err)
	}
	return hex.EncodeToString(b[:])
}

// noCap is a cap of a flag (0 = no cap) as web.Config takes it (negative
// = no cap, 0 = the default).
func noCap(n int) int {
	if n == 0 {
		return -1
	}
	return n
}
