package main

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/chatd/chatd/web"
)

// newRegistry is the registry of every metric of the node: the Go runtime
// and the process, the build, and what web, the realtime core, the domain
// services and the Redis client register on it.
func newRegistry(b buildInfo) *prometheus.Registry {
	reg := prometheus.NewRegistry()
	reg.MustRegister(
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		b.collector(),
	)
	return reg
}

// readyCollector is chatd_ready: 1 while the node would answer /readyz
// with 200 (Redis answers PING and takes a write within 500 ms, the
// pub/sub connection receives its canary, the node is not draining), 0 otherwise. /readyz
// itself is seen only by the balancer; this puts it on the dashboard and
// under an alert.
func readyCollector(srv *web.Server) prometheus.Collector {
	return prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "chatd_ready",
		Help: "1 while this node is ready as /readyz says (Redis answers PING within 500 ms, its pub/sub connection receives, not draining), else 0.",
	}, func() float64 {
		if srv.Ready(context.Background(), 500*time.Millisecond) != nil {
			return 0
		}
		return 1
	})
}

// metricsHandler serves the private listener: /metrics of reg and the
// net/http/pprof profiles under /debug/pprof/.
func metricsHandler(reg *prometheus.Registry, log *slog.Logger) http.Handler {
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{
		ErrorLog: slog.NewLogLogger(log.Handler(), slog.LevelWarn),
	}))
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("/{$}", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		fmt.Fprintln(w, "chatd metrics listener: /metrics (Prometheus), /debug/pprof/ (profiles)")
	})
	return mux
}

// metricsServer is the --metrics-addr listener.
type metricsServer struct {
	srv  *http.Server
	ln   net.Listener
	done chan error
}

// startMetrics listens on addr and serves metricsHandler until stop.
func startMetrics(addr string, reg *prometheus.Registry, log *slog.Logger) (*metricsServer, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("--metrics-addr %s: %v", addr, err)
	}
	m := &metricsServer{
		srv: &http.Server{
			Handler:           metricsHandler(reg, log),
			ReadHeaderTimeout: 10 * time.Second,
			ErrorLog:          stdLogger(log, slog.LevelWarn),
		},
		ln:   ln,
		done: make(chan error, 1),
	}
	go func() { m.done <- m.srv.Serve(ln) }()
	return m, nil
}

// stop closes the listener and its connections and waits for Serve.
func (m *metricsServer) stop() {
	_ = m.srv.Close()
	<-m.done
}
