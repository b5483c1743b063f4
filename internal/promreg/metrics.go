// Package promreg holds the one Prometheus helper every domain package
// shares.
package promreg

import (
	"errors"

	"github.com/prometheus/client_golang/prometheus"
)

// Register registers c on reg, or returns the collector already registered
// under the same name, so that several instances of a service (the
// simulated nodes of a test, or two services sharing a lock client) may
// share one registry. It panics on any other registration error: a metric
// defined twice with different labels is a programming error.
func Register[C prometheus.Collector](reg prometheus.Registerer, c C) C {
	if err := reg.Register(c); err != nil {
		var are prometheus.AlreadyRegisteredError
		if errors.As(err, &are) {
			if existing, ok := are.ExistingCollector.(C); ok {
				return existing
			}
		}
		panic("register metrics: " + err.Error())
	}
	return c
}
