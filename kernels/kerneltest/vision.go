package kerneltest

import (
	"fmt"
	"math"

	"github.com/stretchr/testify/require"
	"github.com/zbench/zbench/kernels"
)

func init() { suites = append(suites, visionTests()) }

// vision returns the backend's Vision ops; every backend implements them.
func (e *env) vision() kernels.Vision {
	e.Helper()
	return group[kernels.Vision](e)
}

// RefConv2D is Vision.Conv2D in float64 for x [N, H, W, Ci] and w
// [Co, Kh, Kw, Ci/G] (NHWC), g's geometry, without the epilogue: the
// result is [N, Ho, Wo, Co].
func RefConv2D(x, w []float64, g kernels.ConvDims) []float64 {
	cg, cog := g.Ci/g.Groups, g.Co/g.Groups
	out := make([]float64, g.N*g.Ho*g.Wo*g.Co)
	for n := range g.N {
		for i := range g.Ho {
			for j := range g.Wo {
				o := out[((n*g.Ho+i)*g.Wo+j)*g.Co:][:g.Co]
				for co := range g.Co {
					gr := co / cog
					var s float64
					for kh := range g.Kh {
						y := i*g.Stride[0] - g.Pad[0] + kh*g.Dilation[0]
						if y < 0 || y >= g.H {
							continue
						}
						for kw := range g.Kw {
							xx := j*g.Stride[1] - g.Pad[1] + kw*g.Dilation[1]
							if xx < 0 || xx >= g.W {
								continue
							}
							xr := x[((n*g.H+y)*g.W+xx)*g.Ci+gr*cg:][:cg]
							wr := w[((co*g.Kh+kh)*g.Kw+kw)*cg:][:cg]
							for c, v := range xr {
								s += v * wr[c]
							}
						}
					}
					o[co] = s
				}
			}
		}
	}
	return out
}

// RefMaxPool2D is Vision.MaxPool2D in float64 (NHWC): a NaN in the
// window is the result.
func RefMaxPool2D(x []float64, g kernels.PoolDims) []float64 {
	out := make([]float64, g.N*g.Ho*g.Wo*g.C)
	for n := range g.N {
		for i := range g.Ho {
			for j := range g.Wo {
				for c := range g.C {
					m := math.Inf(-1)
					for kh := range g.Kernel[0] {
						y := i*g.Stride[0] - g.Pad[0] + kh*g.Dilation[0]
						for kw := range g.Kernel[1] {
							xx := j*g.Stride[1] - g.Pad[1] + kw*g.Dilation[1]
							if y < 0 || y >= g.H || xx < 0 || xx >= g.W {
								continue
							}
							if v := x[((n*g.H+y)*g.W+xx)*g.C+c]; v > m || math.IsNaN(v) {
								m = v
								if math.IsNaN(v) {
									break
								}
							}
						}
						if math.IsNaN(m) {
							break
						}
					}
					out[((n*g.Ho+i)*g.Wo+j)*g.C+c] = m
				}
			}
		}
	}
	return out
}

// RefGlobalAvgPool is Vision.GlobalAvgPool in float64 for x [n, hw, c].
func RefGlobalAvgPool(x []float64, n, hw, c int) []float64 {
	out := make([]float64, n*c)
	for im := range n {
		for px := range hw {
			for ch := range c {
				out[im*c+ch] += x[(im*hw+px)*c+ch]
			}
		}
		for ch := range c {
			out[im*c+ch] /= float64(hw)
		}
	}
	return out
}

// convCase is one Conv2D configuration of the suite.
type convCase struct {
	n, h, w, ci, co, kh, kw int
	stride, pad, dil        [2]int
	groups                  int
	bias, residual, inPlace bool
	act                     kernels.Activation
}

func (c convCase) String() string {
	s := fmt.Sprintf("x=%dx%dx%dx%d/w=%dx%dx%d", c.n, c.h, c.w, c.ci, c.co, c.kh, c.kw)
	if c.stride != [2]int{} {
		s += fmt.Sprintf("/stride=%dx%d", c.stride[0], c.stride[1])
	}
	if c.pad != [2]int{} {
		s += fmt.Sprintf("/pad=%dx%d", c.pad[0], c.pad[1])
	}
	if c.dil != [2]int{} {
		s += fmt.Sprintf("/dil=%dx%d", c.dil[0], c.dil[1])
	}
	if c.groups > 1 {
		s += fmt.Sprintf("/groups=%d", c.groups)
	}
	if c.bias {
		s += "/bias"
	}
	if c.inPlace {
		s += "/residual=out"
	} else if c.residual {
		s += "/residual"
	}
	if c.act != kernels.ActNone {
		s += "/act=" + c.act.String()
	}
	return s
}

// convCases cover every path a backend may take: pointwise products,
// packed implicit GEMMs with padding, strides and dilation, wide and
// narrow groups, depthwise, non-square windows, and the epilogue.
func convCases() []convCase {
	relu := kernels.ActReLU
	return []convCase{
		{n: 2, h: 5, w: 7, ci: 16, co: 24, kh: 1, kw: 1},                                                                  // pointwise GEMM
		{n: 1, h: 9, w: 9, ci: 3, co: 5, kh: 1, kw: 1, bias: true, act: relu},                                             // pointwise, odd channels
		{n: 2, h: 23, w: 29, ci: 3, co: 16, kh: 7, kw: 7, stride: [2]int{2, 2}, pad: [2]int{3, 3}, bias: true, act: relu}, // ResNet's stem
		{n: 2, h: 8, w: 8, ci: 32, co: 32, kh: 3, kw: 3, pad: [2]int{1, 1}, bias: true, act: relu},
		{n: 1, h: 9, w: 11, ci: 24, co: 40, kh: 3, kw: 3, stride: [2]int{2, 2}, pad: [2]int{1, 1}, bias: true},
		{n: 2, h: 7, w: 6, ci: 20, co: 36, kh: 1, kw: 1, stride: [2]int{2, 2}, bias: true},      // downsample
		{n: 2, h: 6, w: 6, ci: 16, co: 16, kh: 1, kw: 1, bias: true, residual: true, act: relu}, // bottleneck's last
		{n: 2, h: 6, w: 5, ci: 16, co: 16, kh: 3, kw: 3, pad: [2]int{1, 1}, bias: true, inPlace: true, act: relu},
		{n: 1, h: 8, w: 8, ci: 64, co: 64, kh: 3, kw: 3, pad: [2]int{1, 1}, groups: 32, bias: true, act: relu}, // ResNeXt
		{n: 1, h: 6, w: 7, ci: 48, co: 96, kh: 3, kw: 3, pad: [2]int{1, 1}, groups: 3},                         // wide groups
		{n: 2, h: 7, w: 7, ci: 12, co: 12, kh: 3, kw: 3, pad: [2]int{1, 1}, groups: 12, bias: true},            // depthwise
		{n: 1, h: 10, w: 9, ci: 8, co: 12, kh: 3, kw: 3, pad: [2]int{2, 2}, dil: [2]int{2, 2}, act: kernels.ActGELU},
		{n: 2, h: 9, w: 12, ci: 5, co: 7, kh: 3, kw: 5, stride: [2]int{2, 1}, pad: [2]int{1, 2}, bias: true},
		{n: 1, h: 1, w: 1, ci: 4, co: 3, kh: 3, kw: 3, pad: [2]int{1, 1}}, // mostly padding
		{n: 3, h: 33, w: 17, ci: 9, co: 70, kh: 3, kw: 3, stride: [2]int{2, 2}, pad: [2]int{1, 1}, bias: true, residual: true, act: relu},
		// A small image with many filters and a long reduction (a late
		// ResNet stage): K = 648 runs over several kc-deep blocks that
		// start inside a window position, and the work splits by filters.
		{n: 1, h: 5, w: 5, ci: 72, co: 80, kh: 3, kw: 3, pad: [2]int{1, 1}, bias: true, residual: true, act: relu},
		// Wide rows: whole panels of output pixels inside one row and the
		// image's columns, whose window rows a backend may read as strided
		// matrices of x (the stem's, with padding rows above and below; a
		// 3×3 whose K = 432 splits into kc-deep blocks inside a window row).
		{n: 1, h: 11, w: 64, ci: 3, co: 40, kh: 7, kw: 7, stride: [2]int{2, 2}, pad: [2]int{3, 3}, bias: true, act: relu},
		{n: 2, h: 6, w: 40, ci: 48, co: 40, kh: 3, kw: 3, pad: [2]int{1, 1}, bias: true},
		// Wide rows with the residual out itself or its own tensor, a last
		// panel of filters narrower than the kernel's 32 columns, an
		// activation a backend may not fuse, and a strided 1×1.
		{n: 1, h: 3, w: 26, ci: 16, co: 40, kh: 3, kw: 3, pad: [2]int{1, 1}, bias: true, inPlace: true, act: kernels.ActGELU},
		{n: 1, h: 4, w: 30, ci: 16, co: 48, kh: 3, kw: 3, pad: [2]int{1, 1}, bias: true, residual: true, act: relu},
		{n: 1, h: 6, w: 30, ci: 16, co: 64, kh: 1, kw: 1, stride: [2]int{2, 2}, bias: true, residual: true},
		// A dilated window over three channels with uneven padding, which
		// a backend may multiply over a copy of x with the padding written
		// out.
		{n: 2, h: 9, w: 14, ci: 3, co: 40, kh: 3, kw: 3, pad: [2]int{2, 1}, dil: [2]int{2, 1}, bias: true, act: relu},
		// A strided 1×1 with uneven strides and edges its stride does not
		// reach, which a backend may multiply as a pointwise product of
		// the pixels it reads.
		{n: 2, h: 7, w: 27, ci: 24, co: 40, kh: 1, kw: 1, stride: [2]int{3, 2}, bias: true, inPlace: true, act: relu},
		// 1×1 convolutions of many channels, whose reduction a backend may
		// split into blocks that accumulate in out (out the residual, or
		// not), with pixels left over a whole tile.
		{n: 1, h: 8, w: 16, ci: 1100, co: 40, kh: 1, kw: 1, bias: true, inPlace: true, act: relu},
		{n: 1, h: 5, w: 26, ci: 1300, co: 72, kh: 1, kw: 1, bias: true, residual: true, act: kernels.ActGELU},
		// Many pixels by many filters: the output is multiplied in several
		// row blocks per share of the pixels.
		{n: 2, h: 13, w: 12, ci: 4, co: 576, kh: 3, kw: 3, pad: [2]int{1, 1}, bias: true, act: relu},
		// 3×3 stride-1 convolutions of channels in multiples of 16 over
		// images of 14×14 pixels or more, which a backend may multiply as
		// Winograd's F(2×2, 3×3): tiles across an odd width and height,
		// a last panel of filters narrower than 32, the residual out
		// itself or its own tensor, an activation a backend may not fuse,
		// no padding and uneven padding, more tiles than one block of
		// them, and fewer tiles than filters.
		{n: 2, h: 14, w: 15, ci: 32, co: 48, kh: 3, kw: 3, pad: [2]int{1, 1}, bias: true, act: relu},
		{n: 1, h: 16, w: 16, ci: 16, co: 64, kh: 3, kw: 3, pad: [2]int{1, 1}, bias: true, inPlace: true, act: relu},
		{n: 1, h: 17, w: 16, ci: 48, co: 32, kh: 3, kw: 3, residual: true, act: kernels.ActGELU},
		{n: 1, h: 13, w: 15, ci: 16, co: 16, kh: 3, kw: 3, pad: [2]int{2, 1}, bias: true},
		{n: 2, h: 30, w: 28, ci: 16, co: 32, kh: 3, kw: 3, pad: [2]int{1, 1}, bias: true, act: relu},
		{n: 1, h: 14, w: 14, ci: 32, co: 128, kh: 3, kw: 3, pad: [2]int{1, 1}, bias: true, residual: true, act: relu},
	}
}

// params are the case's ConvParams without tensors.
func (c convCase) params() kernels.ConvParams {
	return kernels.ConvParams{Stride: c.stride, Pad: c.pad, Dilation: c.dil, Groups: c.groups, Act: c.act}
}

// geometry resolves the case's defaults as check.Conv2D does.
func (c convCase) geometry() kernels.ConvDims {
	return c.params().Dims(kernels.Shape{c.n, c.h, c.w, c.ci}, kernels.Shape{c.co, c.kh, c.kw, c.ci / max(c.groups, 1)})
}

// runConv runs one case in dt and checks it against the reference, with
// tol 0 meaning the dtype's tolerance. packFor, when not 0, packs the
// filters first (ConvPacker) for that many groups: the case's own, or
// others, which the convolution must not be misled by.
func (e *env) runConv(c convCase, dt kernels.DType, tf32 bool, tol float64, packFor int) {
	g := c.geometry()
	x, xv := e.Input("x", dt, c.n, c.h, c.w, c.ci)
	w, wv := e.Input("w", dt, c.co, c.kh, c.kw, c.ci/g.Groups)
	if packFor != 0 {
		require.NoError(e, optionalGroup[kernels.ConvPacker](e).PackConvFilters(w, packFor))
	}
	want := RefConv2D(xv, wv, g)
	p := c.params()
	p.TF32 = tf32
	if c.bias {
		var bv []float64
		p.Bias, bv = e.Input("bias", dt, c.co)
		for i := range want {
			want[i] += bv[i%c.co]
		}
	}
	out := e.Output(dt, g.N, g.Ho, g.Wo, g.Co)
	if c.residual || c.inPlace {
		var rv []float64
		if c.inPlace {
			out, rv = e.mutable(dt, g.N, g.Ho, g.Wo, g.Co)
			p.Residual = out
		} else {
			p.Residual, rv = e.Input("residual", dt, g.N, g.Ho, g.Wo, g.Co)
		}
		for i := range want {
			want[i] += rv[i]
		}
	}
	for i, v := range want {
		want[i] = RefAct(c.act, v)
	}
	require.NoError(e, e.vision().Conv2D(out, x, w, p))
	e.Check("out", out, want, tol)
}

func visionTests() []test {
	var ts []test
	for _, dt := range kernels.FloatTypes {
		for _, c := range convCases() {
			ts = append(ts, test{name("Conv2D", "dtype", dt, "case", c), func(e *env) { e.runConv(c, dt, false, 0, 0) }})
			ts = append(ts, test{name("Conv2D", "filters", "packed", "dtype", dt, "case", c), func(e *env) {
				e.runConv(c, dt, false, 0, c.geometry().Groups)
			}})
		}
	}
	for _, c := range convCases()[2:5] {
		ts = append(ts, test{name("Conv2D", "dtype", "tf32", "case", c), func(e *env) {
			e.runConv(c, kernels.F32, true, kernels.Tolerance(kernels.F16), 0)
		}})
	}
	for _, c := range convCases() {
		if g := c.geometry(); g.Groups > 1 {
			ts = append(ts, test{name("Conv2D", "filters", "packed-for-1-group", "case", c), func(e *env) {
				e.runConv(c, kernels.F32, false, 0, 1)
			}})
		}
	}
	ts = append(ts, test{"Conv2D/filters/packed-then-uploaded", convPackedUpload}, test{"PackConvFilters/errors", packConvErrors})
	pools := []struct {
		n, h, w, c int
		p          kernels.PoolParams
	}{
		{2, 12, 12, 16, kernels.PoolParams{Kernel: [2]int{3, 3}, Stride: [2]int{2, 2}, Pad: [2]int{1, 1}}}, // ResNet's
		{1, 7, 9, 5, kernels.PoolParams{Kernel: [2]int{2, 2}}},
		{2, 9, 8, 3, kernels.PoolParams{Kernel: [2]int{3, 3}, Stride: [2]int{1, 1}, Pad: [2]int{1, 1}, Dilation: [2]int{2, 2}}},
		{1, 5, 11, 33, kernels.PoolParams{Kernel: [2]int{3, 2}, Stride: [2]int{2, 3}, Pad: [2]int{1, 0}}},
		// Channels a backend may take 16 at a time, with dilated taps and
		// padding on both sides; and a row too narrow for any window to
		// lie inside it.
		{1, 6, 10, 32, kernels.PoolParams{Kernel: [2]int{3, 3}, Stride: [2]int{1, 2}, Pad: [2]int{1, 1}, Dilation: [2]int{2, 2}}},
		{2, 4, 3, 16, kernels.PoolParams{Kernel: [2]int{3, 3}, Stride: [2]int{2, 2}, Pad: [2]int{1, 1}}},
	}
	for _, dt := range kernels.FloatTypes {
		for _, pc := range pools {
			ts = append(ts, test{name("MaxPool2D", "dtype", dt, "x", kernels.Shape{pc.n, pc.h, pc.w, pc.c},
				"kernel", fmt.Sprintf("%dx%d", pc.p.Kernel[0], pc.p.Kernel[1])), func(e *env) {
				x, xv := e.Input("x", dt, pc.n, pc.h, pc.w, pc.c)
				g := pc.p.Dims(kernels.Shape{pc.n, pc.h, pc.w, pc.c})
				out := e.Output(dt, pc.n, g.Ho, g.Wo, pc.c)
				require.NoError(e, e.vision().MaxPool2D(out, x, pc.p))
				e.Check("out", out, RefMaxPool2D(xv, g), 0)
			}})
		}
		for _, s := range [][4]int{{1, 1, 1, 5}, {2, 7, 7, 64}, {3, 4, 9, 33}, {1, 2, 3, 2048}, {2, 3, 3, 1100}} {
			ts = append(ts, test{name("GlobalAvgPool", "dtype", dt, "x", kernels.Shape(s[:])), func(e *env) {
				x, xv := e.Input("x", dt, s[:]...)
				out := e.Output(dt, s[0], s[3])
				require.NoError(e, e.vision().GlobalAvgPool(out, x))
				e.Check("out", out, RefGlobalAvgPool(xv, s[0], s[1]*s[2], s[3]), 0)
			}})
		}
	}
	ts = append(ts, test{"MaxPool2D/nan", func(e *env) {
		// A NaN wins its windows; -Inf is an ordinary value.
		vals := []float64{1, math.NaN(), 3, 4, math.Inf(-1), math.Inf(-1), 7, 8, 9}
		x, _ := e.inputFromValues("x", kernels.F32, vals, 1, 3, 3, 1)
		out := e.Output(kernels.F32, 1, 2, 2, 1)
		require.NoError(e, e.vision().MaxPool2D(out, x, kernels.PoolParams{Kernel: [2]int{2, 2}, Stride: [2]int{1, 1}}))
		require.NoError(e, e.b.Sync())
		got, err := kernels.ToFloat32(out)
		require.NoError(e, err)
		require.True(e, math.IsNaN(float64(got[0])) && math.IsNaN(float64(got[1])), "windows holding the NaN: %v", got)
		require.Equal(e, []float32{8, 9}, got[2:], "windows without it")
	}})
	return append(ts, test{"vision/errors", visionErrors})
}

// visionErrors checks that bad calls fail with errors naming the op and
// the argument.
func visionErrors(e *env) {
	v := e.vision()
	f32 := kernels.F32
	x, _ := e.Input("x", f32, 1, 6, 6, 8)
	w, _ := e.Input("w", f32, 4, 3, 3, 8)
	out := e.Output(f32, 1, 4, 4, 4)
	e.requireOpErr(v.Conv2D(e.Output(f32, 1, 6, 6, 4), x, w, kernels.ConvParams{}), kernels.ErrShape, "Conv2D", "out")
	e.requireOpErr(v.Conv2D(out, x, w, kernels.ConvParams{Groups: 3}), kernels.ErrShape, "Conv2D", "3 groups")
	e.requireOpErr(v.Conv2D(out, x, w, kernels.ConvParams{Groups: 2}), kernels.ErrShape, "Conv2D", "input channels per group")
	e.requireOpErr(v.Conv2D(out, x, w, kernels.ConvParams{Stride: [2]int{-1, 1}}), kernels.ErrValue, "Conv2D", "stride")
	e.requireOpErr(v.Conv2D(out, x, w, kernels.ConvParams{Pad: [2]int{0, -2}}), kernels.ErrValue, "Conv2D", "padding")
	e.requireOpErr(v.Conv2D(out, x, w, kernels.ConvParams{Act: 99}), kernels.ErrValue, "Conv2D", "activation")
	b16, _ := e.Input("bias", kernels.BF16, 4)
	e.requireOpErr(v.Conv2D(out, x, w, kernels.ConvParams{Bias: b16}), kernels.ErrDType, "Conv2D", "bias")
	r, _ := e.Input("residual", f32, 1, 4, 4, 5)
	e.requireOpErr(v.Conv2D(out, x, w, kernels.ConvParams{Residual: r}), kernels.ErrShape, "Conv2D", "residual")
	nchw, _ := e.Input("x3", f32, 6, 6, 8)
	e.requireOpErr(v.Conv2D(out, nchw, w, kernels.ConvParams{}), kernels.ErrShape, "Conv2D", "NHWC")
	big, _ := e.Input("w7", f32, 4, 9, 9, 8)
	e.requireOpErr(v.Conv2D(out, x, big, kernels.ConvParams{}), kernels.ErrShape, "Conv2D", "smaller than the 9×9 window")
	sq, _ := e.mutable(f32, 1, 6, 6, 8)
	w1, _ := e.Input("w1", f32, 8, 1, 1, 8)
	e.requireOpErr(v.Conv2D(sq, sq, w1, kernels.ConvParams{}), kernels.ErrValue, "Conv2D", "out is x's storage")

	pout := e.Output(f32, 1, 3, 3, 8)
	e.requireOpErr(v.MaxPool2D(pout, x, kernels.PoolParams{Kernel: [2]int{3, 3}, Stride: [2]int{2, 2}, Pad: [2]int{2, 2}}),
		kernels.ErrValue, "MaxPool2D", "padding")
	e.requireOpErr(v.MaxPool2D(pout, x, kernels.PoolParams{}), kernels.ErrValue, "MaxPool2D", "kernel")
	e.requireOpErr(v.MaxPool2D(e.Output(f32, 1, 2, 2, 8), x, kernels.PoolParams{Kernel: [2]int{3, 3}, Stride: [2]int{2, 2}, Pad: [2]int{1, 1}}),
		kernels.ErrShape, "MaxPool2D", "out")
	e.requireOpErr(v.GlobalAvgPool(e.Output(f32, 1, 4), x), kernels.ErrShape, "GlobalAvgPool", "out")
	e.requireOpErr(v.GlobalAvgPool(e.Output(kernels.F16, 1, 8), x), kernels.ErrDType, "GlobalAvgPool", "out")
}

// convPackedUpload packs the filters of each 3×3 stride-1 case of one
// group, convolves, uploads new values over them and checks that Conv2D
// multiplies the new ones: no packed or transformed form outlives them.
func convPackedUpload(e *env) {
	for _, c := range convCases() {
		if c.kh != 3 || c.kw != 3 || c.stride != [2]int{} || c.dil != [2]int{} || c.groups > 1 {
			continue
		}
		g := c.geometry()
		x, xv := e.Input("x", kernels.F32, c.n, c.h, c.w, c.ci)
		w, old := e.mutable(kernels.F32, c.co, c.kh, c.kw, c.ci)
		require.NoError(e, optionalGroup[kernels.ConvPacker](e).PackConvFilters(w, 1))
		out := e.Output(kernels.F32, g.N, g.Ho, g.Wo, g.Co)
		require.NoError(e, e.vision().Conv2D(out, x, w, kernels.ConvParams{Pad: c.pad}))
		e.Check("out", out, RefConv2D(xv, old, g), 0)
		wv := make([]float64, w.Len())
		w32 := make([]float32, w.Len())
		for i := range wv {
			w32[i] = float32(e.rng.Float64() - 0.5)
			wv[i] = float64(w32[i])
		}
		require.NoError(e, kernels.UploadFloat32(w, w32))
		require.NoError(e, e.vision().Conv2D(out, x, w, kernels.ConvParams{Pad: c.pad}))
		e.Check("out", out, RefConv2D(xv, wv, g), 0)
	}
}

// packConvErrors checks that PackConvFilters names the shape it rejects.
func packConvErrors(e *env) {
	cp := optionalGroup[kernels.ConvPacker](e)
	w, _ := e.Input("w", kernels.F32, 6, 3, 3, 4)
	flat, _ := e.Input("flat", kernels.F32, 6, 36)
	for _, c := range []struct {
		w      *kernels.Tensor
		groups int
	}{{w, 0}, {w, 4}, {flat, 1}} {
		err := cp.PackConvFilters(c.w, c.groups)
		require.ErrorIs(e, err, kernels.ErrShape, "%v for %d groups", c.w, c.groups)
		require.ErrorContains(e, err, "PackConvFilters")
	}
}
