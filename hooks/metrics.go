package hooks

import (
	"github.com/prometheus/client_golang/prometheus"
	"github.com/sony/gobreaker/v2"
)

// metrics are the hooks' metrics, each labelled by hook.
type metrics struct {
	calls   *prometheus.CounterVec
	errors  *prometheus.CounterVec
	latency *prometheus.HistogramVec
	reg     prometheus.Registerer
}

func newMetrics(reg prometheus.Registerer) *metrics {
	m := &metrics{
		calls: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "chatd_hook_calls_total",
			Help: "Hook calls by hook and result: allow, deny, failed_open (the backend failed and the hook let it through), failed_closed (it refused)."},
			[]string{"hook", "result"}),
		errors: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "chatd_hook_errors_total",
			Help: "Failed hook attempts by hook and kind: timeout, transport, status (not 200), bad_reply, breaker_open (refused without a request)."},
			[]string{"hook", "kind"}),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "chatd_hook_duration_seconds",
			Help:    "Time of a hook call, its retries included, by hook.",
			Buckets: []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5}},
			[]string{"hook"}),
		reg: reg,
	}
	if reg != nil {
		reg.MustRegister(m.calls, m.errors, m.latency)
	}
	return m
}

// init makes hook n's series exist at 0 from the start, so a dashboard
// and the alerts find them before the first call.
func (m *metrics) init(n Name) {
	for _, r := range []string{"allow", "deny", "failed_open", "failed_closed"} {
		m.calls.WithLabelValues(string(n), r)
	}
	for _, k := range []string{"timeout", "transport", "status", "bad_reply", "breaker_open"} {
		m.errors.WithLabelValues(string(n), k)
	}
	m.latency.WithLabelValues(string(n))
}

// breaker exports hook n's breaker state as chatd_hook_breaker_state
// (0 closed, 1 half-open, 2 open), read at each scrape.
func (m *metrics) breaker(n Name, cb *gobreaker.CircuitBreaker[[]byte]) {
	if m.reg == nil {
		return
	}
	m.reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "chatd_hook_breaker_state",
		Help: "A hook's circuit breaker: 0 closed, 1 half-open, 2 open (calls refused without a request).", ConstLabels: prometheus.Labels{"hook": string(n)}},
		func() float64 { return float64(cb.State()) }))
}
