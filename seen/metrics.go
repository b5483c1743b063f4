package seen

import (
	"errors"

	"github.com/prometheus/client_golang/prometheus"
)

// metrics are the Prometheus collectors of a Filter.
type metrics struct {
	marked    prometheus.Counter
	checked   prometheus.Counter
	maybeSeen prometheus.Counter
	rotations prometheus.Counter
	resends   prometheus.Counter
	calls     *prometheus.HistogramVec
}

func newMetrics(reg prometheus.Registerer) *metrics {
	counter := func(name, help string) prometheus.Counter {
		return prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: "chatd", Subsystem: "seen", Name: name, Help: help,
		})
	}
	m := &metrics{
		marked:    counter("marked_items_total", "Items marked seen."),
		checked:   counter("checked_items_total", "Items checked against seen-filters."),
		maybeSeen: counter("maybe_seen_items_total", "Checked items answered maybe seen (held back)."),
		rotations: counter("rotations_total", "New seen-filter generations started (the first one of a user included)."),
		resends: counter("resends_total",
			"Calls sent again because a generation had another size than the live settings give."),
		calls: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: "chatd", Subsystem: "seen", Name: "call_duration_seconds",
			Help:    "Duration of Mark (op=mark) and Seen/Unseen (op=check) calls to Redis.",
			Buckets: []float64{.0002, .0005, .001, .002, .005, .01, .02, .05, .1, .5},
		}, []string{"op"}),
	}
	if reg == nil {
		return m
	}
	m.marked = register(reg, m.marked)
	m.checked = register(reg, m.checked)
	m.maybeSeen = register(reg, m.maybeSeen)
	m.rotations = register(reg, m.rotations)
	m.resends = register(reg, m.resends)
	m.calls = register(reg, m.calls)
	return m
}

// register registers c on reg, or returns the collector already registered
// under its name, so several Filters may share one registry.
func register[C prometheus.Collector](reg prometheus.Registerer, c C) C {
	if err := reg.Register(c); err != nil {
		var are prometheus.AlreadyRegisteredError
		if errors.As(err, &are) {
			if existing, ok := are.ExistingCollector.(C); ok {
				return existing
			}
		}
		panic(err)
	}
	return c
}
