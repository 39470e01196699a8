package kerneltest

import (
	"math"

	"github.com/stretchr/testify/require"
	"github.com/zbench/zbench/kernels"
)

func init() { suites = append(suites, elementwiseTests()) }

// ewLens are the lengths of the elementwise tests: awkward sizes, and one
// long enough to be split across goroutines.
var ewLens = []int{1, 31, 4097, 40009}

// allTypes lists every dtype, for Fill and Cast.
var allTypes = []kernels.DType{kernels.F32, kernels.F16, kernels.BF16, kernels.I8, kernels.E4M3, kernels.E5M2, kernels.I32}

// activations lists every activation.
var activations = []kernels.Activation{kernels.ActNone, kernels.ActReLU, kernels.ActGELU, kernels.ActGELUTanh, kernels.ActSiLU, kernels.ActTanh}

// RefAct is the activation a in float64: the reference of Act and of
// MatMul's epilogue.
func RefAct(a kernels.Activation, x float64) float64 {
	switch a {
	case kernels.ActReLU:
		return math.Max(x, 0)
	case kernels.ActGELU:
		return 0.5 * x * (1 + math.Erf(x/math.Sqrt2))
	case kernels.ActGELUTanh:
		return 0.5 * x * (1 + math.Tanh(math.Sqrt(2/math.Pi)*(x+0.044715*x*x*x)))
	case kernels.ActSiLU:
		return x / (1 + math.Exp(-x))
	case kernels.ActTanh:
		return math.Tanh(x)
	}
	return x
}

// refActGrad is the derivative of activation a in float64.
func refActGrad(a kernels.Activation, x float64) float64 {
	switch a {
	case kernels.ActReLU:
		if x > 0 {
			return 1
		}
		return 0
	case kernels.ActGELU: // Φ(x) + x·φ(x)
		return 0.5*(1+math.Erf(x/math.Sqrt2)) + x*math.Exp(-x*x/2)/math.Sqrt(2*math.Pi)
	case kernels.ActGELUTanh:
		c := math.Sqrt(2 / math.Pi)
		t := math.Tanh(c * (x + 0.044715*x*x*x))
		return 0.5*(1+t) + 0.5*x*(1-t*t)*c*(1+3*0.044715*x*x)
	case kernels.ActSiLU:
		s := 1 / (1 + math.Exp(-x))
		return s * (1 + x*(1-s))
	case kernels.ActTanh:
		t := math.Tanh(x)
		return 1 - t*t
	}
	return 1
}

// refRound is a value stored in dtype d and read back: what Cast and Fill
// produce.
func refRound(d kernels.DType, v float64) float64 {
	if d == kernels.I32 {
		return math.Max(math.MinInt32, math.Min(math.MaxInt32, math.RoundToEven(v)))
	}
	return float64(kernels.Round(d, float32(v)))
}

func elementwiseTests() []test {
	var ts []test
	reg := func(name string, fn func(e *env)) { ts = append(ts, test{name, fn}) }
	for _, dt := range kernels.FloatTypes {
		for _, n := range ewLens {
			reg(name("add", "dt", dt, "n", n), func(e *env) { e.add(dt, []int{n}, []int{n}) })
			reg(name("scale", "dt", dt, "n", n), func(e *env) { e.scale(dt, n) })
			reg(name("sumrows", "dt", dt, "shape", kernels.Shape{n}), func(e *env) { e.sumRows(dt, n) })
			for _, a := range activations {
				reg(name("act", "dt", dt, "act", a, "n", n), func(e *env) { e.act(dt, a, n) })
				reg(name("actbackward", "dt", dt, "act", a, "n", n), func(e *env) { e.actBackward(dt, a, n) })
			}
		}
		for _, s := range [][2][]int{
			{{31, 17}, {17}},
			{{3, 5, 7}, {5, 7}},
			{{3, 5, 7}, {7}},
			{{4097, 3}, {3}},
			{{64, 1000}, {1000}},
			{{31, 4}, {}},
		} {
			reg(name("add", "dt", dt, "a", kernels.Shape(s[0]), "b", kernels.Shape(s[1])), func(e *env) { e.add(dt, s[0], s[1]) })
		}
		for _, shape := range [][]int{{31, 17}, {4097, 31}, {3, 5, 300}, {40, 1000}, {4097, 1}, {7, 4097}} {
			reg(name("sumrows", "dt", dt, "shape", kernels.Shape(shape)), func(e *env) { e.sumRows(dt, shape...) })
		}
	}
	for _, dt := range allTypes {
		for _, n := range []int{1, 31, 4097} {
			reg(name("fill", "dt", dt, "n", n), func(e *env) { e.fill(dt, n) })
		}
		for _, to := range allTypes {
			for _, n := range []int{1, 4097} {
				reg(name("cast", "from", dt, "to", to, "n", n), func(e *env) { e.cast(dt, to, n) })
			}
		}
	}
	reg(name("cast", "from", kernels.F32, "to", kernels.BF16, "n", 40009), func(e *env) { e.cast(kernels.F32, kernels.BF16, 40009) })
	reg(name("cast", "from", kernels.F16, "to", kernels.F32, "n", 40009), func(e *env) { e.cast(kernels.F16, kernels.F32, 40009) })
	for _, dt := range kernels.FloatTypes {
		for _, n := range []int{31, 40009} {
			for _, over := range []string{"a", "b"} {
				reg(name("add", "dt", dt, "n", n, "inplace", "out="+over), func(e *env) { e.addInPlace(dt, n, over == "b") })
			}
			reg(name("scale", "dt", dt, "n", n, "inplace", "out=x"), func(e *env) { e.scaleInPlace(dt, n) })
			reg(name("cast", "dt", dt, "n", n, "inplace", "out=x"), func(e *env) { e.castInPlace(dt, n) })
			for _, a := range activations {
				reg(name("act", "dt", dt, "act", a, "n", n, "inplace", "out=x"), func(e *env) { e.actInPlace(dt, a, n) })
				for _, over := range []string{"dy", "x"} {
					reg(name("actbackward", "dt", dt, "act", a, "n", n, "inplace", "dx="+over), func(e *env) {
						e.actBackwardInPlace(dt, a, n, over == "x")
					})
				}
			}
		}
	}
	reg("elementwise/errors", elementwiseErrors)
	return ts
}

// The in-place calls the Ops doc allows: each elementwise op with its
// output over one of its inputs.

// addInPlace checks Add with out over a, or over b when overB.
func (e *env) addInPlace(dt kernels.DType, n int, overB bool) {
	e.Helper()
	a, av := e.mutable(dt, n)
	b, bv := e.mutable(dt, n)
	out := a
	if overB {
		out = b
	}
	require.NoError(e, e.b.Add(out, a, b))
	want := make([]float64, n)
	for i := range want {
		want[i] = av[i] + bv[i]
	}
	e.Check("out", out, want, 0)
}

// scaleInPlace checks Scale with out over x.
func (e *env) scaleInPlace(dt kernels.DType, n int) {
	e.Helper()
	const s = -1.75
	x, xv := e.mutable(dt, n)
	require.NoError(e, e.b.Scale(x, x, s))
	want := make([]float64, n)
	for i, v := range xv {
		want[i] = s * v
	}
	e.Check("out", x, want, 0)
}

// castInPlace checks Cast with out over x, of x's dtype: a copy onto itself.
func (e *env) castInPlace(dt kernels.DType, n int) {
	e.Helper()
	x, xv := e.mutable(dt, n)
	require.NoError(e, e.b.Cast(x, x))
	e.Check("out", x, xv, 0)
}

// actInPlace checks Act with out over x.
func (e *env) actInPlace(dt kernels.DType, a kernels.Activation, n int) {
	e.Helper()
	x, xv := e.mutable(dt, n)
	require.NoError(e, e.b.Act(x, x, a))
	want := make([]float64, n)
	for i, v := range xv {
		want[i] = RefAct(a, v)
	}
	e.Check("out", x, want, 0)
}

// actBackwardInPlace checks ActBackward with dx over dy, or over x when
// overX.
func (e *env) actBackwardInPlace(dt kernels.DType, a kernels.Activation, n int, overX bool) {
	e.Helper()
	x, xv := e.mutable(dt, n)
	dy, dyv := e.mutable(dt, n)
	dx := dy
	if overX {
		dx = x
	}
	require.NoError(e, e.b.ActBackward(dx, dy, x, a))
	want := make([]float64, n)
	for i, v := range xv {
		want[i] = dyv[i] * refActGrad(a, v)
	}
	e.Check("dx", dx, want, 0)
}

func (e *env) add(dt kernels.DType, aShape, bShape []int) {
	e.Helper()
	a, av := e.Input("a", dt, aShape...)
	b, bv := e.Input("b", dt, bShape...)
	out := e.Output(dt, aShape...)
	require.NoError(e, e.b.Add(out, a, b))
	want := make([]float64, len(av))
	for i := range want {
		want[i] = av[i] + bv[i%len(bv)]
	}
	e.Check("out", out, want, 0)
}

func (e *env) scale(dt kernels.DType, n int) {
	e.Helper()
	const s = -1.75
	x, xv := e.Input("x", dt, n)
	out := e.Output(dt, n)
	require.NoError(e, e.b.Scale(out, x, s))
	want := make([]float64, n)
	for i, v := range xv {
		want[i] = s * v
	}
	e.Check("out", out, want, 0)
}

func (e *env) fill(dt kernels.DType, n int) {
	e.Helper()
	const v = -2.6
	out := e.Output(dt, n)
	require.NoError(e, e.b.Fill(out, v))
	want := make([]float64, n)
	for i := range want {
		want[i] = refRound(dt, v)
	}
	e.Check("out", out, want, 1e-12) // exact
}

func (e *env) cast(from, to kernels.DType, n int) {
	e.Helper()
	// Magnitudes from 1e-3 to ~630: FP8 subnormals, int8 saturation and
	// E4M3 saturation (448) all occur.
	vals := make([]float32, n)
	for i := range vals {
		v := math.Pow(10, -3+5.8*e.rng.Float64())
		if e.rng.IntN(2) == 0 {
			v = -v
		}
		vals[i] = float32(refRound(from, v))
	}
	if n == 1 {
		vals[0] = float32(refRound(from, 1.5)) // a tie for the integers
	}
	x, err := kernels.FromFloat32(e.b, from, vals, n)
	require.NoError(e, err)
	e.track("x", x)
	out := e.Output(to, n)
	require.NoError(e, e.b.Cast(out, x))
	want := make([]float64, n)
	for i, v := range vals {
		want[i] = refRound(to, float64(v))
	}
	e.Check("out", out, want, 1e-12) // exact
}

func (e *env) act(dt kernels.DType, a kernels.Activation, n int) {
	e.Helper()
	x, xv := e.Uniform("x", dt, -4, 4, n)
	out := e.Output(dt, n)
	require.NoError(e, e.b.Act(out, x, a))
	want := make([]float64, n)
	for i, v := range xv {
		want[i] = RefAct(a, v)
	}
	e.Check("out", out, want, 0)
}

func (e *env) actBackward(dt kernels.DType, a kernels.Activation, n int) {
	e.Helper()
	x, xv := e.Uniform("x", dt, -4, 4, n)
	dy, dyv := e.Input("dy", dt, n)
	dx := e.Output(dt, n)
	require.NoError(e, e.b.ActBackward(dx, dy, x, a))
	want := make([]float64, n)
	for i, v := range xv {
		want[i] = dyv[i] * refActGrad(a, v)
	}
	e.Check("dx", dx, want, 0)
}

func (e *env) sumRows(dt kernels.DType, shape ...int) {
	e.Helper()
	x, xv := e.Input("x", dt, shape...)
	n := kernels.Shape(shape).Last()
	out := e.Output(dt, n)
	require.NoError(e, e.b.SumRows(out, x))
	want := make([]float64, n)
	for i, v := range xv {
		want[i%n] += v
	}
	e.Check("out", out, want, 0)
}

func elementwiseErrors(e *env) {
	f32, f16 := kernels.F32, kernels.F16
	a, _ := e.Input("a", f32, 31, 17)
	a16, _ := e.Input("a16", f16, 31, 17)
	row, _ := e.Input("row", f32, 17)
	col, _ := e.Input("col", f32, 31)
	ai := e.Ints("ai", make([]int32, 31*17), 31, 17)
	out := e.Output(f32, 31, 17)
	outT := e.Output(f32, 17, 31)
	out16 := e.Output(f16, 31, 17)
	outi := e.Output(kernels.I32, 31, 17)
	row16 := e.Output(f16, 17)
	rowOut := e.Output(f32, 17)
	colOut := e.Output(f32, 31)

	e.checkErrors("add", []errCase{
		{"nil out", kernels.ErrShape, func() error { return e.b.Add(nil, a, row) }},
		{"nil b", kernels.ErrShape, func() error { return e.b.Add(out, a, nil) }},
		{"b not a suffix", kernels.ErrShape, func() error { return e.b.Add(out, a, col) }},
		{"b longer than a", kernels.ErrShape, func() error { return e.b.Add(rowOut, row, a) }},
		{"out shape", kernels.ErrShape, func() error { return e.b.Add(outT, a, row) }},
		{"b dtype", kernels.ErrDType, func() error { return e.b.Add(out, a, row16) }},
		{"out dtype", kernels.ErrDType, func() error { return e.b.Add(out16, a, row) }},
		{"integer", kernels.ErrDType, func() error { return e.b.Add(outi, ai, ai) }},
	})
	e.checkErrors("scale", []errCase{
		{"nil x", kernels.ErrShape, func() error { return e.b.Scale(out, nil, 2) }},
		{"out shape", kernels.ErrShape, func() error { return e.b.Scale(outT, a, 2) }},
		{"out dtype", kernels.ErrDType, func() error { return e.b.Scale(out16, a, 2) }},
		{"integer", kernels.ErrDType, func() error { return e.b.Scale(outi, ai, 2) }},
	})
	e.checkErrors("fill", []errCase{
		{"nil out", kernels.ErrShape, func() error { return e.b.Fill(nil, 1) }},
	})
	e.checkErrors("cast", []errCase{
		{"nil x", kernels.ErrShape, func() error { return e.b.Cast(out16, nil) }},
		{"nil out", kernels.ErrShape, func() error { return e.b.Cast(nil, a) }},
		{"out shape", kernels.ErrShape, func() error { return e.b.Cast(outT, a16) }},
	})
	e.checkErrors("act", []errCase{
		{"nil x", kernels.ErrShape, func() error { return e.b.Act(out, nil, kernels.ActReLU) }},
		{"out shape", kernels.ErrShape, func() error { return e.b.Act(outT, a, kernels.ActReLU) }},
		{"out dtype", kernels.ErrDType, func() error { return e.b.Act(out16, a, kernels.ActReLU) }},
		{"integer", kernels.ErrDType, func() error { return e.b.Act(outi, ai, kernels.ActReLU) }},
		{"activation", kernels.ErrValue, func() error { return e.b.Act(out, a, 99) }},
	})
	e.checkErrors("actbackward", []errCase{
		{"nil dy", kernels.ErrShape, func() error { return e.b.ActBackward(out, nil, a, kernels.ActGELU) }},
		{"dy shape", kernels.ErrShape, func() error { return e.b.ActBackward(out, outT, a, kernels.ActGELU) }},
		{"dx shape", kernels.ErrShape, func() error { return e.b.ActBackward(outT, a, a, kernels.ActGELU) }},
		{"dy dtype", kernels.ErrDType, func() error { return e.b.ActBackward(out, a16, a, kernels.ActGELU) }},
		{"activation", kernels.ErrValue, func() error { return e.b.ActBackward(out, a, a, 99) }},
	})
	e.checkErrors("sumrows", []errCase{
		{"nil x", kernels.ErrShape, func() error { return e.b.SumRows(rowOut, nil) }},
		{"out shape", kernels.ErrShape, func() error { return e.b.SumRows(colOut, a) }},
		{"out dtype", kernels.ErrDType, func() error { return e.b.SumRows(row16, a) }},
		{"integer", kernels.ErrDType, func() error { return e.b.SumRows(rowOut, ai) }},
	})
}
