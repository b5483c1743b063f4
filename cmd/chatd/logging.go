package main

import (
	"context"
	"fmt"
	"io"
	"log"
	"log/slog"
	"os"
)

// newLogHandler is the handler of every log line of the process: logfmt
// text or one JSON object per line (--log-format), at --log-level. The
// node id is added by each logger made from it (web adds "node" to the
// loggers of the node, the bus and the domain services; run adds it to its
// own and to go-redis's), so that every line says which node wrote it.
func newLogHandler(cfg Config, w io.Writer) slog.Handler {
	opts := &slog.HandlerOptions{Level: cfg.LogLevel}
	if cfg.LogFormat == "json" {
		return slog.NewJSONHandler(w, opts)
	}
	return slog.NewTextHandler(w, opts)
}

// nodeID is the id of this node: --node-id, or hostname-pid as web would
// choose (chosen here so that run's own lines carry it too).
func nodeID(cfg Config) string {
	if cfg.NodeID != "" {
		return cfg.NodeID
	}
	host, _ := os.Hostname()
	return fmt.Sprintf("%s-%d", host, os.Getpid())
}

// redisLogger sends go-redis's internal log lines (reconnect attempts) to
// slog at debug, so they neither clutter the one-line start-up errors nor
// go missing when debugging.
type redisLogger struct{ log *slog.Logger }

func (l redisLogger) Printf(ctx context.Context, format string, v ...any) {
	l.log.DebugContext(ctx, "go-redis: "+fmt.Sprintf(format, v...))
}

// stdLogger is a log.Logger writing into log at level, for net/http's
// ErrorLog (TLS handshake errors and the like).
func stdLogger(log *slog.Logger, level slog.Level) *log.Logger {
	return slog.NewLogLogger(log.Handler(), level)
}
