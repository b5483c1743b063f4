package seen

import (
	"fmt"
	"math"

	"github.com/bits-and-blooms/bloom/v3"
)

// The shape of a user's scalable filter (Almeida et al., "Scalable Bloom
// Filters", 2007): generation i holds FirstCapacity·Growth^i items at the
// rate B·(1-Tightening)·Tightening^i, until a generation would hold
// Capacity or more; that one and every later one hold Capacity items at
// the rate of the fixed-size design. See plan.
const (
	// FirstCapacity is the items the first generation of a user holds.
	FirstCapacity = 128
	// Growth is how many times larger each generation is than the one
	// before, until Capacity.
	Growth = 4
	// Tightening is the ratio of the false-positive rates of consecutive
	// growing generations.
	Tightening = 0.8
)

// size is the shape of one generation: m bits, k hashes, c items counted
// before the next generation starts. An item's bits in it are those of
// bloom.New(m, k): bloom.Locations(item, k), each modulo m.
type size struct {
	m, k uint
	c    int
}

// plan is the live settings turned into generation sizes.
type plan struct {
	// sizes are those of generation 0, 1, ...; generation i >= len(sizes)
	// has the last one (Capacity items).
	sizes []size
	// keep is the items the older generations must hold for the oldest to
	// be dropped: (Generations-1)·Capacity.
	keep int
	// k is the most hashes of any size.
	k uint
}

// maxBits is the most bits a Redis string holds (512 MB); the scripts'
// arithmetic also needs m < 2^32.
const maxBits = 1 << 32

// newPlan returns the sizes of a user's generations for capacity items per
// full-size generation, the target rate p and g full-size generations kept.
//
// Which generations a filter keeps: when a new one starts, the oldest is
// dropped while the other older ones still hold (g-1)·capacity items. So a
// filter is a run of growing generations, or growing ones and at most g-1
// full-size ones, or g full-size ones; never more. The rates make each of
// those within p: a full-size generation gets p' with 1-(1-p')^g = p (g of
// them together answer wrongly at rate p, as in the fixed-size design), and
// the growing ones share what g-1 full-size ones leave, B = p-(g-1)·p', as
// B·(1-r)·r^i for generation i (their sum is below B for any number of
// them). A false positive of a filter is one of any kept generation, so its
// rate is at most the sum of theirs.
func newPlan(capacity int, p float64, g int) (plan, error) {
	full := generationFP(p, g)
	budget := p - float64(g-1)*full
	if budget <= 0 { // only for rates near 1
		budget = full
	}
	pl := plan{keep: (g - 1) * capacity}
	for i, c := 0, FirstCapacity; ; i, c = i+1, c*Growth {
		s := size{c: c}
		rate := budget * (1 - Tightening) * math.Pow(Tightening, float64(i))
		if c >= capacity {
			s.c, rate = capacity, full
		}
		s.m, s.k = bloom.EstimateParameters(uint(s.c), rate)
		if s.m >= maxBits {
			return plan{}, fmt.Errorf("capacity %d at rate %g needs %d bits, more than a Redis string holds", s.c, rate, s.m)
		}
		pl.sizes = append(pl.sizes, s)
		pl.k = max(pl.k, s.k)
		if s.c == capacity {
			return pl, nil
		}
	}
}

// generationFP returns the false-positive rate of one of g generations such
// that all g together have rate p.
func generationFP(p float64, g int) float64 {
	return -math.Expm1(math.Log1p(-p) / float64(g))
}
