package realtime

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/chatd/chatd/internal/promreg"
)

type metrics struct {
	open         prometheus.Gauge
	slowClients  prometheus.Counter
	delivered    prometheus.Counter
	badEvents    prometheus.Counter
	gapFills     prometheus.Counter
	gapsUnfilled prometheus.Counter
	sayWaits     prometheus.Counter
	floodCloses  prometheus.Counter
}

func newMetrics(reg prometheus.Registerer) *metrics {
	m := &metrics{
		open: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "chatd_ws_connections", Help: "Open realtime connections on this node.",
		}),
		slowClients: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "chatd_ws_slow_clients_total", Help: "Clients closed with 1013: their writer stalled with a full queue.",
		}),
		delivered: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "chatd_ws_frames_delivered_total", Help: "Room events handed to local clients.",
		}),
		badEvents: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "chatd_room_bad_events_total", Help: "Malformed payloads received on room channels.",
		}),
		gapFills: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "chatd_room_gap_fills_total", Help: "History reads run after the pub/sub connection came back.",
		}),
		gapsUnfilled: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "chatd_room_gaps_unfilled_total", Help: "Gaps in a room's stream no history read could fill (trimmed, lost, or Redis away): its members were told (resume_gap).",
		}),
		sayWaits: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "chatd_say_queue_full_total", Help: "Times a connection's reader waited because its queued says reached their bound.",
		}),
		floodCloses: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "chatd_ws_flood_closes_total", Help: "Clients closed with 1008 after too many rate-limited frames in the refusal window.",
		}),
	}
	if reg != nil {
		m.open = promreg.Register(reg, m.open)
		m.slowClients = promreg.Register(reg, m.slowClients)
		m.delivered = promreg.Register(reg, m.delivered)
		m.badEvents = promreg.Register(reg, m.badEvents)
		m.gapFills = promreg.Register(reg, m.gapFills)
		m.gapsUnfilled = promreg.Register(reg, m.gapsUnfilled)
		m.sayWaits = promreg.Register(reg, m.sayWaits)
		m.floodCloses = promreg.Register(reg, m.floodCloses)
	}
	return m
}
