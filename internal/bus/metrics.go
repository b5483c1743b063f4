package bus

import "github.com/prometheus/client_golang/prometheus"

type metrics struct {
	reconnects prometheus.Counter
	received   prometheus.Counter
	channels   prometheus.Gauge
}

func newMetrics(reg prometheus.Registerer) metrics {
	m := metrics{
		reconnects: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "chatd_pubsub_reconnects_total", Help: "Times the node's pub/sub connection was lost and re-established.",
		}),
		received: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "chatd_pubsub_messages_received_total", Help: "Messages received on the node's pub/sub connection.",
		}),
		channels: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "chatd_pubsub_channels", Help: "Channels the node is subscribed to.",
		}),
	}
	if reg != nil {
		reg.MustRegister(m.reconnects, m.received, m.channels)
	}
	return m
}
