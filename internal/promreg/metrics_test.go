package promreg

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/assert"
)

func TestRegisterSharesAndPanics(t *testing.T) {
	reg := prometheus.NewRegistry()
	opts := prometheus.CounterOpts{Name: "x_total", Help: "x"}
	a := Register(reg, prometheus.NewCounter(opts))
	b := Register(reg, prometheus.NewCounter(opts))
	assert.Same(t, a, b, "the second instance gets the registered collector")
	assert.Panics(t, func() {
		Register(reg, prometheus.NewCounterVec(opts, []string{"l"}))
	}, "the same name with other labels is a bug")
}
