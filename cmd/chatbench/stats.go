package main

import (
	"math"
	"slices"
	"sort"
	"sync"
	"time"
)

// Lat collects latency samples. It is safe for concurrent use.
type Lat struct {
	mu sync.Mutex
	ns []int64
}

// Add records one sample.
func (l *Lat) Add(d time.Duration) {
	l.mu.Lock()
	l.ns = append(l.ns, int64(d))
	l.mu.Unlock()
}

// AddAll records many samples at once.
func (l *Lat) AddAll(ns []int64) {
	l.mu.Lock()
	l.ns = append(l.ns, ns...)
	l.mu.Unlock()
}

// Merge adds o's samples to l.
func (l *Lat) Merge(o *Lat) {
	o.mu.Lock()
	s := slices.Clone(o.ns)
	o.mu.Unlock()
	l.AddAll(s)
}

// Len is the number of samples.
func (l *Lat) Len() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.ns)
}

// Summary is a latency distribution in milliseconds.
type Summary struct {
	N    int     `json:"n"`
	P50  float64 `json:"p50_ms"`
	P99  float64 `json:"p99_ms"`
	P999 float64 `json:"p999_ms"`
	Max  float64 `json:"max_ms"`
}

// Summary sorts the samples and returns p50, p99, p99.9 and max in ms.
func (l *Lat) Summary() Summary {
	l.mu.Lock()
	defer l.mu.Unlock()
	slices.Sort(l.ns)
	if len(l.ns) == 0 {
		return Summary{}
	}
	ms := func(ns int64) float64 { return float64(ns) / 1e6 }
	return Summary{
		N:    len(l.ns),
		P50:  ms(quantileSorted(l.ns, 0.50)),
		P99:  ms(quantileSorted(l.ns, 0.99)),
		P999: ms(quantileSorted(l.ns, 0.999)),
		Max:  ms(l.ns[len(l.ns)-1]),
	}
}

// quantileSorted returns the q-quantile of sorted samples by the
// nearest-rank method (q in [0,1]).
func quantileSorted[T int64 | float64](s []T, q float64) T {
	if len(s) == 0 {
		return 0
	}
	i := int(math.Ceil(q*float64(len(s)))) - 1
	if i < 0 {
		i = 0
	}
	if i >= len(s) {
		i = len(s) - 1
	}
	return s[i]
}

// median returns the median of xs (the mean of the middle two for an even
// count), or NaN for none.
func median(xs []float64) float64 {
	if len(xs) == 0 {
		return math.NaN()
	}
	s := slices.Clone(xs)
	sort.Float64s(s)
	n := len(s)
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}

// minMax returns the smallest and largest of xs, NaN for none.
func minMax(xs []float64) (lo, hi float64) {
	if len(xs) == 0 {
		return math.NaN(), math.NaN()
	}
	return slices.Min(xs), slices.Max(xs)
}

// spread is (max-min)/median: how far repeats disagree, 0 for one value.
func spread(xs []float64) float64 {
	m := median(xs)
	lo, hi := minMax(xs)
	if len(xs) < 2 || m == 0 || math.IsNaN(m) {
		return 0
	}
	return (hi - lo) / math.Abs(m)
}

// ratios divides a[i] by b[i] pairwise (the interleaved repeats); pairs with
// a zero or missing denominator are left out.
func ratios(a, b []float64) []float64 {
	var r []float64
	for i := range min(len(a), len(b)) {
		if b[i] != 0 && !math.IsNaN(a[i]) && !math.IsNaN(b[i]) {
			r = append(r, a[i]/b[i])
		}
	}
	return r
}

// order returns the interleaved run order for n repeats of k variants:
// A B C, C B A, A B C, … so that drift over the run hits every variant
// alike.
func order(n, k int) [][]int {
	out := make([][]int, n)
	for r := range n {
		row := make([]int, k)
		for i := range k {
			if r%2 == 0 {
				row[i] = i
			} else {
				row[i] = k - 1 - i
			}
		}
		out[r] = row
	}
	return out
}
