package web

import (
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

type httpMetrics struct {
	requests  *prometheus.HistogramVec
	panics    prometheus.Counter
	wsRefused *prometheus.CounterVec
}

func newHTTPMetrics(reg prometheus.Registerer) *httpMetrics {
	m := &httpMetrics{
		requests: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "chatd_http_request_duration_seconds",
			Help:    "HTTP requests by method, route and status.",
			Buckets: []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 5, 30},
		}, []string{"method", "route", "status"}),
		panics: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "chatd_http_panics_total", Help: "Handler panics recovered.",
		}),
		wsRefused: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "chatd_ws_refused_total", Help: "WebSocket connections refused or closed by the server, by reason.",
		}, []string{"reason"}),
	}
	reg.MustRegister(m.requests, m.panics, m.wsRefused)
	return m
}

func (m *httpMetrics) observe(method, route string, status int, d time.Duration) {
	m.requests.WithLabelValues(method, route, strconv.Itoa(status)).Observe(d.Seconds())
}
