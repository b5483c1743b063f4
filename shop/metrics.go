package shop

import (
	"errors"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/chatd/chatd/internal/promreg"
)

// metrics are the shop's Prometheus collectors.
type metrics struct {
	purchases     *prometheus.CounterVec
	retries       prometheus.Counter
	notReplicated prometheus.Counter
}

func newMetrics(reg prometheus.Registerer) *metrics {
	m := &metrics{
		purchases: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "chatd", Subsystem: "shop", Name: "purchases_total",
			Help: "Purchase attempts by path (watch, lua) and result (ok, replayed, sold_out, insufficient_funds, unknown_item, conflict, mismatch, not_replicated, error).",
		}, []string{"path", "result"}),
		retries: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: "chatd", Subsystem: "shop", Name: "tx_retries_total",
			Help: "WATCH/MULTI/EXEC transactions retried because a watched key changed.",
		}),
		notReplicated: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: "chatd", Subsystem: "shop", Name: "not_replicated_total",
			Help: "Purchases, grants and restocks under shop.durability=replica that no replica acknowledged in time (answered not_durable; applied all the same).",
		}),
	}
	if reg != nil {
		m.purchases = promreg.Register(reg, m.purchases)
		m.retries = promreg.Register(reg, m.retries)
		m.notReplicated = promreg.Register(reg, m.notReplicated)
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
	case errors.Is(err, ErrNotReplicated):
		result = "not_replicated"
	}
	m.purchases.WithLabelValues(path, result).Inc()
}
