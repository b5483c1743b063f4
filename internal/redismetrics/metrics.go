package redismetrics

import (
	"context"
	"crypto/sha1"
	"encoding/hex"
	"net"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"github.com/chatd/chatd/internal/redisx"
)

// buckets span a loopback round trip (~100 µs) to chatd's 2 s read
// timeout.
var buckets = []float64{.0001, .00025, .0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5}

// Metrics are the Redis client metrics of one process.
type Metrics struct {
	duration *prometheus.HistogramVec
	errors   *prometheus.CounterVec
	pool     *poolCollector

	observers sync.Map // family → prometheus.Observer
}

// New makes the metrics and registers them on reg.
func New(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "chatd_redis_command_duration_seconds",
			Help:    "Redis command latency seen by the client, by command (a Lua script by its name; each command of a pipeline with the pipeline's round trip).",
			Buckets: buckets,
		}, []string{"cmd"}),
		errors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "chatd_redis_errors_total",
			Help: "Failed Redis commands by command and kind (timeout, network, oom, busy, moved, noscript, reply, other); cmd=dial for failed connects.",
		}, []string{"cmd", "kind"}),
		pool: &poolCollector{},
	}
	reg.MustRegister(m.duration, m.errors, m.pool)
	return m
}

// Instrument adds the hook to rdb — to each node's client on a Cluster,
// so call it before rdb's first command — and adds rdb's pool to the pool
// metrics. Instrumenting several clients adds up their pools.
func (m *Metrics) Instrument(rdb redis.UniversalClient) {
	h := m.Hook()
	if cc, ok := rdb.(*redis.ClusterClient); ok {
		cc.OnNewNode(func(node *redis.Client) { node.AddHook(h) })
	} else {
		rdb.AddHook(h)
	}
	m.pool.add(rdb)
}

// Hook returns the go-redis hook that times and classifies commands.
func (m *Metrics) Hook() redis.Hook { return hook{m} }

type hook struct{ m *Metrics }

var _ redis.Hook = hook{}

// DialHook counts failed dials (cmd="dial").
func (h hook) DialHook(next redis.DialHook) redis.DialHook {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		cn, err := next(ctx, network, addr)
		if k := Kind(err); k != "" {
			h.m.errors.WithLabelValues("dial", k).Inc()
		}
		return cn, err
	}
}

// ProcessHook times one command.
func (h hook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		start := time.Now()
		err := next(ctx, cmd)
		d := time.Since(start).Seconds()
		fam := Family(cmd)
		h.m.observer(fam).Observe(d)
		if k := Kind(err); k != "" {
			h.m.errors.WithLabelValues(fam, k).Inc()
		}
		return err
	}
}

// ProcessPipelineHook times a pipeline and observes each of its commands
// with its round trip.
func (h hook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		start := time.Now()
		err := next(ctx, cmds)
		d := time.Since(start).Seconds()
		for _, cmd := range cmds {
			fam := Family(cmd)
			h.m.observer(fam).Observe(d)
			if k := Kind(cmd.Err()); k != "" {
				h.m.errors.WithLabelValues(fam, k).Inc()
			}
		}
		return err
	}
}

// observer is the histogram of a family, cached: a label lookup hashes the
// value each time, a sync.Map read of a hot key does not lock.
func (m *Metrics) observer(fam string) prometheus.Observer {
	if o, ok := m.observers.Load(fam); ok {
		return o.(prometheus.Observer)
	}
	o := m.duration.WithLabelValues(fam)
	m.observers.Store(fam, o)
	return o
}

// Family is the cmd label of a command: its name in lower case, or for
// EVALSHA and EVAL (and their _RO forms) of a script made with
// redisx.NewScript, the script's name.
func Family(cmd redis.Cmder) string {
	name := cmd.Name()
	switch name {
	case "evalsha", "evalsha_ro":
		if sha, ok := arg(cmd, 1); ok {
			if n, ok := redisx.ScriptName(sha); ok {
				return n
			}
		}
	case "eval", "eval_ro":
		// the NOSCRIPT fallback: rare, so hashing the source is cheap enough
		if src, ok := arg(cmd, 1); ok {
			sum := sha1.Sum([]byte(src))
			if n, ok := redisx.ScriptName(hex.EncodeToString(sum[:])); ok {
				return n
			}
		}
	}
	return name
}

func arg(cmd redis.Cmder, i int) (string, bool) {
	args := cmd.Args()
	if i >= len(args) {
		return "", false
	}
	s, ok := args[i].(string)
	return s, ok
}
