package quant

import (
	"math"
	"math/big"
	"math/bits"
	"slices"
)

// torchQuantileLimit is the most values torch.quantile takes (2²⁴; more is
// "quantile() input tensor is too large").
const torchQuantileLimit = 1 << 24

// PercentileObserver's amax is the p-th percentile of |x| over every value
// observed, computed exactly as torch.quantile(|x|, p/100) with its default
// linear interpolation: q = float32(p/100), rank = q·(n−1) in float32, the
// values at ⌊rank⌋ and ⌈rank⌉ of the sorted |x| interpolated by torch.lerp
// (a fused multiply-add in float32), so the result equals torch's bit for
// bit. Beyond 2²⁴ values, which torch.quantile refuses, the rank and the
// interpolation are computed in float64.
//
// It keeps every |x| (4 bytes per value); Amax selects the two order
// statistics in expected linear time without sorting.
type PercentileObserver struct {
	stream
	p   float64
	abs []float32
}

// NewPercentile returns an empty percentile observer of the p-th
// percentile, p in (0, 100]; another p is an error wrapping
// kernels.ErrValue.
func NewPercentile(p float64) (*PercentileObserver, error) {
	if err := checkPercentile(p); err != nil {
		return nil, err
	}
	return &PercentileObserver{stream: stream{method: "percentile"}, p: p}, nil
}

// Observe adds a batch (see Observer).
func (o *PercentileObserver) Observe(batch []float32) error {
	if _, err := o.check(batch); err != nil {
		return err
	}
	for _, v := range batch {
		o.abs = append(o.abs, abs32(v))
	}
	return nil
}

// Amax returns the percentile of the |x| observed (see Observer).
func (o *PercentileObserver) Amax() (float32, error) {
	if err := o.ready(); err != nil {
		return 0, err
	}
	r := quantileRank(len(o.abs), o.p)
	selectKth(o.abs, r.lo)
	a := o.abs[r.lo]
	b := a
	if r.hi > r.lo {
		b = slices.Min(o.abs[r.lo+1:])
	}
	return r.lerp(a, b), nil
}

// rank is the position of a quantile among n sorted values: between
// indices lo and hi (lo ≤ hi ≤ lo+1), at weight w from lo.
type rank struct {
	lo, hi int
	w32    float32 // torch's weight, when f32
	w64    float64 // the weight beyond torch's limit
	f32    bool
}

// quantileRank is torch.quantile's rank of the p-th percentile among n
// values (n ≥ 1): q and rank in float32 for n ≤ 2²⁴, in float64 beyond.
func quantileRank(n int, p float64) rank {
	if n <= torchQuantileLimit {
		q := float32(p / 100)
		r := float32(q * float32(n-1))
		lo := int(r)
		hi := int(math.Ceil(float64(r)))
		return rank{lo: lo, hi: min(hi, n-1), w32: float32(r - float32(lo)), f32: true}
	}
	r := min(p/100*float64(n-1), float64(n-1))
	lo := int(r)
	return rank{lo: lo, hi: min(lo+1, n-1), w64: r - float64(lo)}
}

// lerp interpolates the values a (at lo) and b (at hi) as torch.lerp does
// in float32: a + w·(b−a) for w < 0.5, else b − (1−w)·(b−a), each a fused
// multiply-add; beyond torch's limit, in float64.
func (r rank) lerp(a, b float32) float32 {
	if !r.f32 {
		return float32(float64(a) + r.w64*(float64(b)-float64(a)))
	}
	d := float32(b - a)
	if r.w32 < 0.5 {
		return fma32(r.w32, d, a)
	}
	return fma32(r.w32-1, d, b)
}

// fma32 is x·y + z rounded once to float32 (to nearest, ties to even).
func fma32(x, y, z float32) float32 {
	// The exponents of finite float32 products and sums span fewer than
	// 600 bits, so 1024 bits hold x·y + z exactly.
	const prec = 1024
	s := new(big.Float).SetPrec(prec).SetFloat64(float64(x))
	s.Mul(s, big.NewFloat(float64(y)))
	s.Add(s, big.NewFloat(float64(z)))
	f, _ := s.Float32()
	return f
}

// selectKth reorders a (no NaNs) so that a[k] holds what a sorted copy
// holds at k, with a[:k] ≤ a[k] ≤ a[k+1:]: quickselect with a median-of-3
// pivot and a three-way partition (runs of equal values, such as a ReLU's
// zeros, end it early), falling back to sorting what is left after
// 2·log₂(n) + 8 rounds, so that the worst case is O(n log n).
func selectKth(a []float32, k int) {
	lo, hi := 0, len(a)
	budget := 2*bits.Len(uint(len(a))) + 8
	for hi-lo > 16 {
		if budget == 0 {
			break
		}
		budget--
		p := median3(a[lo], a[lo+(hi-lo)/2], a[hi-1])
		lt, i, gt := lo, lo, hi // [lo,lt) < p, [lt,i) == p, [gt,hi) > p
		for i < gt {
			switch v := a[i]; {
			case v < p:
				a[lt], a[i] = v, a[lt]
				lt++
				i++
			case v > p:
				gt--
				a[gt], a[i] = v, a[gt]
			default:
				i++
			}
		}
		switch {
		case k < lt:
			hi = lt
		case k >= gt:
			lo = gt
		default:
			return
		}
	}
	slices.Sort(a[lo:hi])
}

// median3 is the median of three values.
func median3(a, b, c float32) float32 {
	if a > b {
		a, b = b, a
	}
	if b > c {
		b = c
	}
	return max(a, b)
}
