package testkit

import (
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/assert"
)

func TestClock(t *testing.T) {
	start := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	c := NewClock(start)
	assert.Equal(t, start, c.Now())
	c.Add(1500 * time.Millisecond)
	assert.Equal(t, start.Add(1500*time.Millisecond), c.Now())
	c.Add(-time.Second)
	assert.Equal(t, start.Add(500*time.Millisecond), c.Now(), "a clock may go back")
	c.Set(start)
	assert.Equal(t, start, c.Now())
}

func TestValue(t *testing.T) {
	ctr := prometheus.NewCounter(prometheus.CounterOpts{Name: "c"})
	ctr.Add(3)
	assert.Equal(t, 3.0, Value(t, ctr))
	g := prometheus.NewGauge(prometheus.GaugeOpts{Name: "g"})
	g.Set(-2)
	assert.Equal(t, -2.0, Value(t, g))
	cv := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "cv"}, []string{"op"})
	cv.WithLabelValues("a").Add(2)
	assert.Equal(t, 2.0, Value(t, cv, "a"))
	assert.Equal(t, 0.0, Value(t, cv, "b"), "an absent label set reads 0")
	gv := prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "gv"}, []string{"op"})
	gv.WithLabelValues("x").Set(7)
	assert.Equal(t, 7.0, Value(t, gv, "x"))
}
