package ranking

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/chatd/chatd/internal/promreg"
)

// metrics are the package's Prometheus collectors; a nil *metrics records
// nothing.
type metrics struct {
	posts   *prometheus.CounterVec   // by mode and result
	seconds *prometheus.HistogramVec // by operation
}

func newMetrics(reg prometheus.Registerer) *metrics {
	if reg == nil {
		return nil
	}
	m := &metrics{
		posts: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "chatd", Subsystem: "ranking", Name: "posts_total",
			Help: "Score posts by mode and result (changed, unchanged, duplicate, refused, error).",
		}, []string{"mode", "result"}),
		seconds: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: "chatd", Subsystem: "ranking", Name: "op_seconds",
			Help:    "Latency of leaderboard calls, Redis round trip included.",
			Buckets: []float64{.0001, .00025, .0005, .001, .0025, .005, .01, .025, .05, .1, .25, 1},
		}, []string{"op"}),
	}
	m.posts = promreg.Register(reg, m.posts)
	m.seconds = promreg.Register(reg, m.seconds)
	return m
}

func (m *metrics) post(mode Mode, result string) {
	if m == nil {
		return
	}
	if mode != Best && mode != Incr && mode != Set {
		mode = "other" // keep label cardinality bounded
	}
	m.posts.WithLabelValues(string(mode), result).Inc()
}

func (m *metrics) observe(op string, start time.Time) {
	if m == nil {
		return
	}
	m.seconds.WithLabelValues(op).Observe(time.Since(start).Seconds())
}
