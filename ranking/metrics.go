package ranking

import (
	"errors"
	"time"

	"github.com/prometheus/client_golang/prometheus"
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
			Help: "Score posts by mode and result (changed, unchanged, refused, error).",
		}, []string{"mode", "result"}),
		seconds: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: "chatd", Subsystem: "ranking", Name: "op_seconds",
			Help:    "Latency of leaderboard calls, Redis round trip included.",
			Buckets: []float64{.0001, .00025, .0005, .001, .0025, .005, .01, .025, .05, .1, .25, 1},
		}, []string{"op"}),
	}
	m.posts = register(reg, m.posts)
	m.seconds = register(reg, m.seconds)
	return m
}

// register registers c, or returns the collector already registered under
// its name (a second Service on one registry shares the first one's).
func register[C prometheus.Collector](reg prometheus.Registerer, c C) C {
	if err := reg.Register(c); err != nil {
		var are prometheus.AlreadyRegisteredError
		if errors.As(err, &are) {
			if existing, ok := are.ExistingCollector.(C); ok {
				return existing
			}
		}
		panic(err) // a programming error: a clashing metric name
	}
	return c
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
