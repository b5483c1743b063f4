package matchmaking

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/chatd/chatd/internal/promreg"
)

// metrics are the package's Prometheus collectors, labelled by queue (a
// handful: the queues an operator defined). They always exist; they are
// registered only on Config.Registerer.
type metrics struct {
	tickets       *prometheus.CounterVec   // queue, event: submitted, cancelled, matched, expired
	matches       *prometheus.CounterVec   // queue
	wait          *prometheus.HistogramVec // queue: a ticket's wait until its match
	depth         *prometheus.GaugeVec     // queue: waiting tickets, by the holder
	oldest        *prometheus.GaugeVec     // queue: the oldest ticket's wait, by the holder
	holding       *prometheus.GaugeVec     // queue: 1 while this node runs the queue's matcher
	fenceRejected *prometheus.CounterVec   // queue
	announce      *prometheus.CounterVec   // queue, hook (matched, expired), result (ok, failed, dropped)
	ticks         *prometheus.CounterVec   // queue
}

func newMetrics(reg prometheus.Registerer) *metrics {
	m := &metrics{
		tickets: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "chatd", Subsystem: "matchmaking", Name: "tickets_total",
			Help: "Tickets by queue and event: submitted, cancelled (by this node), matched and expired (by the queue's matcher on this node).",
		}, []string{"queue", "event"}),
		matches: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "chatd", Subsystem: "matchmaking", Name: "matches_total",
			Help: "Matches formed by this node's matchers.",
		}, []string{"queue"}),
		wait: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: "chatd", Subsystem: "matchmaking", Name: "wait_seconds",
			Help:    "How long each matched ticket waited, from submission to its match.",
			Buckets: prometheus.ExponentialBuckets(0.1, 2, 12), // 0.1s .. 205s
		}, []string{"queue"}),
		depth: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Namespace: "chatd", Subsystem: "matchmaking", Name: "queue_depth",
			Help: "Waiting tickets, as the queue's matcher last saw them (only on the node that runs it).",
		}, []string{"queue"}),
		oldest: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Namespace: "chatd", Subsystem: "matchmaking", Name: "oldest_wait_seconds",
			Help: "How long the oldest waiting ticket has waited, as the queue's matcher last saw it.",
		}, []string{"queue"}),
		holding: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Namespace: "chatd", Subsystem: "matchmaking", Name: "matcher_holding",
			Help: "1 while this node holds the queue's lock and runs its matcher.",
		}, []string{"queue"}),
		fenceRejected: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "chatd", Subsystem: "matchmaking", Name: "fence_rejected_total",
			Help: "Formations refused because another node had taken the queue's lock since (this node had paused past its lease).",
		}, []string{"queue"}),
		announce: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "chatd", Subsystem: "matchmaking", Name: "announcements_total",
			Help: "Hook calls by hook (matched, expired) and result (ok, failed: retried later, dropped: its record expired before a hook took it).",
		}, []string{"queue", "hook", "result"}),
		ticks: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "chatd", Subsystem: "matchmaking", Name: "matcher_ticks_total",
			Help: "Matcher rounds run by this node.",
		}, []string{"queue"}),
	}
	if reg != nil {
		m.tickets = promreg.Register(reg, m.tickets)
		m.matches = promreg.Register(reg, m.matches)
		m.wait = promreg.Register(reg, m.wait)
		m.depth = promreg.Register(reg, m.depth)
		m.oldest = promreg.Register(reg, m.oldest)
		m.holding = promreg.Register(reg, m.holding)
		m.fenceRejected = promreg.Register(reg, m.fenceRejected)
		m.announce = promreg.Register(reg, m.announce)
		m.ticks = promreg.Register(reg, m.ticks)
	}
	return m
}

// forget removes a queue's gauges when this node stops running its matcher,
// so that only the holder exports them.
func (m *metrics) forget(queue string) {
	m.depth.DeleteLabelValues(queue)
	m.oldest.DeleteLabelValues(queue)
	m.holding.DeleteLabelValues(queue)
}
