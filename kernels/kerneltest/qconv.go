package kerneltest

import (
	"fmt"
	"math"

	"github.com/stretchr/testify/require"
	"github.com/zbench/zbench/kernels"
)

func init() { suites = append(suites, qconvTests()) }

// quantConv returns the backend's QuantConv ops; every backend implements
// them.
func (e *env) quantConv() kernels.QuantConv {
	e.Helper()
	return group[kernels.QuantConv](e)
}

// RefQConv2D is the exact int32 sum of QuantConv.QConv2D for x
// [N, H, W, Ci] and w [Co, Kh, Kw, Ci/G] (NHWC), g's geometry, in int64 (an
// int32 overflow would show as a mismatch): the result is [N, Ho, Wo, Co].
func RefQConv2D(x, w []int8, g kernels.ConvDims) []int64 {
	cg, cog := g.Ci/g.Groups, g.Co/g.Groups
	out := make([]int64, g.N*g.Ho*g.Wo*g.Co)
	for n := range g.N {
		for i := range g.Ho {
			for j := range g.Wo {
				o := out[((n*g.Ho+i)*g.Wo+j)*g.Co:][:g.Co]
				for co := range g.Co {
					gr := co / cog
					var s int64
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
								s += int64(v) * int64(wr[c])
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

// qconvCases are Conv2D's cases (every path a backend may take) and the
// int8 kernels' own edges: several blocks of output pixels and of output
// channels, channel counts that no vector width divides, groups wider than
// a block, and K past one vector many times over (ResNet's 3×3 at 512
// channels).
func qconvCases() []convCase {
	return append(convCases(),
		convCase{n: 1, h: 13, w: 11, ci: 64, co: 70, kh: 3, kw: 3, pad: [2]int{1, 1}},
		convCase{n: 2, h: 12, w: 12, ci: 32, co: 136, kh: 1, kw: 1},
		convCase{n: 1, h: 9, w: 9, ci: 32, co: 160, kh: 3, kw: 3, pad: [2]int{1, 1}, groups: 2},
		convCase{n: 1, h: 5, w: 6, ci: 200, co: 9, kh: 3, kw: 3, pad: [2]int{1, 1}},
		convCase{n: 1, h: 4, w: 4, ci: 512, co: 12, kh: 3, kw: 3, pad: [2]int{1, 1}},
	)
}

// qconvEpilogue is one epilogue of the suite: the out dtypes it is run
// with and the cases (by index into qconvCases) it is run on.
type qconvEpilogue struct {
	name     string
	wRow     bool // WScale per output channel
	bias     bool
	residual bool // a separate residual tensor
	inPlace  bool // the residual is out
	act      kernels.Activation
	outs     []kernels.DType
	cases    []int
}

func qconvTests() []test {
	var ts []test
	cases := qconvCases()
	for _, c := range cases {
		ts = append(ts, test{name("QConv2D", "out", "int32", "case", c.geometryString()), func(e *env) { e.qconvExact(c) }})
	}
	all := []kernels.DType{kernels.F32, kernels.F16, kernels.BF16, kernels.I8}
	float := all[:3]
	epilogues := []qconvEpilogue{
		{name: "per-tensor", outs: all, cases: []int{0, 2, 3, 13, 15}},
		{name: "per-channel/bias/relu", wRow: true, bias: true, act: kernels.ActReLU, outs: all, cases: []int{1, 2, 4, 5, 8, 10, 15, 16, 17, 18, 19}},
		{name: "per-channel/bias/residual/relu", wRow: true, bias: true, residual: true, act: kernels.ActReLU, outs: float, cases: []int{0, 3, 6, 14, 16, 17}},
		{name: "per-channel/bias/residual=out/relu", wRow: true, bias: true, inPlace: true, act: kernels.ActReLU, outs: float, cases: []int{5, 7, 15, 18}},
		{name: "per-tensor/residual=out", inPlace: true, outs: float[:1], cases: []int{2, 9}},
		{name: "per-channel/gelu", wRow: true, act: kernels.ActGELU, outs: []kernels.DType{kernels.F32, kernels.I8}, cases: []int{11, 12}},
	}
	for _, ep := range epilogues {
		for _, dt := range ep.outs {
			for _, i := range ep.cases {
				c := cases[i]
				ts = append(ts, test{name("QConv2D", "out", dt, "epilogue", ep.name, "case", c.geometryString()), func(e *env) {
					e.qconvEpilogue(c, dt, ep)
				}})
			}
		}
	}
	return append(ts, test{"QConv2D/padding-is-zero", qconvPadding}, test{"qconv/errors", qconvErrors})
}

// geometryString is the case's name without its float epilogue.
func (c convCase) geometryString() string {
	c.bias, c.residual, c.inPlace, c.act = false, false, false, kernels.ActNone
	return c.String()
}

// qconvOperands uploads x and w of case c, int8 in [lo, hi], and returns
// them with their values and the geometry.
func (e *env) qconvOperands(c convCase, lo, hi int) (x, w *kernels.Tensor, xv, wv []int8, g kernels.ConvDims) {
	e.Helper()
	g = c.geometry()
	xv = e.randInt8(c.n*c.h*c.w*c.ci, lo, hi)
	wv = e.randInt8(c.co*c.kh*c.kw*c.ci/g.Groups, lo, hi)
	x = e.int8s("x", xv, c.n, c.h, c.w, c.ci)
	w = e.int8s("w", wv, c.co, c.kh, c.kw, c.ci/g.Groups)
	return x, w, xv, wv, g
}

// qconvExact checks the raw int32 sums over the whole int8 range, −128
// included, with no tolerance.
func (e *env) qconvExact(c convCase) {
	x, w, xv, wv, g := e.qconvOperands(c, -128, 127)
	out := e.Output(kernels.I32, g.N, g.Ho, g.Wo, g.Co)
	p := kernels.QConvParams{Stride: c.stride, Pad: c.pad, Dilation: c.dil, Groups: c.groups}
	require.NoError(e, e.quantConv().QConv2D(out, x, w, p))
	require.NoError(e, e.b.Sync())
	got, err := kernels.ToInt32(out)
	require.NoError(e, err)
	for i, want := range RefQConv2D(xv, wv, g) {
		if int64(got[i]) != want {
			require.Failf(e, "QConv2D sum differs", "out[%d] (pixel %d, channel %d) = %d, want %d",
				i, i/g.Co, i%g.Co, got[i], want)
		}
	}
}

// qconvEpilogue checks the rescale, bias, residual, activation and output
// rounding against a float64 reference of the same int32 sums; an int8
// out must be the requantized reference (see requireQuantized).
func (e *env) qconvEpilogue(c convCase, dt kernels.DType, ep qconvEpilogue) {
	x, w, xv, wv, g := e.qconvOperands(c, -127, 127)
	p := kernels.QConvParams{Stride: c.stride, Pad: c.pad, Dilation: c.dil, Groups: c.groups, Act: ep.act}
	var xs, ws, bs, rv []float64
	p.XScale, xs = e.scales("XScale", 1)
	p.WScale, ws = e.scales("WScale", map[bool]int{false: 1, true: g.Co}[ep.wRow])
	if ep.bias {
		p.Bias, bs = e.Uniform("Bias", kernels.F32, -2, 2, g.Co)
	}
	shape := []int{g.N, g.Ho, g.Wo, g.Co}
	out := e.Output(dt, shape...)
	switch {
	case ep.inPlace:
		out, rv = e.mutable(dt, shape...)
		p.Residual = out
	case ep.residual:
		p.Residual, rv = e.Input("Residual", dt, shape...)
	}
	want := make([]float64, g.N*g.Ho*g.Wo*g.Co)
	for i, s := range RefQConv2D(xv, wv, g) {
		o := i % g.Co
		y := float64(s) * xs[0] * ws[o%len(ws)]
		if bs != nil {
			y += bs[o]
		}
		if rv != nil {
			y += rv[i]
		}
		want[i] = RefAct(ep.act, y)
	}
	if dt != kernels.I8 {
		require.NoError(e, e.quantConv().QConv2D(out, x, w, p))
		e.Check("out", out, want, 0)
		return
	}
	amax := 0.0
	for _, v := range want {
		amax = math.Max(amax, math.Abs(v))
	}
	outs := amax / 110 // the largest values clamp at ±127
	p.OutScale, _ = e.inputFromValues("OutScale", kernels.F32, []float64{outs}, 1)
	outs = float64(float32(outs))
	require.NoError(e, e.quantConv().QConv2D(out, x, w, p))
	got := e.download(out)
	for i, v := range want {
		e.requireQuantized(fmt.Sprintf("out[%d]", i), got[i], v/outs)
	}
}

// qconvPadding checks that the padding is the quantized zero: with x all
// 1 and w all 1, each sum is the number of taps inside the image.
func qconvPadding(e *env) {
	const h, w, ci = 3, 4, 5
	ones := func(n int) []int8 {
		v := make([]int8, n)
		for i := range v {
			v[i] = 1
		}
		return v
	}
	x := e.int8s("x", ones(h*w*ci), 1, h, w, ci)
	f := e.int8s("w", ones(2*3*3*ci), 2, 3, 3, ci)
	out := e.Output(kernels.I32, 1, h, w, 2)
	require.NoError(e, e.quantConv().QConv2D(out, x, f, kernels.QConvParams{Pad: [2]int{1, 1}}))
	got := e.download(out)
	for i := range h {
		for j := range w {
			rows := 3 - btoi(i == 0) - btoi(i == h-1)
			cols := 3 - btoi(j == 0) - btoi(j == w-1)
			for o := range 2 {
				require.Equalf(e, float32(rows*cols*ci), got[(i*w+j)*2+o], "out[0, %d, %d, %d]", i, j, o)
			}
		}
	}
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

// qconvErrors checks that bad calls fail with errors naming the op and
// the argument.
func qconvErrors(e *env) {
	qc := e.quantConv()
	f32, i8 := kernels.F32, kernels.I8
	x := e.int8s("x", e.randInt8(6*6*8, -127, 127), 1, 6, 6, 8)
	w := e.int8s("w", e.randInt8(4*3*3*8, -127, 127), 4, 3, 3, 8)
	xs, _ := e.inputFromValues("XScale", f32, []float64{0.01}, 1)
	ws, _ := e.scales("WScale", 4)
	out := e.Output(f32, 1, 4, 4, 4)
	ok := kernels.QConvParams{XScale: xs, WScale: ws}
	with := func(f func(p *kernels.QConvParams)) kernels.QConvParams {
		p := ok
		f(&p)
		return p
	}
	xf, _ := e.Input("xf", f32, 1, 6, 6, 8)
	e.requireOpErr(qc.QConv2D(out, xf, w, ok), kernels.ErrDType, "QConv2D", "x is")
	wf, _ := e.Input("wf", f32, 4, 3, 3, 8)
	e.requireOpErr(qc.QConv2D(out, x, wf, ok), kernels.ErrDType, "QConv2D", "w is")
	e.requireOpErr(qc.QConv2D(e.Output(kernels.E4M3, 1, 4, 4, 4), x, w, ok), kernels.ErrDType, "QConv2D", "out is")
	e.requireOpErr(qc.QConv2D(e.Output(f32, 1, 6, 6, 4), x, w, ok), kernels.ErrShape, "QConv2D", "out has shape")
	x3 := e.int8s("x3", e.randInt8(6*6*8, -127, 127), 6, 6, 8)
	e.requireOpErr(qc.QConv2D(out, x3, w, ok), kernels.ErrShape, "QConv2D", "NHWC")
	e.requireOpErr(qc.QConv2D(out, x, w, with(func(p *kernels.QConvParams) { p.Groups = 3 })), kernels.ErrShape, "QConv2D", "3 groups")
	e.requireOpErr(qc.QConv2D(out, x, w, with(func(p *kernels.QConvParams) { p.Stride = [2]int{0, -1} })), kernels.ErrValue, "QConv2D", "stride")
	e.requireOpErr(qc.QConv2D(out, x, w, with(func(p *kernels.QConvParams) { p.Act = 99 })), kernels.ErrValue, "QConv2D", "activation")
	e.requireOpErr(qc.QConv2D(out, x, w, kernels.QConvParams{XScale: xs}), kernels.ErrValue, "QConv2D", "WScale")
	e.requireOpErr(qc.QConv2D(out, x, w, with(func(p *kernels.QConvParams) { p.XScale = ws })), kernels.ErrShape, "QConv2D", "XScale")
	ws3, _ := e.scales("WScale3", 3)
	e.requireOpErr(qc.QConv2D(out, x, w, with(func(p *kernels.QConvParams) { p.WScale = ws3 })), kernels.ErrShape, "QConv2D", "WScale")
	b16, _ := e.Input("Bias16", kernels.F16, 4)
	e.requireOpErr(qc.QConv2D(out, x, w, with(func(p *kernels.QConvParams) { p.Bias = b16 })), kernels.ErrDType, "QConv2D", "Bias")
	rb, _ := e.Input("ResidualBF16", kernels.BF16, 1, 4, 4, 4)
	e.requireOpErr(qc.QConv2D(out, x, w, with(func(p *kernels.QConvParams) { p.Residual = rb })), kernels.ErrDType, "QConv2D", "Residual")
	r5, _ := e.Input("Residual5", f32, 1, 4, 4, 5)
	e.requireOpErr(qc.QConv2D(out, x, w, with(func(p *kernels.QConvParams) { p.Residual = r5 })), kernels.ErrShape, "QConv2D", "Residual")
	e.requireOpErr(qc.QConv2D(out, x, w, with(func(p *kernels.QConvParams) { p.OutScale = xs })), kernels.ErrValue, "QConv2D", "OutScale")
	q := e.Output(i8, 1, 4, 4, 4)
	e.requireOpErr(qc.QConv2D(q, x, w, ok), kernels.ErrValue, "QConv2D", "OutScale is required")
	r8, _ := e.Input("Residual8", f32, 1, 4, 4, 4)
	e.requireOpErr(qc.QConv2D(q, x, w, with(func(p *kernels.QConvParams) { p.OutScale, p.Residual = xs, r8 })),
		kernels.ErrValue, "QConv2D", "residual needs a float out")
	e.requireOpErr(qc.QConv2D(e.Output(kernels.I32, 1, 4, 4, 4), x, w, ok), kernels.ErrValue, "QConv2D", "int32")
	sq := e.int8s("square", e.randInt8(6*6*8, -127, 127), 1, 6, 6, 8)
	w1 := e.int8s("w1", e.randInt8(8*8, -127, 127), 8, 1, 1, 8)
	e.requireOpErr(qc.QConv2D(sq, sq, w1, kernels.QConvParams{OutScale: xs, XScale: xs, WScale: xs}), kernels.ErrValue, "QConv2D", "out is x's storage")
	const wide = kernels.QConvMaxK + 1
	xw := e.int8s("xWide", make([]int8, wide), 1, 1, 1, wide)
	ww := e.int8s("wWide", make([]int8, wide), 1, 1, 1, wide)
	e.requireOpErr(qc.QConv2D(e.Output(kernels.I32, 1, 1, 1, 1), xw, ww, kernels.QConvParams{}), kernels.ErrShape, "QConv2D", fmt.Sprintf("at most %d", kernels.QConvMaxK))
}
