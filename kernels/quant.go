package kernels

// Quant is the op group of int8 inference: symmetric quantization of float
// tensors to int8, its inverse, and the int8 matrix product with int32
// accumulation and a float epilogue. A backend adopts it by implementing
// every method; kerneltest's Quant tests are its conformance suite. Callers
// get it with Group, whose error names the backend and the group where it is
// absent.
//
// The scheme is symmetric with the narrow range (TensorRT's, and the
// compressed-tensors "int8 symmetric" layout's values): a real value x with
// scale s is stored as q = clamp(round(x/s), −127, 127), rounding half to
// even as torch.quantize_per_tensor does, and read back as q·s. Scales are
// F32, either one per tensor (shape [1]) or one per row: per token for
// activations [rows…, K] (shape [rows]) and per output channel for weights
// [N, K] (shape [N]). Zero points are always 0.
type Quant interface {
	// Quantize sets q (I8) to x (F32, F16 or BF16, [rows…, K]) divided by
	// its scale, rounded and clamped as above. With dynamic false, scale is
	// read: F32 [1] (static per-tensor, from calibration) or [rows]. With
	// dynamic true, scale is F32 [rows] and written first, per row r
	//
	//	scale[r] = max_k |x[r, k]| / 127   (1 for a row of zeros)
	//
	// (dynamic per-token quantization); a NaN in a row makes its scale
	// NaN and its values 0. q has x's shape.
	Quantize(q, scale, x *Tensor, dynamic bool) error
	// Dequantize sets out (F32, F16 or BF16) = q·scale for q (I8,
	// [rows…, K]) and scale F32 [1] or [rows], rounded once to out's
	// dtype. out has q's shape.
	Dequantize(out, q, scale *Tensor) error
	// QMatMul multiplies a (I8, [rows…, K]) by the transpose of b (I8,
	// [N, K]: nn.Linear's weight layout) into out ([rows…, N]), summing
	// the products exactly in int32; M is the product of a's leading
	// dimensions. With out I32 the sums are the result (no scale, bias
	// or activation may be given). Otherwise, with acc the int32 sum,
	//
	//	y[m, n] = act(float32(acc)·(AScale[m]·BScale[n]) + Bias[n])
	//
	// in float32, each scale F32 [1] (shared) or per row ([M] for
	// AScale, [N] for BScale), Bias optional F32 [N]; out F32, F16 or
	// BF16 receives y rounded once, and out I8 receives y requantized
	// with OutScale (F32 [1]) as Quantize does. K may be any size up to
	// QMatMulMaxK.
	QMatMul(out, a, b *Tensor, p QMatMulParams) error
}

// QMatMulParams qualifies Quant.QMatMul.
type QMatMulParams struct {
	AScale, BScale *Tensor    // F32 [1] or per row; required unless out is I32
	Bias           *Tensor    // optional F32 [N]
	Act            Activation // optional epilogue
	OutScale       *Tensor    // F32 [1]; required exactly when out is I8
}

// QMatMulMaxK is the longest reduction QMatMul takes: K·128² < 2³¹, so
// that no sum of int8 products can leave int32.
const QMatMulMaxK = (1<<31 - 1) / (128 * 128)

// QMax is the largest magnitude of the symmetric int8 scheme: values are
// clamped to [−QMax, QMax].
const QMax = 127

// QuantizeValue is the scheme's rounding of one value on the host: x/s
// rounded half to even and clamped to [−QMax, QMax]; NaN gives 0.
func QuantizeValue(x, s float32) int8 {
	v := I8FromFloat32(x / s)
	return max(v, -QMax)
}
