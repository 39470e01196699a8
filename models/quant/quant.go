// Package quant is the host side of INT8 post-training quantization:
// calibration observers that pick the clipping point (amax) of an
// activation from a stream of batches, per-channel and per-tensor weight
// quantization, and the error metrics that say what quantization cost;
// and what every quantized model shares: QuantizeWeight, a linear layer's
// weight quantized on its device, and LinearReport, the per-layer report.
//
// The scheme is the kernels package's (kernels/quant.go): symmetric, the
// narrow range [−127, 127], zero point 0, scale = amax/127, and a value x
// stored as kernels.QuantizeValue(x, scale) = clamp(round(x/scale)) with
// ties to even. An observer only chooses amax; Scale turns it into the
// scale the kernels take.
//
// The observers, by the name New takes:
//
//	absmax           the largest |x| seen (AbsMaxObserver)
//	percentile       the p-th percentile of |x| over every value seen,
//	                 exactly as torch.quantile computes it
//	                 (PercentileObserver; 4 bytes of memory per value)
//	percentile-hist  the same percentile read from a histogram of |x|,
//	                 within one bin of the exact value
//	                 (HistPercentileObserver)
//	entropy          TensorRT's KL-divergence calibration over a 2048-bin
//	                 histogram of |x| (EntropyObserver)
//	mse              the bin centre that minimises the histogram's mean
//	                 squared quantize-dequantize error (MSEObserver)
//
// The histogram methods each collect a Histogram of |x| (2048 bins over
// [0, R), R the smallest power of two above the running amax, re-binned
// exactly when amax grows), which does not depend on how the values were
// split into batches. Histogram's methods compute every histogram amax
// from one collected histogram, as pytorch-quantization's
// HistogramCalibrator does; the observers' Histogram method exposes it.
//
// Every observer gives the same amax whatever the split of its values
// into batches.
//
// Observers return an error for a NaN or infinite value (naming the batch
// and element), and Amax for an observer that saw no values; an error from
// Observe is kept, and Amax returns it too. Observers and histograms are
// not safe for concurrent use.
package quant

import (
	"errors"
	"fmt"
	"math"
	"strings"

	"github.com/zbench/zbench/kernels"
)

// Defaults of the observers.
const (
	// DefaultPercentile is the percentile methods' default: 99.99, as in
	// pytorch-quantization.
	DefaultPercentile = 99.99
	// DefaultBins is the histogram methods' default bin count, TensorRT's.
	DefaultBins = 2048
	// DefaultBatches is how many calibration batches the models observe
	// unless told otherwise.
	DefaultBatches = 50
	// MaxBins is the largest bin count a histogram takes.
	MaxBins = 1 << 20
)

// ErrNoData is wrapped by the error of Amax on an observer (or of a
// histogram's amax) that saw no values.
var ErrNoData = errors.New("no calibration data")

// Observer collects activation values over calibration batches and gives
// the amax to clip them at; the int8 scale is Scale(amax).
type Observer interface {
	// Observe adds a batch of values. A NaN or infinity is an error
	// wrapping kernels.ErrValue that names the batch and element; the
	// batch is then dropped and the observer keeps the error.
	Observe(batch []float32) error
	// Amax returns the clipping point of what was observed: finite and
	// non-negative (0 when every value was 0), or the error Observe
	// returned, or one wrapping ErrNoData when no values were observed.
	Amax() (float32, error)
}

// Options qualifies New. The zero value gives the defaults.
type Options struct {
	// Percentile of |x| for "percentile" and "percentile-hist", in
	// (0, 100]; 0 means DefaultPercentile. Other methods refuse it.
	Percentile float64
	// Bins of the histogram of "percentile-hist", "entropy" and "mse": even,
	// at most MaxBins, at least 2 (percentile-hist) or 256 (entropy, mse);
	// 0 means DefaultBins. Other methods refuse it.
	Bins int
}

// Methods returns the names New takes.
func Methods() []string {
	return []string{"absmax", "percentile", "percentile-hist", "entropy", "mse"}
}

// New returns a fresh observer of the named method (see Methods). An
// unknown method, or an option the method does not take or takes with an
// invalid value, is an error wrapping kernels.ErrValue.
func New(method string, opt Options) (Observer, error) {
	usesPercentile := method == "percentile" || method == "percentile-hist"
	usesBins := method == "percentile-hist" || method == "entropy" || method == "mse"
	switch method {
	case "absmax", "percentile", "percentile-hist", "entropy", "mse":
	default:
		return nil, fmt.Errorf("quant: unknown calibration method %q (want one of %s): %w",
			method, strings.Join(Methods(), ", "), kernels.ErrValue)
	}
	if opt.Percentile != 0 && !usesPercentile {
		return nil, fmt.Errorf("quant: method %q takes no percentile (got %v): %w", method, opt.Percentile, kernels.ErrValue)
	}
	if opt.Bins != 0 && !usesBins {
		return nil, fmt.Errorf("quant: method %q takes no bin count (got %d): %w", method, opt.Bins, kernels.ErrValue)
	}
	p := opt.Percentile
	if p == 0 {
		p = DefaultPercentile
	}
	bins := opt.Bins
	if bins == 0 {
		bins = DefaultBins
	}
	switch method {
	case "absmax":
		return NewAbsMax(), nil
	case "percentile":
		return NewPercentile(p)
	case "percentile-hist":
		return NewHistPercentile(p, bins)
	case "entropy":
		return NewEntropy(bins)
	default:
		return NewMSE(bins)
	}
}

// Scale returns the int8 scale of a clipping point: amax/127 in float32,
// or 1 when amax is 0 (all values zero; the kernels' rule for a row of
// zeros), so that a scale is never 0.
func Scale(amax float32) float32 {
	if amax == 0 {
		return 1
	}
	return amax / kernels.QMax
}

// checkPercentile validates a percentile of |x|.
func checkPercentile(p float64) error {
	if !(p > 0 && p <= 100) {
		return fmt.Errorf("quant: percentile %v out of range (0, 100]: %w", p, kernels.ErrValue)
	}
	return nil
}

// stream is what every observer keeps about its input: the method name,
// batches and values seen, and the first error.
type stream struct {
	method  string
	batches int
	values  int64
	err     error
}

// check counts a batch and returns its largest |x|, or an error (kept)
// naming the first NaN or infinity in it, or the error kept before.
func (s *stream) check(batch []float32) (float32, error) {
	b := s.batches
	s.batches++
	if s.err != nil {
		return 0, s.err
	}
	amax, i := absMax(batch)
	if i >= 0 {
		s.err = fmt.Errorf("quant: %s observer: batch %d, element %d is %v: %w",
			s.method, b, i, batch[i], kernels.ErrValue)
		return 0, s.err
	}
	s.values += int64(len(batch))
	return amax, nil
}

// ready returns the kept error, or an error wrapping ErrNoData when no
// values were observed.
func (s *stream) ready() error {
	if s.err != nil {
		return s.err
	}
	if s.values == 0 {
		return fmt.Errorf("quant: %s observer: no values observed (%d batches): %w", s.method, s.batches, ErrNoData)
	}
	return nil
}

// absMax returns the largest |x| of x, and the index of its first NaN or
// infinity (-1 if none).
func absMax(x []float32) (float32, int) {
	var m float32
	for i, v := range x {
		a := abs32(v)
		if !(a <= math.MaxFloat32) {
			return 0, i
		}
		m = max(m, a)
	}
	return m, -1
}

// abs32 is |v|, +0 for −0.
func abs32(v float32) float32 {
	return math.Float32frombits(math.Float32bits(v) &^ (1 << 31))
}

// AbsMaxObserver's amax is the largest |x| observed: no clipping.
type AbsMaxObserver struct {
	stream
	amax float32
}

// NewAbsMax returns an empty absmax observer.
func NewAbsMax() *AbsMaxObserver {
	return &AbsMaxObserver{stream: stream{method: "absmax"}}
}

// Observe adds a batch (see Observer).
func (o *AbsMaxObserver) Observe(batch []float32) error {
	m, err := o.check(batch)
	if err != nil {
		return err
	}
	o.amax = max(o.amax, m)
	return nil
}

// Amax returns the largest |x| observed (see Observer).
func (o *AbsMaxObserver) Amax() (float32, error) {
	if err := o.ready(); err != nil {
		return 0, err
	}
	return o.amax, nil
}
