package quant

import (
	"fmt"
	"math"
	"math/bits"

	"github.com/zbench/zbench/kernels"
)

// Histogram counts |x| in a fixed number of equal bins over [0, R), where
// R is the smallest power of two above the largest |x| added so far (the
// running amax, which is at least R/2). Bin i holds the values in
// [i·w, (i+1)·w), w = R/Bins. When amax reaches R, R doubles as often as
// needed and each doubling adds neighbouring bins in pairs: exactly the
// histogram the values would have had over the new range, since scaling by
// a power of two is exact. A histogram therefore depends only on the
// multiset of values added, not on how they were split into batches, and
// it never blurs counts across bins (an approximate re-binning to
// [0, amax] on each growth would, a little more each time).
//
// Compared with TensorRT's 2048 bins over [0, amax], between half and all
// of the bins lie below amax: the resolution w is at most 2·amax/Bins.
//
// Zeros seen before any non-zero value are counted in bin 0, where every
// range puts them.
type Histogram struct {
	counts []int64
	exp    int     // R = 2^exp, once amax > 0
	toBin  float64 // Bins/R
	amax   float32
	n      int64
	zeros  int64 // of the n values, those equal to 0 (in bin 0)
}

// NewHistogram returns an empty histogram of the given number of bins:
// even and in [2, MaxBins], else an error wrapping kernels.ErrValue.
func NewHistogram(bins int) (*Histogram, error) {
	if bins < 2 || bins > MaxBins || bins%2 != 0 {
		return nil, fmt.Errorf("quant: histogram of %d bins: want an even count in [2, %d]: %w", bins, MaxBins, kernels.ErrValue)
	}
	return &Histogram{counts: make([]int64, bins)}, nil
}

// Add counts the |x| of a batch. A NaN or infinity is an error wrapping
// kernels.ErrValue naming the element, and nothing of the batch is
// counted.
func (h *Histogram) Add(x []float32) error {
	amax, i := absMax(x)
	if i >= 0 {
		return fmt.Errorf("quant: histogram: element %d is %v: %w", i, x[i], kernels.ErrValue)
	}
	h.add(x, amax)
	return nil
}

// add counts x, whose largest |x| is amax and which holds no NaN or
// infinity.
func (h *Histogram) add(x []float32, amax float32) {
	h.grow(amax)
	h.n += int64(len(x))
	if h.amax == 0 {
		h.counts[0] += int64(len(x)) // all zeros
		h.zeros += int64(len(x))
		return
	}
	for _, v := range x {
		a := abs32(v)
		if a == 0 {
			h.zeros++
		}
		// Exact: |v| has 24 significant bits, Bins/R at most 20 and
		// |v| < R, so the product is exact and below Bins.
		h.counts[int(float64(a)*h.toBin)]++
	}
}

// grow makes amax the running amax, doubling R until it exceeds it.
func (h *Histogram) grow(amax float32) {
	if amax <= h.amax {
		return
	}
	_, e := math.Frexp(float64(amax)) // amax < 2^e ≤ 2·amax
	if h.amax == 0 {
		h.exp = e
	} else if e > h.exp {
		shift := e - h.exp
		if shift >= bits.Len(uint(len(h.counts))) {
			var total int64
			for i, c := range h.counts {
				total += c
				h.counts[i] = 0
			}
			h.counts[0] = total
		} else {
			// Bin i goes to i>>shift ≤ i, which was already read.
			for i, c := range h.counts {
				h.counts[i] = 0
				h.counts[i>>shift] += c
			}
		}
		h.exp = e
	}
	h.toBin = math.Ldexp(float64(len(h.counts)), -h.exp)
	h.amax = amax
}

// Bins returns the number of bins.
func (h *Histogram) Bins() int { return len(h.counts) }

// Counts returns a copy of the bin counts.
func (h *Histogram) Counts() []int64 { return append([]int64(nil), h.counts...) }

// Total returns how many values were added.
func (h *Histogram) Total() int64 { return h.n }

// Amax returns the largest |x| added (0 before any non-zero value).
func (h *Histogram) Amax() float32 { return h.amax }

// Range returns R, the end of the last bin: the smallest power of two
// above Amax, or 0 before any non-zero value.
func (h *Histogram) Range() float64 {
	if h.amax == 0 {
		return 0
	}
	return math.Ldexp(1, h.exp)
}

// Width returns the bins' width R/Bins (0 before any non-zero value).
func (h *Histogram) Width() float64 { return h.Range() / float64(len(h.counts)) }

// empty returns an error wrapping ErrNoData when nothing was added.
func (h *Histogram) empty(what string) error {
	if h.n == 0 {
		return fmt.Errorf("quant: %s of an empty histogram: %w", what, ErrNoData)
	}
	return nil
}

// PercentileAmax estimates the p-th percentile of the |x| added, p in
// (0, 100], as PercentileObserver would compute it exactly: the rank is
// torch.quantile's, and each of the two order statistics it interpolates
// is placed within its bin by the rank inside the bin (the bin's values
// taken as evenly spread, except that the histogram counts exact zeros,
// which are 0), and at most Amax. Each then lies in the same bin as the
// exact value, so
//
//	|PercentileAmax − exact| ≤ Width() = R/Bins ≤ 2·Amax/Bins
//
// (plus the float32 rounding of both): at most amax/1024 with 2048 bins.
func (h *Histogram) PercentileAmax(p float64) (float32, error) {
	if err := checkPercentile(p); err != nil {
		return 0, err
	}
	if err := h.empty("percentile"); err != nil {
		return 0, err
	}
	if h.amax == 0 {
		return 0, nil
	}
	r := quantileRank(int(h.n), p)
	a, b := h.orderStat(int64(r.lo)), h.orderStat(int64(r.hi))
	w := float64(r.w32)
	if !r.f32 {
		w = r.w64
	}
	return float32(a + w*(b-a)), nil
}

// orderStat estimates the value of rank k (0-based) among the |x| added.
func (h *Histogram) orderStat(k int64) float64 {
	if k < h.zeros {
		return 0
	}
	width := h.Width()
	before := h.zeros // bin 0 holds the zeros first
	for i, c := range h.counts {
		if i == 0 {
			c -= h.zeros
		}
		if k < before+c {
			v := width * (float64(i) + (float64(k-before)+0.5)/float64(c))
			return min(v, float64(h.amax))
		}
		before += c
	}
	return float64(h.amax) // not reached: k < n
}

// HistPercentileObserver's amax is the p-th percentile of |x| read from a
// Histogram (see Histogram.PercentileAmax for its error bound), in memory
// independent of the number of values.
type HistPercentileObserver struct {
	histObserver
	p float64
}

// NewHistPercentile returns an empty histogram percentile observer: p in
// (0, 100], bins even in [2, MaxBins]; else an error wrapping
// kernels.ErrValue.
func NewHistPercentile(p float64, bins int) (*HistPercentileObserver, error) {
	if err := checkPercentile(p); err != nil {
		return nil, err
	}
	o, err := newHistObserver("percentile-hist", bins, 2)
	if err != nil {
		return nil, err
	}
	return &HistPercentileObserver{histObserver: o, p: p}, nil
}

// Amax returns the estimated percentile (see Observer).
func (o *HistPercentileObserver) Amax() (float32, error) {
	if err := o.ready(); err != nil {
		return 0, err
	}
	return o.h.PercentileAmax(o.p)
}

// histObserver is an observer collecting a Histogram.
type histObserver struct {
	stream
	h *Histogram
}

// newHistObserver returns a histogram observer of method with bins bins,
// at least minBins.
func newHistObserver(method string, bins, minBins int) (histObserver, error) {
	if bins < minBins {
		return histObserver{}, fmt.Errorf("quant: %s observer: %d bins, want at least %d: %w", method, bins, minBins, kernels.ErrValue)
	}
	h, err := NewHistogram(bins)
	if err != nil {
		return histObserver{}, fmt.Errorf("quant: %s observer: %w", method, err)
	}
	return histObserver{stream: stream{method: method}, h: h}, nil
}

// Observe adds a batch to the histogram (see Observer).
func (o *histObserver) Observe(batch []float32) error {
	amax, err := o.check(batch)
	if err != nil {
		return err
	}
	o.h.add(batch, amax)
	return nil
}

// Histogram returns the observer's histogram (not a copy).
func (o *histObserver) Histogram() *Histogram { return o.h }
