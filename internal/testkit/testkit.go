// Package testkit holds the helpers chatd's tests share across packages: an
// injected clock the test moves by hand, the value of a Prometheus counter
// or gauge, and a realtime Transport in memory. It is imported by tests only; nothing in it talks to
// Redis (internal/redistest does) or runs a node (internal/chatdtest does).
package testkit

import (
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

// Clock is a clock a test moves by hand, safe for concurrent use: give its
// Now to a component's Config.Now (or Clock) and Add to move time on.
type Clock struct {
	mu sync.Mutex
	t  time.Time
}

// NewClock returns a Clock standing at start.
func NewClock(start time.Time) *Clock { return &Clock{t: start} }

// Now returns the clock's time.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

// Add moves the clock by d (backwards for a negative d).
func (c *Clock) Add(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

// Set puts the clock at t.
func (c *Clock) Set(t time.Time) {
	c.mu.Lock()
	c.t = t
	c.mu.Unlock()
}

// Value returns the current value of a counter or gauge: c is a
// prometheus.Counter or Gauge (any prometheus.Metric), or a CounterVec or
// GaugeVec read at labels. It fails the test for any other collector.
func Value(tb testing.TB, c prometheus.Collector, labels ...string) float64 {
	tb.Helper()
	var m prometheus.Metric
	switch v := c.(type) {
	case *prometheus.CounterVec:
		m = v.WithLabelValues(labels...)
	case *prometheus.GaugeVec:
		m = v.WithLabelValues(labels...)
	case prometheus.Metric:
		m = v
	default:
		tb.Fatalf("testkit.Value: a %T is neither a metric nor a counter or gauge vector", c)
		return 0
	}
	var out dto.Metric
	if err := m.Write(&out); err != nil {
		tb.Fatalf("testkit.Value: %v", err)
	}
	switch {
	case out.Counter != nil:
		return out.Counter.GetValue()
	case out.Gauge != nil:
		return out.Gauge.GetValue()
	}
	tb.Fatalf("testkit.Value: %T is neither a counter nor a gauge", c)
	return 0
}
