package lock

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/chatd/chatd/internal/promreg"
)

// metrics are the lock's Prometheus collectors. They always exist, so the
// hot path needs no nil checks; they are registered only on
// Config.Registerer.
type metrics struct {
	obtained, notObtained, canceled, failed prometheus.Observer
	contended                               prometheus.Counter
	expired                                 prometheus.Counter
}

func newMetrics(reg prometheus.Registerer) *metrics {
	wait := prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Namespace: "chatd",
		Subsystem: "lock",
		Name:      "wait_seconds",
		Help:      "Time Acquire and TryAcquire took, waiting included, by result (obtained, not_obtained, canceled, error).",
		Buckets:   prometheus.ExponentialBuckets(0.0005, 2, 14), // 0.5ms .. 4s
	}, []string{"result"})
	contended := prometheus.NewCounter(prometheus.CounterOpts{
		Namespace: "chatd",
		Subsystem: "lock",
		Name:      "contended_total",
		Help:      "Acquire and TryAcquire calls whose first try found the lock held by another owner.",
	})
	expired := prometheus.NewCounter(prometheus.CounterOpts{
		Namespace: "chatd",
		Subsystem: "lock",
		Name:      "expired_total",
		Help:      "Locks whose holder found them gone (expired, then maybe taken by another) on Refresh, Release, TTL or by the watchdog.",
	})
	if reg != nil {
		wait = promreg.Register(reg, wait)
		contended = promreg.Register(reg, contended)
		expired = promreg.Register(reg, expired)
	}
	return &metrics{
		obtained:    wait.WithLabelValues("obtained"),
		notObtained: wait.WithLabelValues("not_obtained"),
		canceled:    wait.WithLabelValues("canceled"),
		failed:      wait.WithLabelValues("error"),
		contended:   contended,
		expired:     expired,
	}
}
