package shop

import (
	"errors"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/chatd/chatd/internal/promreg"
)

// metrics are the shop's Prometheus collectors.
type metrics struct {
	purchases *prometheus.CounterVec
	retries   prometheus.Counter
}

func newMetrics(reg prometheus.Registerer) *metrics {
	m := &metrics{
		purchases: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "chatd", Subsystem: "shop", Name: "purchases_total",
			Help: "Purchase attempts by path (watch, lua) and result (ok, replayed, sold_out, insufficient_funds, unknown_item, conflict, mismatch, error).",
		}, []string{"path", "result"}),
		retries: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: "chatd", Subsystem: "shop", Name: "tx_retries_total",
			Help: "WATCH/MULTI/EXEC transactions retried because a watched key changed.",
		}),
	}
	if reg != nil {
		m.purchases = promreg.Register(reg, m.purchases)
		m.retries = promreg.Register(reg, m.retries)
	}
	return m
}

// count records one purchase's result.
func (m *metrics) count(path string, fresh bool, err error) {
	result := "error"
	switch {
	case err == nil && fresh:
		result = "ok"
	case err == nil:
		result = "replayed"
	case errors.Is(err, ErrSoldOut):
		result = "sold_out"
	case errors.Is(err, ErrInsufficientFunds):
		result = "insufficient_funds"
	case errors.Is(err, ErrUnknownItem):
		result = "unknown_item"
	case errors.Is(err, ErrConflict):
		result = "conflict"
	case errors.Is(err, ErrIdempotencyMismatch):
		result = "mismatch"
	}
	m.purchases.WithLabelValues(path, result).Inc()
}
