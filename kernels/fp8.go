package kernels

// FP8 is implemented by backends with FP8 ops: scaled casts into E4M3 or
// E5M2 with the amax fused, and the scaled FP8 GEMM of FP8 training and
// inference (Transformer Engine's and torch._scaled_mm's semantics).
//
// An FP8 tensor is its codes (an E4M3 or E5M2 tensor) with the inverse of
// the scale it was cast with: its values are decode(code)·scaleInv.
// Scales are F32 tensors of one element, so that a recipe can update them
// on the device without a copy to the host.
type FP8 interface {
	// FP8Supported returns nil where this device runs the FP8 ops, and
	// otherwise why not, wrapping ErrUnsupported (a GPU below compute
	// capability 8.9): a backend implements FP8 whatever its device.
	FP8Supported() error
	// CastFP8 sets q = satfinite(round(x·scale)) in q's dtype (E4M3 or
	// E5M2, ties to even, values beyond the format's largest finite
	// value saturating to it, NaN staying NaN), x·scale rounded to
	// float32 first, with scale F32 [1]. When amax is not nil it also
	// sets amax[0] = max |x| (F32 [1]: the unscaled tensor's, which a
	// delayed-scaling recipe records; NaN if x holds one). q has x's
	// shape; x is F32, F16 or BF16.
	CastFP8(q, amax, x, scale *Tensor) error
	// CastFP8Rows casts each row of x [rows…, K] with its own current
	// scale, fp8_max/amax of the row (1 for a row of zeros or with a NaN
	// or infinity, float32's largest value where the division
	// overflows), x·scale rounded to float32 first, into q (E4M3
	// or E5M2, x's shape) and sets scaleInv[row] = 1/scale (F32 [rows]):
	// dynamic per-token scaling of an LLM's activations.
	CastFP8Rows(q, scaleInv, x *Tensor) error
	// FP8MatMul sets out = act(Σ_k decode(a[m, k])·decode(b[n, k]) ·
	// aScaleInv[m]·bScaleInv[n] + bias[n]): a [rows…, K] and b [N, K] (a
	// weight's layout, as QMatMul), each E4M3 or E5M2 but not both E5M2
	// (forward E4M3×E4M3; backward E5M2 gradients times E4M3), the
	// products summed in float32 and the scales applied once to the sum.
	// out is F32, F16 or BF16 with a's leading shape and N.
	FP8MatMul(out, a, b *Tensor, p FP8MatMulParams) error
}

// FP8MatMulParams qualifies FP8.FP8MatMul.
type FP8MatMulParams struct {
	// AScaleInv and BScaleInv are the inverses of the scales a and b
	// were cast with: F32 [1] per tensor, or AScaleInv [rows] per row of
	// a (token) and BScaleInv [N] per row of b (output channel);
	// required.
	AScaleInv, BScaleInv *Tensor
	// Bias is optional, F32 [N].
	Bias *Tensor
	// Act is the epilogue's activation.
	Act Activation
}

// FP8Max returns the largest finite value of an FP8 dtype: 448 for E4M3,
// 57344 for E5M2.
func FP8Max(dt DType) float32 {
	switch dt {
	case E4M3:
		return fmtE4M3.max
	case E5M2:
		return fmtE5M2.max
	}
	return 0
}
