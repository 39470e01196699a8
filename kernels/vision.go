package kernels

// Vision is the op group of convolutional image models (torchvision's ResNet
// family): 2-D convolution with a fused epilogue, max pooling and global
// average pooling. A backend adopts it by implementing every method;
// kerneltest's Vision tests are its conformance suite. Callers get it with
// Group, whose error names the backend and the group where it is absent.
//
// Images are NHWC inside the group: x [N, H, W, C], channels innermost.
// Every output pixel of a convolution then reads its receptive field as
// Kh·Kw contiguous runs of Ci/Groups channels, a 1×1 stride-1 convolution
// is a plain [N·H·W, Ci]·[Ci, Co] matrix product, and the K dimension of
// the implicit GEMM is contiguous in memory, which is what tensor cores
// load from. Models convert their NCHW inputs once with SwapAxes (an
// [N, C, H·W, 1] view to [N, H·W, C, 1]). Filters are [Co, Kh, Kw,
// Ci/Groups] (torch's [Co, Ci/Groups, Kh, Kw] with the input channels moved
// innermost), so that a filter row is the same K vector.
//
// Float tensors of one call share a dtype (F32, F16 or BF16); arithmetic
// is in float32 (products may run on TF32 tensor cores when asked) and
// results are rounded once to the output's dtype. Outputs must not
// overlap inputs, except that Conv2D's out may be its Residual.
type Vision interface {
	// Conv2D sets out = act(conv(x, w) + bias + residual) for x
	// [N, H, W, Ci], w [Co, Kh, Kw, Ci/G] and out [N, Ho, Wo, Co], with
	//
	//	conv[n, i, j, o] = Σ_{kh, kw, c} x[n, i·sh − ph + kh·dh, j·sw − pw + kw·dw, g·Ci/G + c] · w[o, kh, kw, c]
	//
	// over input positions inside the image (zero padding), g = o/(Co/G)
	// the group of output channel o, and
	//
	//	Ho = ⌊(H + 2·ph − dh·(Kh−1) − 1)/sh⌋ + 1   (Wo likewise)
	//
	// as torch.nn.functional.conv2d. Residual, optional, has out's shape
	// and may be out itself; bias, optional, is [Co].
	Conv2D(out, x, w *Tensor, p ConvParams) error
	// MaxPool2D sets out [N, Ho, Wo, C] to the largest value of each
	// window of x [N, H, W, C] (padding never wins; a NaN in the window
	// is the result, as in torch.nn.functional.max_pool2d), with Ho and Wo
	// as Conv2D's with floor rounding.
	MaxPool2D(out, x *Tensor, p PoolParams) error
	// GlobalAvgPool sets out [N, C] to the mean of x [N, H, W, C] over H
	// and W (adaptive_avg_pool2d to 1×1, then flatten), accumulated in
	// float32.
	GlobalAvgPool(out, x *Tensor) error
}

// ConvPacker is an optional op group of backends whose Conv2D multiplies
// filters in a layout of their own: the filters of a model's convolutions
// are packed into it once, when the model loads, instead of on every call.
// Callers get it with Group; a backend without it packs on every call.
type ConvPacker interface {
	// PackConvFilters keeps w [Co, Kh, Kw, Ci/groups] also in the layout
	// that Conv2D with p.Groups = groups multiplies, so that Conv2D reads
	// the packed form instead of packing w again. w's values stay as they
	// are, and any Conv2D, of any groups, computes what it computes with
	// w unpacked. They must not change afterwards except through Upload,
	// which drops the packed form; Free releases both.
	PackConvFilters(w *Tensor, groups int) error
}

// ConvParams qualifies Conv2D. Pairs are (height, width).
type ConvParams struct {
	Stride   [2]int // 0 means 1
	Pad      [2]int // zero padding on both sides
	Dilation [2]int // 0 means 1
	Groups   int    // 0 means 1; divides Ci and Co
	Bias     *Tensor
	Residual *Tensor
	Act      Activation
	// TF32 lets an F32 convolution run on TF32 tensor cores, as
	// torch.backends.cudnn.allow_tf32 does; backends without them compute
	// in full F32.
	TF32 bool
}

// PoolParams qualifies MaxPool2D. Pairs are (height, width).
type PoolParams struct {
	Kernel   [2]int
	Stride   [2]int // 0 means Kernel, as in torch
	Pad      [2]int // at most half the (dilated) window, as torch requires
	Dilation [2]int // 0 means 1
}

// ConvOutSize is one output dimension of a convolution or a pooling
// window (floor rounding): ⌊(in + 2·pad − dil·(k−1) − 1)/stride⌋ + 1. It is
// below 1 when the window does not fit.
func ConvOutSize(in, k, stride, pad, dil int) int {
	span := in + 2*pad - dil*(k-1) - 1
	if span < 0 {
		return 0
	}
	return span/stride + 1
}

// orOne returns v, or 1 when v is 0.
func orOne(v int) int {
	if v == 0 {
		return 1
	}
	return v
}

// ConvDims is the geometry of a valid Conv2D call: x [N, H, W, Ci], w
// [Co, Kh, Kw, Ci/Groups], out [N, Ho, Wo, Co]. Pairs are (height, width)
// with the defaults of ConvParams resolved.
type ConvDims struct {
	N, H, W, Ci, Co, Kh, Kw, Ho, Wo, Groups int
	Stride, Pad, Dilation                   [2]int
}

// M is the number of output pixels, the rows of the implicit GEMM.
func (g ConvDims) M() int { return g.N * g.Ho * g.Wo }

// K is the reduction length of one output: Kh·Kw·Ci/Groups.
func (g ConvDims) K() int { return g.Kh * g.Kw * g.Ci / g.Groups }

// PointwiseGEMM reports whether the convolution is a plain matrix product
// [N·H·W, Ci]·[Ci, Co] of the NHWC data: 1×1, stride 1, no padding, one
// group.
func (g ConvDims) PointwiseGEMM() bool {
	return g.Kh == 1 && g.Kw == 1 && g.Stride == [2]int{1, 1} && g.Pad == [2]int{} && g.Groups == 1
}

// FLOPs is 2·M·Co·K, the multiply-adds of the convolution counted twice.
func (g ConvDims) FLOPs() float64 { return 2 * float64(g.M()) * float64(g.Co) * float64(g.K()) }

// WinogradSaving is how many times fewer multiplications Winograd's
// minimal filtering F(2×2, 3×3) performs than a direct 3×3 convolution:
// 16 for a 2×2 tile of outputs, where the windows take 36.
const WinogradSaving = 2.25

// LeastFLOPs is FLOPs less what the cheapest algorithm a backend may run
// the convolution with saves: FLOPs/WinogradSaving for a 3×3 stride-1
// convolution of one group without dilation, FLOPs for any other. The
// roofline guard holds it to the peak (zbench/roofline.Workload).
func (g ConvDims) LeastFLOPs() float64 {
	if g.Winograd() {
		return g.FLOPs() / WinogradSaving
	}
	return g.FLOPs()
}

// Winograd reports whether the convolution is one that Winograd's
// F(2×2, 3×3) computes: 3×3, stride 1, one group, no dilation.
func (g ConvDims) Winograd() bool {
	return g.Kh == 3 && g.Kw == 3 && g.Stride == [2]int{1, 1} && g.Dilation == [2]int{1, 1} && g.Groups == 1
}

// Dims is the geometry of a convolution of x [N, H, W, Ci] by w [Co, Kh,
// Kw, Ci/G] (both 4-D) under p, its defaults resolved and Ho, Wo
// computed; check.Conv2D says whether it is valid.
func (p ConvParams) Dims(x, w Shape) ConvDims {
	g := ConvDims{N: x[0], H: x[1], W: x[2], Ci: x[3], Co: w[0], Kh: w[1], Kw: w[2], Groups: orOne(p.Groups), Pad: p.Pad}
	for i := range 2 {
		g.Stride[i], g.Dilation[i] = orOne(p.Stride[i]), orOne(p.Dilation[i])
	}
	g.Ho = ConvOutSize(g.H, g.Kh, g.Stride[0], g.Pad[0], g.Dilation[0])
	g.Wo = ConvOutSize(g.W, g.Kw, g.Stride[1], g.Pad[1], g.Dilation[1])
	return g
}

// PoolDims is the geometry of a valid MaxPool2D call: x [N, H, W, C] and
// out [N, Ho, Wo, C], with the defaults of PoolParams resolved.
type PoolDims struct {
	N, H, W, C, Ho, Wo            int
	Kernel, Stride, Pad, Dilation [2]int
}

// Dims is the geometry of max pooling x [N, H, W, C] (4-D) under p, its
// defaults resolved and Ho, Wo computed where the strides are positive;
// check.MaxPool2D says whether it is valid.
func (p PoolParams) Dims(x Shape) PoolDims {
	g := PoolDims{N: x[0], H: x[1], W: x[2], C: x[3], Kernel: p.Kernel, Pad: p.Pad}
	for i := range 2 {
		g.Stride[i], g.Dilation[i] = p.Stride[i], orOne(p.Dilation[i])
		if g.Stride[i] == 0 {
			g.Stride[i] = g.Kernel[i]
		}
	}
	if g.Stride[0] > 0 && g.Stride[1] > 0 {
		g.Ho = ConvOutSize(g.H, g.Kernel[0], g.Stride[0], g.Pad[0], g.Dilation[0])
		g.Wo = ConvOutSize(g.W, g.Kernel[1], g.Stride[1], g.Pad[1], g.Dilation[1])
	}
	return g
}
