package settings

import (
	"errors"

	"github.com/prometheus/client_golang/prometheus"
)

type metrics struct {
	version prometheus.Gauge
	applied *prometheus.CounterVec
	writes  *prometheus.CounterVec
	reloads *prometheus.CounterVec
	gaps    prometheus.Counter
}

func newMetrics(r prometheus.Registerer) metrics {
	opts := func(name, help string) prometheus.Opts {
		return prometheus.Opts{Namespace: "chatd", Subsystem: "settings", Name: name, Help: help}
	}
	m := metrics{
		version: prometheus.NewGauge(prometheus.GaugeOpts(opts("version", "Settings version this node holds."))),
		applied: prometheus.NewCounterVec(prometheus.CounterOpts(opts("changes_applied_total",
			"Setting changes applied, by source: pubsub, snapshot or local.")), []string{"source"}),
		writes: prometheus.NewCounterVec(prometheus.CounterOpts(opts("writes_total",
			"Set and Reset calls by result: ok, refused (bad key or value) or error.")), []string{"result"}),
		reloads: prometheus.NewCounterVec(prometheus.CounterOpts(opts("reloads_total",
			"Snapshot reads by result: ok or error.")), []string{"result"}),
		gaps: prometheus.NewCounter(prometheus.CounterOpts(opts("gaps_total",
			"Times the change stream skipped or went back, forcing a reload."))),
	}
	if r != nil {
		m.version = register(r, m.version)
		m.applied = register(r, m.applied)
		m.writes = register(r, m.writes)
		m.reloads = register(r, m.reloads)
		m.gaps = register(r, m.gaps)
	}
	return m
}

// register registers c, or returns the collector of that name already
// registered (several Stores in one process share it).
func register[C prometheus.Collector](r prometheus.Registerer, c C) C {
	if err := r.Register(c); err != nil {
		var are prometheus.AlreadyRegisteredError
		if errors.As(err, &are) {
			if prev, ok := are.ExistingCollector.(C); ok {
				return prev
			}
		}
	}
	return c
}
