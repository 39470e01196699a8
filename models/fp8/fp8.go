// Package fp8 is the host side of FP8 training and inference: the scaling
// recipes that choose the scale each tensor is cast into E4M3 or E5M2 with
// (kernels.FP8's CastFP8 and FP8MatMul do the casts and products).
//
//   - Current scaling: the scale from this tensor's own amax,
//     fp8_max/amax (CurrentScale), as Transformer Engine's
//     Float8CurrentScaling computes it.
//   - Delayed scaling, Transformer Engine's DelayedScaling: the scale from
//     a history of the amaxes of earlier steps (the largest, or the most
//     recent), fp8_max/amax/2^margin, updated after each step (Meta).
//   - Block scaling, DeepSeek-V3's fine-grained recipe: one scale per
//     1×128 block of an activation and per 128×128 block of a weight
//     (QuantizeBlocks).
//
// A scale multiplies a value before its cast; its inverse, carried with the
// codes, multiplies the decoded value back: x ≈ decode(code)·scaleInv.
// Block scaling keeps only the inverse, s, and divides by it before the
// cast, as DeepSeek-V3 does (the two round differently).
package fp8

import (
	"fmt"
	"math"

	"github.com/zbench/zbench/kernels"
)

// Amax compute algorithms of DelayedScaling.
const (
	AmaxMax        = "max"
	AmaxMostRecent = "most_recent"
)

// DelayedScaling is Transformer Engine's delayed-scaling recipe for one
// tensor role (its FP8 format given to NewMeta): the scale a step casts
// with comes from the amaxes recorded by earlier steps.
type DelayedScaling struct {
	// Margin divides the scale by 2^Margin (headroom against growth).
	Margin int
	// AmaxHistoryLen is the number of steps whose amax is kept (1024 by
	// default, Transformer Engine's).
	AmaxHistoryLen int
	// AmaxComputeAlgo is AmaxMax (the largest of the history, the
	// default) or AmaxMostRecent (the last step's).
	AmaxComputeAlgo string
	// Unfused is Transformer Engine's Python update
	// (NVTE_UNFUSED_FP8_UPDATE=1), which rolls the history on every
	// step; its default fused update skips a step whose amax is zero.
	Unfused bool
}

// DefaultHistoryLen is Transformer Engine's default amax history length.
const DefaultHistoryLen = 1024

// Meta is one tensor's delayed-scaling state (a column of Transformer
// Engine's FP8TensorMeta): its amax history and current scale.
type Meta struct {
	dt      kernels.DType
	algo    string
	scaled  float32   // fp8_max·2^−margin
	history []float32 // [0]: this step's amax, being recorded; then the older ones
	scale   float32
	unfused bool
}

// NewMeta returns the state of a tensor cast into dt (E4M3 or E5M2) under
// r: scale 1, an empty (zero) history.
func (r DelayedScaling) NewMeta(dt kernels.DType) (*Meta, error) {
	n := r.AmaxHistoryLen
	if n == 0 {
		n = DefaultHistoryLen
	}
	algo := r.AmaxComputeAlgo
	if algo == "" {
		algo = AmaxMax
	}
	switch {
	case dt != kernels.E4M3 && dt != kernels.E5M2:
		return nil, fmt.Errorf("fp8: delayed scaling into %v: want e4m3 or e5m2: %w", dt, kernels.ErrDType)
	case n < 0:
		return nil, fmt.Errorf("fp8: amax history length %d: want at least 1: %w", n, kernels.ErrValue)
	case algo != AmaxMax && algo != AmaxMostRecent:
		return nil, fmt.Errorf("fp8: amax compute algorithm %q: want %q or %q: %w", algo, AmaxMax, AmaxMostRecent, kernels.ErrValue)
	}
	return &Meta{dt: dt, algo: algo, scaled: kernels.FP8Max(dt) * float32(math.Pow(2, -float64(r.Margin))),
		history: make([]float32, n), scale: 1, unfused: r.Unfused}, nil
}

// DType is the format the tensor is cast into.
func (m *Meta) DType() kernels.DType { return m.dt }

// Scale is the scale this step casts with.
func (m *Meta) Scale() float32 { return m.scale }

// ScaleInv is the inverse of Scale, carried with the codes.
func (m *Meta) ScaleInv() float32 { return 1 / m.scale }

// Record records amax (of the unscaled tensor, as CastFP8 returns it) for
// this step: the largest of the step's casts counts.
func (m *Meta) Record(amax float32) {
	if amax > m.history[0] || amax != amax {
		m.history[0] = amax
	}
}

// Update ends the step as Transformer Engine's fused amax and scale update
// (delayed_scaling.cu's kernel_bulk) does: the amax of the history (the
// largest of its entries, this step's included, or this step's alone)
// gives the next scale, fp8_max·2^−margin / amax, kept as it was where
// that amax is zero or not finite (and float32's largest value where the
// division overflows); the history rolls, this step's amax becoming the
// newest of the older entries and the oldest leaving, and a zero starts
// the next step's. A step that recorded a zero amax changes nothing
// (unless Unfused).
func (m *Meta) Update() {
	last := m.history[0]
	if last == 0 && !m.unfused {
		return
	}
	n := len(m.history)
	amax := float32(0)
	rolled := make([]float32, n)
	for i := range n {
		a := last
		if i < n-1 {
			a = m.history[i+1]
		}
		amax = fmaxf(amax, a)
		if i > 0 {
			rolled[i] = a
		}
	}
	m.history = rolled
	if m.algo == AmaxMostRecent {
		amax = last
	}
	if isFinite(amax) && amax > 0 {
		m.scale = m.scaled / amax
		if math.IsInf(float64(m.scale), 0) {
			m.scale = math.MaxFloat32
		}
	}
}

// History returns a copy of the amax history: [0] this step's, then the
// older steps' from the oldest kept to the newest.
func (m *Meta) History() []float32 { return append([]float32(nil), m.history...) }

// fmaxf is CUDA's fmaxf: the larger, a NaN argument losing to a number.
func fmaxf(a, b float32) float32 {
	switch {
	case a != a:
		return b
	case b != b:
		return a
	}
	return max(a, b)
}

// isFinite reports whether v is neither infinite nor NaN.
func isFinite(v float32) bool { return !math.IsInf(float64(v), 0) && v == v }

// CurrentScale is the scale that casts a tensor of amax into dt with its
// largest value at the format's largest finite value, fp8_max/amax, as
// Transformer Engine's current scaling computes it: 1 for an amax that is
// zero or not finite, float32's largest value where the division
// overflows.
func CurrentScale(amax float32, dt kernels.DType) float32 {
	if !isFinite(amax) || amax == 0 {
		return 1
	}
	s := kernels.FP8Max(dt) / amax
	if math.IsInf(float64(s), 0) {
		return math.MaxFloat32
	}
	return s
}

// BlockSize is the side of DeepSeek-V3's scaling blocks: 1×128 of an
// activation, 128×128 of a weight.
const BlockSize = 128

// minBlockAmax is the least amax a block is scaled by (DeepSeek-V3's
// clamp), so that a block of zeros is not divided by zero.
const minBlockAmax = float32(1e-4)

// QuantizeBlocks casts x [rows, cols] into E4M3 per block of br×bc values
// (1×BlockSize for activations, BlockSize×BlockSize for weights) as
// DeepSeek-V3's act_quant does: s = max(amax, 1e-4)/448 for each block,
// code = satfinite(round(x/s)) (divided by s, not multiplied by 1/s,
// which rounds differently), and returns the codes and the scales s
// [rows/br, cols/bc], which dequantize (x ≈ decode(code)·s). rows and
// cols must be multiples of the block.
func QuantizeBlocks(x []float32, rows, cols, br, bc int) ([]uint8, []float32, error) {
	if br <= 0 || bc <= 0 || rows%br != 0 || cols%bc != 0 || len(x) != rows*cols {
		return nil, nil, fmt.Errorf("fp8: %d values as [%d, %d] in blocks of %d×%d: want whole blocks: %w", len(x), rows, cols, br, bc, kernels.ErrShape)
	}
	codes := make([]uint8, len(x))
	gc := cols / bc
	scales := make([]float32, rows/br*gc)
	for b := range scales {
		r0, c0 := b/gc*br, b%gc*bc
		amax := minBlockAmax
		for r := r0; r < r0+br; r++ {
			for _, v := range x[r*cols+c0 : r*cols+c0+bc] {
				amax = fmaxf(amax, float32(math.Abs(float64(v))))
			}
		}
		s := amax / kernels.FP8Max(kernels.E4M3)
		scales[b] = s
		for r := r0; r < r0+br; r++ {
			for c := c0; c < c0+bc; c++ {
				codes[r*cols+c] = kernels.E4M3FromFloat32(x[r*cols+c] / s)
			}
		}
	}
	return codes, scales, nil
}
