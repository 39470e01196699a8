package quant

import (
	"fmt"
	"math"

	"github.com/zbench/zbench/kernels"
)

// Quantize sets q to x quantized with scales, per tensor (one scale) or
// per row (len(scales) rows of len(x)/len(scales) values each, the
// kernels' layout of per-token and per-output-channel scales):
// q[i] = kernels.QuantizeValue(x[i], scale of i's row). Mismatched lengths
// are an error wrapping kernels.ErrShape; a NaN or infinity in x, or a
// scale that is not positive and finite, an error wrapping
// kernels.ErrValue naming it.
//
// kernels.QuantizeValue divides by the scale; torch's CPU quantizers (quantize_per_tensor,
// quantize_per_channel, fake_quantize_*) multiply by the float32
// reciprocal instead, which rounds to the neighbouring integer for about
// one value in a million (8 of 6.5 million Gaussian weights, measured with
// torch 1.13: values within an ulp of a rounding midpoint).
func Quantize(q []int8, x []float32, scales []float32) error {
	k, err := rowLen("Quantize", len(q), len(x), scales)
	if err != nil {
		return err
	}
	for i, v := range x {
		if math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) {
			return fmt.Errorf("quant: Quantize: x[%d] is %v: %w", i, v, kernels.ErrValue)
		}
		q[i] = kernels.QuantizeValue(v, scales[i/k])
	}
	return nil
}

// Dequantize sets out[i] = float32(q[i])·scale, in float32, with scales per
// tensor or per row as in Quantize (and its errors).
func Dequantize(out []float32, q []int8, scales []float32) error {
	k, err := rowLen("Dequantize", len(out), len(q), scales)
	if err != nil {
		return err
	}
	for i, v := range q {
		out[i] = float32(v) * scales[i/k]
	}
	return nil
}

// FakeQuantize returns x quantized and dequantized with scales (per tensor
// or per row, as in Quantize, and with its errors): what int8 storage
// makes of x.
func FakeQuantize(x []float32, scales []float32) ([]float32, error) {
	q := make([]int8, len(x))
	if err := Quantize(q, x, scales); err != nil {
		return nil, err
	}
	out := make([]float32, len(x))
	if err := Dequantize(out, q, scales); err != nil {
		return nil, err
	}
	return out, nil
}

// QuantizePerChannel quantizes a weight w [n, k] (row-major, nn.Linear's
// [out, in]) with one scale per output channel: scales[r] =
// Scale(max_c |w[r, c]|) (1 for a row of zeros), q [n, k] as Quantize
// makes it. A length other than n·k is an error wrapping kernels.ErrShape,
// a NaN or infinity one wrapping kernels.ErrValue naming its row and
// column.
func QuantizePerChannel(w []float32, n, k int) (q []int8, scales []float32, err error) {
	if n < 1 || k < 1 || len(w) != n*k {
		return nil, nil, fmt.Errorf("quant: QuantizePerChannel: %d values for a [%d %d] weight: %w", len(w), n, k, kernels.ErrShape)
	}
	scales = make([]float32, n)
	for r := range n {
		amax, i := absMax(w[r*k : (r+1)*k])
		if i >= 0 {
			return nil, nil, fmt.Errorf("quant: QuantizePerChannel: w[%d, %d] is %v: %w", r, i, w[r*k+i], kernels.ErrValue)
		}
		scales[r] = Scale(amax)
	}
	q = make([]int8, len(w))
	if err := Quantize(q, w, scales); err != nil {
		return nil, nil, err
	}
	return q, scales, nil
}

// QuantizePerTensor quantizes x with one scale, Scale(max |x|) (1 when x
// is all zeros). Empty x is an error wrapping ErrNoData, a NaN or infinity
// one wrapping kernels.ErrValue naming it.
func QuantizePerTensor(x []float32) (q []int8, scale float32, err error) {
	if len(x) == 0 {
		return nil, 0, fmt.Errorf("quant: QuantizePerTensor: no values: %w", ErrNoData)
	}
	amax, i := absMax(x)
	if i >= 0 {
		return nil, 0, fmt.Errorf("quant: QuantizePerTensor: x[%d] is %v: %w", i, x[i], kernels.ErrValue)
	}
	scale = Scale(amax)
	q = make([]int8, len(x))
	if err := Quantize(q, x, []float32{scale}); err != nil {
		return nil, 0, err
	}
	return q, scale, nil
}

// rowLen validates the lengths of a quantize or dequantize call (out and
// in elements, scales per tensor or per row) and the scales, and returns
// the row length.
func rowLen(op string, nOut, nIn int, scales []float32) (int, error) {
	switch {
	case nOut != nIn:
		return 0, fmt.Errorf("quant: %s: output of %d values for an input of %d: %w", op, nOut, nIn, kernels.ErrShape)
	case len(scales) == 0 || nIn%len(scales) != 0 || (nIn == 0 && len(scales) != 1):
		return 0, fmt.Errorf("quant: %s: %d scales for %d values: want 1 (per tensor) or one per row of equal rows: %w",
			op, len(scales), nIn, kernels.ErrShape)
	}
	for i, s := range scales {
		if !(s > 0 && s <= math.MaxFloat32) {
			return 0, fmt.Errorf("quant: %s: scale[%d] is %v, want positive and finite: %w", op, i, s, kernels.ErrValue)
		}
	}
	return max(nIn/len(scales), 1), nil
}
