package presence

import "github.com/prometheus/client_golang/prometheus"

type metrics struct {
	touched      prometheus.Counter
	touchSeconds prometheus.Histogram
}

func newMetrics(reg prometheus.Registerer) metrics {
	m := metrics{
		touched: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "chatd_presence_touched_users_total", Help: "User presences renewed by Touch.",
		}),
		touchSeconds: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "chatd_presence_touch_seconds", Help: "Duration of one Touch round trip (all of a node's users).",
			Buckets: prometheus.ExponentialBuckets(0.0005, 2, 14),
		}),
	}
	if reg != nil {
		reg.MustRegister(m.touched, m.touchSeconds)
	}
	return m
}
