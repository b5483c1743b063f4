package settings

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/chatd/chatd/internal/promreg"
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
		m.version = promreg.Register(r, m.version)
		m.applied = promreg.Register(r, m.applied)
		m.writes = promreg.Register(r, m.writes)
		m.reloads = promreg.Register(r, m.reloads)
		m.gaps = promreg.Register(r, m.gaps)
	}
	return m
}
