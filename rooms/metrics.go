package rooms

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/chatd/chatd/internal/promreg"
)

// metrics are the package's Prometheus collectors. They always exist, so the
// hot path needs no nil checks; they are registered only on
// Config.Registerer.
type metrics struct {
	rejoined, seated, created, failed prometheus.Counter
	joinSeconds                       prometheus.Observer
	lockHold                          prometheus.Observer
	fenceRejected                     prometheus.Counter
	reaped                            prometheus.Counter
	sent                              prometheus.Counter
	counterErrors                     prometheus.Counter
	notReplicated                     prometheus.Counter
	sweepErrors                       prometheus.Counter
	commitSays                        prometheus.Observer // says per send commit
	sendWaiting                       prometheus.Gauge    // SendMany calls waiting for a commit
	sendSeconds                       prometheus.Observer // a SendMany call: its wait and its commit
}

func newMetrics(reg prometheus.Registerer) *metrics {
	joins := prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: "chatd", Subsystem: "rooms", Name: "joins_total",
		Help: "Join calls by result: rejoined (already seated), seated (free seat), created (new room), error.",
	}, []string{"result"})
	joinSeconds := prometheus.NewHistogram(prometheus.HistogramOpts{
		Namespace: "chatd", Subsystem: "rooms", Name: "join_seconds",
		Help:    "Time a successful Join took, lock waits included.",
		Buckets: prometheus.ExponentialBuckets(0.0002, 2, 15), // 0.2ms .. 3.3s
	})
	lockHold := prometheus.NewHistogram(prometheus.HistogramOpts{
		Namespace: "chatd", Subsystem: "rooms", Name: "lock_hold_seconds",
		Help:    "Time the lobby lock was held to create a room.",
		Buckets: prometheus.ExponentialBuckets(0.0002, 2, 15),
	})
	fence := prometheus.NewCounter(prometheus.CounterOpts{
		Namespace: "chatd", Subsystem: "rooms", Name: "fence_rejected_total",
		Help: "Room creations refused because the lobby lock's fence had moved on (the holder paused past its TTL).",
	})
	reaped := prometheus.NewCounter(prometheus.CounterOpts{
		Namespace: "chatd", Subsystem: "rooms", Name: "seats_reaped_total",
		Help: "Expired seats removed by Sweep.",
	})
	sent := prometheus.NewCounter(prometheus.CounterOpts{
		Namespace: "chatd", Subsystem: "rooms", Name: "messages_sent_total",
		Help: "Messages appended and published by this node.",
	})
	counterErrors := prometheus.NewCounter(prometheus.CounterOpts{
		Namespace: "chatd", Subsystem: "rooms", Name: "counter_errors_total",
		Help: "Failed updates of the global message and room counters and of the sweeper's and the listing's lobby indexes (the operation itself succeeded; the index heals on the next renewal or sweep).",
	})
	notReplicated := prometheus.NewCounter(prometheus.CounterOpts{
		Namespace: "chatd", Subsystem: "rooms", Name: "messages_not_replicated_total",
		Help: "Messages stored under message.durability=replica that no replica acknowledged in time (answered ErrNotReplicated).",
	})
	sweepErrors := prometheus.NewCounter(prometheus.CounterOpts{
		Namespace: "chatd", Subsystem: "rooms", Name: "sweep_errors_total",
		Help: "Sweeps of RunSweeper that failed.",
	})
	commitSays := prometheus.NewHistogram(prometheus.HistogramOpts{
		Namespace: "chatd", Subsystem: "rooms", Name: "send_commit_says",
		Help:    "Says per send commit: the says of the SendMany calls that one commit (claims, then one script call per lobby) carried.",
		Buckets: prometheus.ExponentialBuckets(1, 2, 11), // 1 .. 1024
	})
	sendWaiting := prometheus.NewGauge(prometheus.GaugeOpts{
		Namespace: "chatd", Subsystem: "rooms", Name: "send_waiting_calls",
		Help: "SendMany calls waiting for the send commit in flight to end (they go out together in the next).",
	})
	sendSeconds := prometheus.NewHistogram(prometheus.HistogramOpts{
		Namespace: "chatd", Subsystem: "rooms", Name: "send_seconds",
		Help:    "How long a SendMany call with says to send took: its wait for a send commit and that commit's round trip (the say's time in Redis as its sender sees it, before any fan-out).",
		Buckets: prometheus.ExponentialBuckets(0.0001, 2, 16), // 100 µs .. 3.3 s
	})
	if reg != nil {
		commitSays = promreg.Register(reg, commitSays)
		sendSeconds = promreg.Register(reg, sendSeconds)
		sendWaiting = promreg.Register(reg, sendWaiting)
		joins = promreg.Register(reg, joins)
		joinSeconds = promreg.Register(reg, joinSeconds)
		lockHold = promreg.Register(reg, lockHold)
		fence = promreg.Register(reg, fence)
		reaped = promreg.Register(reg, reaped)
		sent = promreg.Register(reg, sent)
		counterErrors = promreg.Register(reg, counterErrors)
		notReplicated = promreg.Register(reg, notReplicated)
		sweepErrors = promreg.Register(reg, sweepErrors)
	}
	return &metrics{
		rejoined:      joins.WithLabelValues("rejoined"),
		seated:        joins.WithLabelValues("seated"),
		created:       joins.WithLabelValues("created"),
		failed:        joins.WithLabelValues("error"),
		joinSeconds:   joinSeconds,
		lockHold:      lockHold,
		fenceRejected: fence,
		reaped:        reaped,
		sent:          sent,
		counterErrors: counterErrors,
		notReplicated: notReplicated,
		sweepErrors:   sweepErrors,
		commitSays:    commitSays,
		sendWaiting:   sendWaiting,
		sendSeconds:   sendSeconds,
	}
}
