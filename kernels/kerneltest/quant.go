package kerneltest

import (
	"fmt"
	"math"

	"github.com/stretchr/testify/require"
	"github.com/zbench/zbench/kernels"
)

func init() { suites = append(suites, quantTests()) }

// quant returns the backend's Quant ops; every backend implements them.
func (e *env) quant() kernels.Quant {
	e.Helper()
	return group[kernels.Quant](e)
}

// RefQMatMul is the exact int32 sum of Quant.QMatMul: a [m, k] times the
// transpose of b [n, k], in int64 (an int32 overflow would show as a
// mismatch).
func RefQMatMul(a, b []int8, m, n, k int) []int64 {
	out := make([]int64, m*n)
	for i := range m {
		ar := a[i*k:][:k]
		for j := range n {
			br := b[j*k:][:k]
			var s int64
			for x, v := range ar {
				s += int64(v) * int64(br[x])
			}
			out[i*n+j] = s
		}
	}
	return out
}

// int8s uploads vals (in [−128, 127]) as an I8 input.
func (e *env) int8s(name string, vals []int8, shape ...int) *kernels.Tensor {
	e.Helper()
	f := make([]float64, len(vals))
	for i, v := range vals {
		f[i] = float64(v)
	}
	t, _ := e.inputFromValues(name, kernels.I8, f, shape...)
	return t
}

// randInt8 returns n values uniform in [lo, hi].
func (e *env) randInt8(n, lo, hi int) []int8 {
	out := make([]int8, n)
	for i := range out {
		out[i] = int8(lo + e.rng.IntN(hi-lo+1))
	}
	return out
}

// qmmCase is one QMatMul geometry: a [lead…, k] with the product of lead
// being m, b [n, k].
type qmmCase struct {
	lead []int
	n, k int
}

func (c qmmCase) m() int { return kernels.Shape(c.lead).Len() }

func (c qmmCase) String() string {
	return fmt.Sprintf("a=%vx%d/b=%dx%d", c.lead, c.k, c.n, c.k)
}

// qmmCases cover single rows (decode), edges of every tile size in M and
// N, K not a multiple of any vector width (odd ones included), batch
// dimensions, and BERT's widths.
var qmmCases = []qmmCase{
	{[]int{1}, 1, 4},
	{[]int{3}, 5, 12},
	{[]int{1}, 67, 132},
	{[]int{17}, 33, 68},
	{[]int{2, 3}, 19, 100},
	{[]int{64}, 48, 256},
	{[]int{5}, 130, 772},
	{[]int{3}, 7, 37},
	{[]int{6}, 9, 1},
	{[]int{37}, 64, 1028},
	{[]int{2, 33}, 96, 768},
}

// quantTests is the Quant suite.
func quantTests() []test {
	var ts []test
	for _, c := range qmmCases {
		ts = append(ts, test{name("QMatMul", "out", "int32", "case", c), func(e *env) { e.qmatmulExact(c) }})
	}
	epilogues := []struct {
		name           string
		aRow, bRow     bool
		bias           bool
		act            kernels.Activation
		outs           []kernels.DType
		casesFrom, end int
	}{
		{"per-tensor", false, false, false, kernels.ActNone, []kernels.DType{kernels.F32, kernels.F16, kernels.BF16, kernels.I8}, 0, len(qmmCases)},
		{"per-channel/bias", false, true, true, kernels.ActNone, []kernels.DType{kernels.F32, kernels.F16, kernels.BF16, kernels.I8}, 2, 7},
		{"per-token/per-channel/bias/gelu", true, true, true, kernels.ActGELU, []kernels.DType{kernels.F32, kernels.BF16}, 3, 9},
		{"per-token/relu", true, false, false, kernels.ActReLU, []kernels.DType{kernels.F16, kernels.I8}, 4, 8},
	}
	for _, ep := range epilogues {
		for _, dt := range ep.outs {
			for _, c := range qmmCases[ep.casesFrom:ep.end] {
				ts = append(ts, test{name("QMatMul", "out", dt, "scales", ep.name, "case", c), func(e *env) {
					e.qmatmulEpilogue(c, dt, ep.aRow, ep.bRow, ep.bias, ep.act)
				}})
			}
		}
	}
	for _, dt := range kernels.FloatTypes {
		for _, s := range [][]int{{1, 7}, {3, 64}, {2, 5, 200}, {33, 768}} {
			for _, dyn := range []bool{false, true} {
				mode := "static"
				if dyn {
					mode = "dynamic"
				}
				ts = append(ts, test{name("Quantize", "dtype", dt, "mode", mode, "x", kernels.Shape(s)), func(e *env) { e.quantize(dt, dyn, s) }})
			}
			ts = append(ts, test{name("Dequantize", "dtype", dt, "q", kernels.Shape(s)), func(e *env) { e.dequantize(dt, s) }})
		}
	}
	ts = append(ts, test{"Quantize/dynamic/special-rows", quantizeSpecialRows})
	return append(ts, test{"quant/errors", quantErrors})
}

// qmatmulExact checks the raw int32 sums over the whole int8 range,
// −128 included, with no tolerance.
func (e *env) qmatmulExact(c qmmCase) {
	m := c.m()
	av, bv := e.randInt8(m*c.k, -128, 127), e.randInt8(c.n*c.k, -128, 127)
	a := e.int8s("a", av, append(append([]int{}, c.lead...), c.k)...)
	b := e.int8s("b", bv, c.n, c.k)
	out := e.Output(kernels.I32, append(append([]int{}, c.lead...), c.n)...)
	require.NoError(e, e.quant().QMatMul(out, a, b, kernels.QMatMulParams{}))
	require.NoError(e, e.b.Sync())
	got, err := kernels.ToInt32(out)
	require.NoError(e, err)
	want := RefQMatMul(av, bv, m, c.n, c.k)
	for i, w := range want {
		if int64(got[i]) != w {
			require.Failf(e, "QMatMul sum differs", "out[%d, %d] = %d, want %d", i/c.n, i%c.n, got[i], w)
		}
	}
}

// scales returns an F32 scale tensor of n positive values around 1/127
// and the values.
func (e *env) scales(name string, n int) (*kernels.Tensor, []float64) {
	e.Helper()
	return e.Uniform(name, kernels.F32, 0.3/kernels.QMax, 1.7/kernels.QMax, n)
}

// qmatmulEpilogue checks the rescale, bias, activation and output
// rounding against a float64 reference of the same int32 sums; an int8
// out must be the requantized reference, off by one only where the
// reference sits within 1e-3 of a rounding boundary.
func (e *env) qmatmulEpilogue(c qmmCase, dt kernels.DType, aRow, bRow, bias bool, act kernels.Activation) {
	m := c.m()
	av, bv := e.randInt8(m*c.k, -127, 127), e.randInt8(c.n*c.k, -127, 127)
	a := e.int8s("a", av, append(append([]int{}, c.lead...), c.k)...)
	b := e.int8s("b", bv, c.n, c.k)
	var p kernels.QMatMulParams
	var sa, sb, bs []float64
	p.AScale, sa = e.scales("AScale", map[bool]int{false: 1, true: m}[aRow])
	p.BScale, sb = e.scales("BScale", map[bool]int{false: 1, true: c.n}[bRow])
	if bias {
		p.Bias, bs = e.Uniform("Bias", kernels.F32, -2, 2, c.n)
	}
	p.Act = act
	sums := RefQMatMul(av, bv, m, c.n, c.k)
	want := make([]float64, len(sums))
	for i, s := range sums {
		r, j := i/c.n, i%c.n
		y := float64(s) * sa[r%len(sa)] * sb[j%len(sb)]
		if bias {
			y += bs[j]
		}
		want[i] = RefAct(act, y)
	}
	out := e.Output(dt, append(append([]int{}, c.lead...), c.n)...)
	if dt != kernels.I8 {
		require.NoError(e, e.quant().QMatMul(out, a, b, p))
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
	require.NoError(e, e.quant().QMatMul(out, a, b, p))
	got := e.download(out)
	for i, w := range want {
		e.requireQuantized(fmt.Sprintf("out[%d]", i), got[i], w/outs)
	}
}

// requireQuantized requires got to be v rounded half to even and clamped
// to ±QMax, or a neighbour of it when v is within 1e-3 of a rounding
// boundary (float32 and float64 arithmetic may round either way there).
func (e *env) requireQuantized(what string, got float32, v float64) {
	e.Helper()
	want := math.Max(-kernels.QMax, math.Min(kernels.QMax, math.RoundToEven(v)))
	if float64(got) == want {
		return
	}
	near := math.Abs(math.Abs(v-math.Trunc(v))-0.5) < 1e-3 && math.Abs(float64(got)-want) == 1
	require.Truef(e, near, "%s = %v, want %v (the value before rounding is %.6f)", what, got, want, v)
}

// quantize checks Quantize against the scheme computed in float64 on the
// stored inputs, and a dynamic scale against amax/127.
func (e *env) quantize(dt kernels.DType, dynamic bool, shape []int) {
	x, xv := e.Uniform("x", dt, -3, 3, shape...)
	rows, k := kernels.Shape(shape).Rows(), shape[len(shape)-1]
	q := e.Output(kernels.I8, shape...)
	var scale *kernels.Tensor
	sv := make([]float64, rows)
	if dynamic {
		scale = e.Output(kernels.F32, rows)
		for r := range rows {
			for _, v := range xv[r*k : (r+1)*k] {
				sv[r] = math.Max(sv[r], math.Abs(v))
			}
			sv[r] /= kernels.QMax
		}
	} else {
		// A scale that clamps the largest values, as a percentile does.
		var s []float64
		scale, s = e.inputFromValues("scale", kernels.F32, []float64{2.5 / kernels.QMax}, 1)
		for r := range sv {
			sv[r] = s[0]
		}
	}
	require.NoError(e, e.quant().Quantize(q, scale, x, dynamic))
	if dynamic {
		e.Check("scale", scale, sv, 1e-6)
		got := e.download(scale)
		for r := range sv {
			sv[r] = float64(got[r])
		}
	}
	got := e.download(q)
	for i, v := range xv {
		e.requireQuantized(fmt.Sprintf("q[%d]", i), got[i], v/sv[i/k])
	}
}

// dequantize checks Dequantize with per-tensor and per-row scales.
func (e *env) dequantize(dt kernels.DType, shape []int) {
	rows, k := kernels.Shape(shape).Rows(), shape[len(shape)-1]
	qv := e.randInt8(rows*k, -127, 127)
	q := e.int8s("q", qv, shape...)
	for _, n := range []int{1, rows} {
		scale, sv := e.scales(fmt.Sprintf("scale%d", n), n)
		out := e.Output(dt, shape...)
		require.NoError(e, e.quant().Dequantize(out, q, scale))
		want := make([]float64, len(qv))
		for i, v := range qv {
			want[i] = float64(v) * sv[(i/k)%n]
		}
		e.Check("out", out, want, 0)
	}
}

// quantizeSpecialRows checks the dynamic scale of a row of zeros (1, all
// values 0) and of a row holding a NaN (NaN, all values 0).
func quantizeSpecialRows(e *env) {
	vals := []float64{0, 0, 0, 0, 1, math.NaN(), -2, 3, -1.27, 0.5, 0.01, 1.27}
	x, _ := e.inputFromValues("x", kernels.F32, vals, 3, 4)
	q := e.Output(kernels.I8, 3, 4)
	scale := e.Output(kernels.F32, 3)
	require.NoError(e, e.quant().Quantize(q, scale, x, true))
	s := e.download(scale)
	require.Equal(e, float32(1), s[0], "scale of a row of zeros")
	require.True(e, math.IsNaN(float64(s[1])), "scale of a row with a NaN: %v", s[1])
	require.InDelta(e, 1.27/127, s[2], 1e-9, "scale of the third row")
	require.Equal(e, []float32{0, 0, 0, 0, 0, 0, 0, 0, -127, 50, 1, 127}, e.download(q))
}

// quantErrors checks that bad calls fail with errors naming the op and
// the argument.
func quantErrors(e *env) {
	qo := e.quant()
	f32, i8 := kernels.F32, kernels.I8
	x, _ := e.Input("x", f32, 4, 8)
	q := e.Output(i8, 4, 8)
	s1 := e.Output(f32, 1)
	s4 := e.Output(f32, 4)
	e.requireOpErr(qo.Quantize(e.Output(f32, 4, 8), s1, x, false), kernels.ErrDType, "Quantize", "q")
	e.requireOpErr(qo.Quantize(e.Output(i8, 4, 9), s1, x, false), kernels.ErrShape, "Quantize", "q has shape")
	e.requireOpErr(qo.Quantize(q, e.Output(f32, 3), x, false), kernels.ErrShape, "Quantize", "scale")
	e.requireOpErr(qo.Quantize(q, s1, x, true), kernels.ErrShape, "Quantize", "scale")
	e.requireOpErr(qo.Quantize(q, e.Output(kernels.F16, 4), x, true), kernels.ErrDType, "Quantize", "scale")
	e.requireOpErr(qo.Dequantize(e.Output(i8, 4, 8), q, s1), kernels.ErrDType, "Dequantize", "out")
	e.requireOpErr(qo.Dequantize(e.Output(f32, 8, 4), q, s4), kernels.ErrShape, "Dequantize", "out")

	a := e.int8s("a", e.randInt8(4*8, -127, 127), 4, 8)
	b := e.int8s("b", e.randInt8(6*8, -127, 127), 6, 8)
	b6 := e.int8s("b6", e.randInt8(6*6, -127, 127), 6, 6)
	out := e.Output(f32, 4, 6)
	sb := e.Output(f32, 6)
	ok := kernels.QMatMulParams{AScale: s1, BScale: sb}
	e.requireOpErr(qo.QMatMul(out, x, b, ok), kernels.ErrDType, "QMatMul", "a")
	e.requireOpErr(qo.QMatMul(out, a, b6, ok), kernels.ErrShape, "QMatMul", "b has shape")
	e.requireOpErr(qo.QMatMul(e.Output(f32, 4, 5), a, b, ok), kernels.ErrShape, "QMatMul", "out has shape")
	long := kernels.QMatMulMaxK + 1
	e.requireOpErr(qo.QMatMul(e.Output(kernels.I32, 1, 1), e.int8s("along", make([]int8, long), 1, long), e.int8s("blong", make([]int8, long), 1, long),
		kernels.QMatMulParams{}), kernels.ErrShape, "QMatMul", "overflow")
	e.requireOpErr(qo.QMatMul(out, a, b, kernels.QMatMulParams{AScale: s1}), kernels.ErrValue, "QMatMul", "BScale")
	e.requireOpErr(qo.QMatMul(out, a, b, kernels.QMatMulParams{AScale: s1, BScale: e.Output(f32, 5)}), kernels.ErrShape, "QMatMul", "BScale")
	e.requireOpErr(qo.QMatMul(out, a, b, kernels.QMatMulParams{AScale: s1, BScale: sb, OutScale: s1}), kernels.ErrValue, "QMatMul", "OutScale")
	e.requireOpErr(qo.QMatMul(e.Output(i8, 4, 6), a, b, ok), kernels.ErrValue, "QMatMul", "OutScale")
	e.requireOpErr(qo.QMatMul(e.Output(kernels.I32, 4, 6), a, b, ok), kernels.ErrValue, "QMatMul", "int32")
	e.requireOpErr(qo.QMatMul(out, a, b, kernels.QMatMulParams{AScale: s1, BScale: sb, Bias: e.Output(kernels.F16, 6)}), kernels.ErrDType, "QMatMul", "Bias")
	e.requireOpErr(qo.QMatMul(out, a, b, kernels.QMatMulParams{AScale: s1, BScale: sb, Act: 99}), kernels.ErrValue, "QMatMul", "activation")
}
