package realtime

import (
	"runtime"
	rtmetrics "runtime/metrics"
	"sync"
	"time"
)

// procStats samples what a node reports of its own process with each
// heartbeat (the admin console's Nodes table): CPU use since the previous
// sample, the Go runtime's memory and the goroutines.
type procStats struct {
	mu      sync.Mutex
	lastCPU time.Duration // the process's CPU time at the last sample
	lastAt  time.Time
	samples []rtmetrics.Sample
}

// The runtime/metrics a sample reads.
const (
	metricTotal    = "/memory/classes/total:bytes"
	metricReleased = "/memory/classes/heap/released:bytes"
	metricHeap     = "/memory/classes/heap/objects:bytes"
)

// procSample is one sample.
type procSample struct {
	cpu         float64 // cores busy on average since the previous sample
	memoryBytes uint64
	heapBytes   uint64
	goroutines  int
}

// sample reads the figures now; the CPU use is the average since the
// previous sample (0 for the first).
func (p *procStats) sample(now time.Time) procSample {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.samples == nil {
		p.samples = []rtmetrics.Sample{{Name: metricTotal}, {Name: metricReleased}, {Name: metricHeap}}
	}
	rtmetrics.Read(p.samples)
	val := func(i int) uint64 {
		if p.samples[i].Value.Kind() != rtmetrics.KindUint64 {
			return 0
		}
		return p.samples[i].Value.Uint64()
	}
	out := procSample{heapBytes: val(2), goroutines: runtime.NumGoroutine()}
	if total, released := val(0), val(1); total > released {
		out.memoryBytes = total - released
	}
	cpu, ok := processCPU()
	if ok && !p.lastAt.IsZero() && now.After(p.lastAt) && cpu >= p.lastCPU {
		out.cpu = float64(cpu-p.lastCPU) / float64(now.Sub(p.lastAt))
	}
	if ok {
		p.lastCPU, p.lastAt = cpu, now
	}
	return out
}
