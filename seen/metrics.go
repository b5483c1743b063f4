package seen

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/chatd/chatd/internal/promreg"
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
		rotations: counter("rotations_total", "Seen-filter generations started (the first one of a user included)."),
		resends: counter("resends_total",
			"Calls sent again with more hash values per item, for a generation made under other settings."),
		calls: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: "chatd", Subsystem: "seen", Name: "call_duration_seconds",
			Help:    "Duration of Mark (op=mark) and Seen/Unseen (op=check) calls to Redis.",
			Buckets: []float64{.0002, .0005, .001, .002, .005, .01, .02, .05, .1, .5},
		}, []string{"op"}),
	}
	if reg == nil {
		return m
	}
	m.marked = promreg.Register(reg, m.marked)
	m.checked = promreg.Register(reg, m.checked)
	m.maybeSeen = promreg.Register(reg, m.maybeSeen)
	m.rotations = promreg.Register(reg, m.rotations)
	m.resends = promreg.Register(reg, m.resends)
	m.calls = promreg.Register(reg, m.calls)
	return m
}
