package identity

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/chatd/chatd/internal/promreg"
)

// metrics are a Registry's collectors (registered when Config.Registerer
// is set).
type metrics struct {
	calls     *prometheus.CounterVec // op, result
	evictions *prometheus.CounterVec // memory
	events    *prometheus.CounterVec // type
}

func newMetrics(reg prometheus.Registerer) metrics {
	m := metrics{
		calls: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "chatd", Subsystem: "identity", Name: "calls_total",
			Help: "Name-claim calls by op (claim, admit, release, restore, revoke) and result " +
				"(claimed, renewed, taken, cached, taken_back, not_holder, signed_out, signed_out_local, " +
				"released, revoked, kept, lost, error).",
		}, []string{"op", "result"}),
		evictions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "chatd", Subsystem: "identity", Name: "memory_evictions_total",
			Help: "Entries a Registry forgot before their time to stay within its bounds, by memory " +
				"(admits: Config.MaxAdmits; revocations: Config.MaxRevocations).",
		}, []string{"memory"}),
		events: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "chatd", Subsystem: "identity", Name: "events_total",
			Help: "Events received on the identity channel by type (signed_out, claimed, malformed) and resubscriptions (resubscribed).",
		}, []string{"type"}),
	}
	if reg != nil {
		m.calls = promreg.Register(reg, m.calls)
		m.evictions = promreg.Register(reg, m.evictions)
		m.events = promreg.Register(reg, m.events)
	}
	return m
}
