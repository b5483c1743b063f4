package web

import (
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

type httpMetrics struct {
	requests    *prometheus.HistogramVec
	panics      prometheus.Counter
	wsOpen      prometheus.Gauge
	wsRefused   *prometheus.CounterVec
	slowClients prometheus.Counter
	delivered   prometheus.Counter
	badEvents   prometheus.Counter
	gapFills    prometheus.Counter
	gapFilled   prometheus.Counter
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
		wsOpen: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "chatd_ws_connections", Help: "Open WebSocket connections on this node.",
		}),
		wsRefused: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "chatd_ws_refused_total", Help: "WebSocket connections refused or closed by the server, by reason.",
		}, []string{"reason"}),
		slowClients: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "chatd_ws_slow_clients_total", Help: "Clients closed with 1013 because their send queue was full.",
		}),
		delivered: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "chatd_ws_frames_delivered_total", Help: "Room events queued to local WebSocket clients.",
		}),
		badEvents: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "chatd_room_bad_events_total", Help: "Malformed payloads received on room channels.",
		}),
		gapFills: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "chatd_room_gap_fills_total", Help: "Gap fills run after the pub/sub connection came back.",
		}),
		gapFilled: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "chatd_room_gap_filled_messages_total", Help: "Messages delivered from history by gap fills: missed live.",
		}),
	}
	reg.MustRegister(m.requests, m.panics, m.wsOpen, m.wsRefused, m.slowClients, m.delivered, m.badEvents, m.gapFills, m.gapFilled)
	return m
}

func (m *httpMetrics) observe(method, route string, status int, d time.Duration) {
	m.requests.WithLabelValues(method, route, strconv.Itoa(status)).Observe(d.Seconds())
}
