package kernels

// QuantConv is the op group of int8 convolutional models: Vision's 2-D
// convolution over int8 images and filters, with exact int32 sums and the
// epilogue of Quant.QMatMul. A backend adopts it by implementing every
// method; kerneltest's QConv2D cases are its conformance suite. Callers get
// it with Group, whose error names the backend and the group where it is
// absent.
//
// Layouts are Vision's: x NHWC [N, H, W, Ci], filters [Co, Kh, Kw, Ci/G],
// out [N, Ho, Wo, Co]; an output channel's filter is then one row of a
// [Co, Kh·Kw·Ci/G] weight matrix, which Quant.Quantize (dynamic) quantizes
// per output channel. The int8 scheme is Quant's: symmetric, the narrow
// range, zero point 0, so zero padding is the quantized 0. A 1×1 stride-1
// convolution is QMatMul of the [N·H·W, Ci] data by the [Co, Ci] filters.
//
// The epilogue is what a residual network needs between its int8
// convolutions. A convolution whose output only feeds the next
// convolution writes int8 requantized with that convolution's input scale
// (out I8 with OutScale: no float tensor in between). One that adds the
// shortcut writes a float out with the float residual added before the
// activation (out F32, F16 or BF16 with Residual, in place over the
// residual), which Quant.Quantize then turns into the next convolutions'
// int8 input; the shortcut itself stays in float.
//
// Outputs must not overlap inputs, except that QConv2D's out may be its
// Residual.
type QuantConv interface {
	// QConv2D sets out from the convolution of x (I8 [N, H, W, Ci]) by w
	// (I8 [Co, Kh, Kw, Ci/G]): the int32 sums
	//
	//	acc[n, i, j, o] = Σ_{kh, kw, c} x[n, i·sh − ph + kh·dh, j·sw − pw + kw·dw, g·Ci/G + c] · w[o, kh, kw, c]
	//
	// over input positions inside the image (zero padding), g = o/(Co/G)
	// the group of output channel o, and Ho, Wo as Vision.Conv2D's. The
	// sums are exact: K = Kh·Kw·Ci/G is at most QConvMaxK. With out I32
	// they are the result (no scale, bias, residual, activation or
	// OutScale may be given). Otherwise, in float32, each operation
	// rounded in turn from the left,
	//
	//	y[n, i, j, o] = act(float32(acc)·(XScale·WScale[o]) + Bias[o] + Residual[n, i, j, o])
	//
	// with XScale F32 [1] (x's per-tensor scale), WScale F32 [1] or
	// [Co] (per output channel), Bias optional F32 [Co] and Residual
	// optional; out F32, F16 or BF16 receives y rounded once to its
	// dtype, and out I8 receives y requantized with OutScale (F32 [1])
	// as Quant.Quantize does: clamp(round(y/OutScale), ±QMax), half to
	// even, NaN giving 0. Residual, only with a float out, has out's
	// shape and dtype and may be out itself.
	QConv2D(out, x, w *Tensor, p QConvParams) error
}

// QConvParams qualifies QuantConv.QConv2D. Pairs are (height, width) with
// ConvParams' defaults.
type QConvParams struct {
	Stride   [2]int // 0 means 1
	Pad      [2]int // zero padding on both sides
	Dilation [2]int // 0 means 1
	Groups   int    // 0 means 1; divides Ci and Co

	XScale   *Tensor    // F32 [1]; required unless out is I32
	WScale   *Tensor    // F32 [1] or [Co]; required unless out is I32
	Bias     *Tensor    // optional F32 [Co]
	Residual *Tensor    // optional, out's shape and float dtype; may be out
	Act      Activation // optional epilogue
	OutScale *Tensor    // F32 [1]; required exactly when out is I8
}

// QConvMaxK is the longest reduction K = Kh·Kw·Ci/G of QConv2D,
// QMatMul's: K·128² < 2³¹, so that no sum of int8 products can leave
// int32.
const QConvMaxK = QMatMulMaxK

// Conv is p's geometry as ConvParams, without tensors: its Dims gives the
// convolution's sizes.
func (p QConvParams) Conv() ConvParams {
	return ConvParams{Stride: p.Stride, Pad: p.Pad, Dilation: p.Dilation, Groups: p.Groups}
}
