package dirty

import "github.com/prometheus/client_golang/prometheus"

type metrics struct {
	opened prometheus.Counter
	// droppedSessions and droppedFollows count what the caps dropped;
	// swept counts expired sessions trimmed from the live set.
	droppedSessions prometheus.Counter
	droppedFollows  prometheus.Counter
	swept           prometheus.Counter
	marked          prometheus.Counter
	dirty           prometheus.Counter
	clean           prometheus.Counter
	wakes           prometheus.Counter
	waiting         prometheus.Gauge
}

func newMetrics(reg prometheus.Registerer) metrics {
	takes := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "chatd_dirty_polls_total", Help: "Takes and Waits of a dirty mask, by result (dirty or clean).",
	}, []string{"result"})
	m := metrics{
		opened: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "chatd_dirty_sessions_opened_total", Help: "Sessions started by Open (all sections dirty).",
		}),
		marked: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "chatd_dirty_marks_total", Help: "Live sessions marked dirty (one per session per Mark call).",
		}),
		droppedSessions: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "chatd_dirty_sessions_dropped_total", Help: "Sessions dropped from their user's index by MaxSessionsPerUser.",
		}),
		droppedFollows: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "chatd_dirty_follows_dropped_total", Help: "Follows dropped by MaxFollows.",
		}),
		swept: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "chatd_dirty_sessions_swept_total", Help: "Expired sessions trimmed from the live set by Sweep and MarkAll.",
		}),
		dirty: takes.WithLabelValues("dirty"),
		clean: takes.WithLabelValues("clean"),
		wakes: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "chatd_dirty_wakes_total", Help: "Wake-up messages received on this node's wake channel.",
		}),
		waiting: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "chatd_dirty_waiting_polls", Help: "Long polls waiting on this node.",
		}),
	}
	if reg != nil {
		reg.MustRegister(m.opened, m.droppedSessions, m.droppedFollows, m.swept, m.marked, takes, m.wakes, m.waiting)
	}
	return m
}

func (m metrics) take(mask Mask) {
	if mask == 0 {
		m.clean.Inc()
	} else {
		m.dirty.Inc()
	}
}
