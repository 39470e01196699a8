package quant

import (
	"fmt"
	"math"

	"github.com/zbench/zbench/kernels"
)

// The KL and MSE searches' parameters, pytorch-quantization's defaults for
// int8: thresholds from bin 128 on, one bin apart, and 128 levels for |x|.
const (
	startBin = 128
	levels   = 1 << 7
)

// EntropyAmax returns the threshold that minimises the KL divergence
// between the histogram and its 128-level quantization: TensorRT's
// entropy calibration, with the semantics of pytorch-quantization's
// _compute_amax_entropy (stride 1, start bin 128, 8 bits signed). Over the
// bins' counts c, with c[0] replaced by c[1] first (as there: the zeros of
// a ReLU do not dominate), for each i in [128, Bins]:
//
//   - P is c[:i] with the outliers Σ c[i:] added to its last bin;
//   - Q splits bins 0…i−1 into 128 groups (bin j in group ⌊128·j/i⌋) and
//     gives each non-empty bin its group's mean over the group's non-empty
//     bins, and each empty bin 0;
//   - KL(P‖Q) = Σ_j p_j·ln(p_j/q_j) over p_j > 0 with P and Q normalised
//     (scipy.stats.entropy; +Inf where q_j = 0 < p_j).
//
// The threshold is the edge i·Width() of the last i with the smallest KL
// (ties go to the larger threshold), capped at Amax (above Amax every bin
// is empty, so the cap only drops the empty top of the power-of-two range).
// The smallest threshold searched is 128·Width() = R/16 with 2048 bins:
// between Amax/16 (TensorRT's, over [0, Amax]) and Amax/8.
// It is 0 for a histogram of zeros; an empty histogram is an error
// wrapping ErrNoData, and one of fewer than 129 bins an error wrapping
// kernels.ErrValue.
func (h *Histogram) EntropyAmax() (float32, error) {
	if err := h.searchable("entropy"); err != nil {
		return 0, err
	}
	if h.amax == 0 {
		return 0, nil
	}
	nb := len(h.counts)
	c := make([]float64, nb)
	for j, v := range h.counts {
		c[j] = float64(v)
	}
	c[0] = c[1]
	// above[i] = Σ c[i:]; the sums of integer counts are exact in float64.
	above := make([]float64, nb+1)
	for j := nb - 1; j >= 0; j-- {
		above[j] = above[j+1] + c[j]
	}
	total := above[0]
	var groupSum, groupN [levels]float64
	best, bestI := math.Inf(1), -1
	for i := startBin; i <= nb; i++ {
		groupSum, groupN = [levels]float64{}, [levels]float64{}
		for j := range i {
			if c[j] != 0 {
				g := j * levels / i
				groupSum[g] += c[j]
				groupN[g]++
			}
		}
		qTotal := total - above[i]
		kl := 0.0
		for j := range i {
			p := c[j]
			if j == i-1 {
				p += above[i]
			}
			if p == 0 {
				continue
			}
			if c[j] == 0 {
				kl = math.Inf(1)
				break
			}
			g := j * levels / i
			pn, qn := p/total, groupSum[g]/groupN[g]/qTotal
			kl += pn * math.Log(pn/qn)
		}
		if kl <= best {
			best, bestI = kl, i
		}
	}
	return min(float32(float64(bestI)*h.Width()), h.amax), nil
}

// MSEAmax returns the clipping point that minimises the mean squared
// quantize-dequantize error of the histogram, as pytorch-quantization's
// _compute_amax_mse does (start bin 128, stride 1): the candidates are the
// bin centres (i+½)·Width() for i in [128, Bins), each bin's values are
// taken to sit at its centre x_j, and the error of candidate a is
//
//	Σ_j c_j·(s·clamp(round(x_j/s), −127, 127) − x_j)²,  s = a/127,
//
// in float64 with ties to even (the kernels' scheme). The first smallest
// candidate wins, capped at Amax. It is 0 for a histogram of zeros; an
// empty histogram is an error wrapping ErrNoData, and one of fewer than
// 129 bins an error wrapping kernels.ErrValue.
func (h *Histogram) MSEAmax() (float32, error) {
	if err := h.searchable("mse"); err != nil {
		return 0, err
	}
	if h.amax == 0 {
		return 0, nil
	}
	w := h.Width()
	best, bestA := math.Inf(1), 0.0
	for i := startBin; i < len(h.counts); i++ {
		a := (float64(i) + 0.5) * w
		if e := h.qdqError(a); e < best {
			best, bestA = e, a
		}
	}
	return min(float32(bestA), h.amax), nil
}

// qdqError is the histogram's summed squared quantize-dequantize error at
// clipping point a, the values at the bin centres.
func (h *Histogram) qdqError(a float64) float64 {
	w := h.Width()
	s := a / kernels.QMax
	sum := 0.0
	for j, c := range h.counts {
		if c == 0 {
			continue
		}
		x := (float64(j) + 0.5) * w
		d := s*min(math.RoundToEven(x/s), kernels.QMax) - x
		sum += float64(c) * d * d
	}
	return sum
}

// searchable checks that the histogram can be searched for a threshold.
func (h *Histogram) searchable(what string) error {
	if len(h.counts) <= startBin {
		return fmt.Errorf("quant: %s search over %d bins: want more than %d: %w", what, len(h.counts), startBin, kernels.ErrValue)
	}
	return h.empty(what)
}

// EntropyObserver's amax is Histogram.EntropyAmax of a histogram of the
// |x| observed: TensorRT's KL-divergence calibration.
type EntropyObserver struct{ histObserver }

// NewEntropy returns an empty entropy observer over bins bins (TensorRT's
// is DefaultBins): even, in [256, MaxBins], else an error wrapping
// kernels.ErrValue.
func NewEntropy(bins int) (*EntropyObserver, error) {
	o, err := newHistObserver("entropy", bins, 2*startBin)
	if err != nil {
		return nil, err
	}
	return &EntropyObserver{o}, nil
}

// Amax returns the KL-divergence threshold (see Observer).
func (o *EntropyObserver) Amax() (float32, error) {
	if err := o.ready(); err != nil {
		return 0, err
	}
	return o.h.EntropyAmax()
}

// MSEObserver's amax is Histogram.MSEAmax of a histogram of the |x|
// observed.
type MSEObserver struct{ histObserver }

// NewMSE returns an empty MSE observer over bins bins: even, in
// [256, MaxBins], else an error wrapping kernels.ErrValue.
func NewMSE(bins int) (*MSEObserver, error) {
	o, err := newHistObserver("mse", bins, 2*startBin)
	if err != nil {
		return nil, err
	}
	return &MSEObserver{o}, nil
}

// Amax returns the clipping point of least squared error (see Observer).
func (o *MSEObserver) Amax() (float32, error) {
	if err := o.ready(); err != nil {
		return 0, err
	}
	return o.h.MSEAmax()
}
