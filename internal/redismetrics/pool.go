package redismetrics

import (
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"
)

// poolStater is a client with a connection pool (every go-redis client).
type poolStater interface {
	PoolStats() *redis.PoolStats
}

// poolCollector reads PoolStats at scrape time, summed over the
// instrumented clients (on a Cluster, go-redis sums its nodes' pools).
type poolCollector struct {
	mu      sync.Mutex
	clients []poolStater
}

var _ prometheus.Collector = (*poolCollector)(nil)

func (p *poolCollector) add(c poolStater) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.clients = append(p.clients, c)
}

var (
	poolLabels = []string{"pool"} // "commands", or "pipelines" for go-redis's pipeline pool
	descHits   = prometheus.NewDesc("chatd_redis_pool_hits_total",
		"Connections taken from the pool idle (no dial needed).", poolLabels, nil)
	descMisses = prometheus.NewDesc("chatd_redis_pool_misses_total",
		"Connection requests that found no idle connection (a dial or a wait followed).", poolLabels, nil)
	descTimeouts = prometheus.NewDesc("chatd_redis_pool_timeouts_total",
		"Connection requests that waited past the pool timeout (the command failed: Redis too slow or the pool too small).", poolLabels, nil)
	descStale = prometheus.NewDesc("chatd_redis_pool_stale_conns_total",
		"Connections removed from the pool as stale (idle too long or broken).", poolLabels, nil)
	descTotal = prometheus.NewDesc("chatd_redis_pool_conns",
		"Connections in the pool, in use or idle.", poolLabels, nil)
	descIdle = prometheus.NewDesc("chatd_redis_pool_idle_conns",
		"Idle connections in the pool.", poolLabels, nil)
)

// Describe sends the pool metrics' descriptions.
func (p *poolCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descHits, descMisses, descTimeouts, descStale, descTotal, descIdle} {
		ch <- d
	}
}

// Collect reads the pools' stats now.
func (p *poolCollector) Collect(ch chan<- prometheus.Metric) {
	p.mu.Lock()
	clients := append([]poolStater(nil), p.clients...)
	p.mu.Unlock()
	var main, pipe redis.PoolStats
	havePipe := false
	for _, c := range clients {
		s := c.PoolStats()
		addStats(&main, (*redis.PoolStats)(s))
		if s.PipelineStats != nil {
			havePipe = true
			addStats(&pipe, (*redis.PoolStats)(s.PipelineStats))
		}
	}
	emit(ch, "commands", &main)
	if havePipe {
		emit(ch, "pipelines", &pipe)
	}
}

func addStats(acc, s *redis.PoolStats) {
	acc.Hits += s.Hits
	acc.Misses += s.Misses
	acc.Timeouts += s.Timeouts
	acc.StaleConns += s.StaleConns
	acc.TotalConns += s.TotalConns
	acc.IdleConns += s.IdleConns
}

func emit(ch chan<- prometheus.Metric, pool string, s *redis.PoolStats) {
	ch <- prometheus.MustNewConstMetric(descHits, prometheus.CounterValue, float64(s.Hits), pool)
	ch <- prometheus.MustNewConstMetric(descMisses, prometheus.CounterValue, float64(s.Misses), pool)
	ch <- prometheus.MustNewConstMetric(descTimeouts, prometheus.CounterValue, float64(s.Timeouts), pool)
	ch <- prometheus.MustNewConstMetric(descStale, prometheus.CounterValue, float64(s.StaleConns), pool)
	ch <- prometheus.MustNewConstMetric(descTotal, prometheus.GaugeValue, float64(s.TotalConns), pool)
	ch <- prometheus.MustNewConstMetric(descIdle, prometheus.GaugeValue, float64(s.IdleConns), pool)
}
