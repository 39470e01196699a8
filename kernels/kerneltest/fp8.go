package kerneltest

import (
	"fmt"
	"math"

	"github.com/stretchr/testify/require"
	"github.com/zbench/zbench/kernels"
)

func init() { suites = append(suites, fp8Tests()) }

// fp8 returns the backend's FP8 ops, or skips the test where it has none
// (not written, or a device without FP8).
func (e *env) fp8() kernels.FP8 {
	e.Helper()
	return optionalGroup[kernels.FP8](e)
}

// fp8Values are the values of an FP8 dtype's codes.
func fp8Values(dt kernels.DType) [256]float64 {
	var v [256]float64
	for c := range v {
		if dt == kernels.E4M3 {
			v[c] = float64(kernels.E4M3ToFloat32(uint8(c)))
		} else {
			v[c] = float64(kernels.E5M2ToFloat32(uint8(c)))
		}
	}
	return v
}

// RefFP8Code is the code of v in dt by round to nearest, ties to the even
// code, magnitudes beyond the largest finite value saturating to it and
// NaN giving 0x7f (with v's sign bit): the search over the table of
// values, apart from the backends' encoders.
func RefFP8Code(dt kernels.DType, v float64) uint8 {
	var sign uint8
	if math.Signbit(v) {
		sign = 0x80
	}
	if math.IsNaN(v) {
		return 0x7f | sign
	}
	a := math.Min(math.Abs(v), float64(kernels.FP8Max(dt)))
	values := fp8Values(dt)
	best := 0
	for c := 1; c < 0x80; c++ {
		if math.IsNaN(values[c]) || math.IsInf(values[c], 0) {
			continue
		}
		d, bd := math.Abs(values[c]-a), math.Abs(values[best]-a)
		if d < bd || d == bd && c%2 == 0 && best%2 == 1 {
			best = c
		}
	}
	return uint8(best) | sign
}

// fp8Tests is the FP8 suite: the scaled cast into each format from each
// float dtype (with saturation, and the amax), and the scaled GEMM in
// each allowed pairing of formats into each output dtype.
func fp8Tests() []test {
	var ts []test
	for _, q := range []kernels.DType{kernels.E4M3, kernels.E5M2} {
		for _, dt := range kernels.FloatTypes {
			for _, n := range []int{1, 37, 1000} {
				ts = append(ts, test{name("CastFP8", "to", q, "from", dt, "n", n), func(e *env) { e.castFP8(q, dt, n) }})
			}
		}
	}
	for _, pair := range [][2]kernels.DType{{kernels.E4M3, kernels.E4M3}, {kernels.E4M3, kernels.E5M2}, {kernels.E5M2, kernels.E4M3}} {
		for _, dt := range kernels.FloatTypes {
			for _, c := range []fp8mmCase{{1, 5, 16, false, kernels.ActNone, false}, {7, 33, 48, true, kernels.ActNone, true},
				{64, 96, 256, true, kernels.ActGELU, false}, {13, 40, 64, false, kernels.ActNone, true}} {
				ts = append(ts, test{name("FP8MatMul", "a", pair[0], "b", pair[1], "out", dt, "case", c), func(e *env) { e.fp8matmul(pair[0], pair[1], dt, c) }})
			}
		}
	}
	for _, q := range []kernels.DType{kernels.E4M3, kernels.E5M2} {
		for _, dt := range kernels.FloatTypes {
			ts = append(ts, test{name("CastFP8Rows", "to", q, "from", dt), func(e *env) { e.castFP8Rows(q, dt) }})
		}
	}
	return append(ts, test{"CastFP8/nan", castFP8NaN}, test{"FP8MatMul/errors", fp8matmulErrors})
}

// castFP8Rows casts rows of very different ranges (one of zeros) each
// with its own scale, and checks every code and inverse scale exactly.
func (e *env) castFP8Rows(q, dt kernels.DType) {
	const rows, k = 6, 77
	vals := make([]float64, rows*k)
	for r := range rows {
		for i := range k {
			if r != 2 {
				vals[r*k+i] = e.rng.NormFloat64() * math.Pow(10, float64(r-3))
			}
		}
	}
	x, xv := e.inputFromValues("x", dt, vals, 2, rows/2, k)
	out, inv := e.Output(q, 2, rows/2, k), e.Output(kernels.F32, rows)
	require.NoError(e, e.fp8().CastFP8Rows(out, inv, x))
	want := make([]byte, rows*k)
	wantInv := make([]float64, rows)
	for r := range rows {
		var amax float32
		for _, v := range xv[r*k : (r+1)*k] {
			amax = max(amax, float32(math.Abs(v)))
		}
		s := float32(1)
		if amax > 0 {
			s = kernels.FP8Max(q) / amax
		}
		wantInv[r] = float64(1 / s)
		for i, v := range xv[r*k : (r+1)*k] {
			want[r*k+i] = RefFP8Code(q, float64(float32(v)*s))
		}
	}
	e.CheckBytes("q", out, want)
	e.Check("scaleInv", inv, wantInv, 1e-7)
}

// castFP8 casts n values of dt, scaled so that about a tenth of them
// saturate, and checks every code and the amax exactly.
func (e *env) castFP8(q, dt kernels.DType, n int) {
	x, xv := e.Uniform("x", dt, -3, 3, n)
	var amax float64
	for _, v := range xv {
		amax = math.Max(amax, math.Abs(v))
	}
	s := kernels.FP8Max(q) / 2.7
	scale, _ := e.inputFromValues("scale", kernels.F32, []float64{float64(s)}, 1)
	want := make([]byte, n)
	for i, v := range xv {
		want[i] = RefFP8Code(q, float64(float32(v)*s)) // x·scale rounded to float32, then to the format
	}
	out, am := e.Output(q, n), e.Output(kernels.F32, 1)
	require.NoError(e, e.fp8().CastFP8(out, am, x, scale))
	e.CheckBytes("q", out, want)
	got, err := kernels.ToFloat32(am)
	require.NoError(e, err)
	require.Equal(e, float32(amax), got[0], "amax")
}

// castFP8NaN checks that a NaN stays NaN and makes the amax NaN, and
// that infinities saturate.
func castFP8NaN(e *env) {
	vals := []float64{1, math.NaN(), math.Inf(1), math.Inf(-1), -2}
	x, _ := e.inputFromValues("x", kernels.F32, vals, len(vals))
	scale, _ := e.inputFromValues("scale", kernels.F32, []float64{1}, 1)
	for _, q := range []kernels.DType{kernels.E4M3, kernels.E5M2} {
		out, am := e.Output(q, len(vals)), e.Output(kernels.F32, 1)
		require.NoError(e, e.fp8().CastFP8(out, am, x, scale))
		want := make([]byte, len(vals))
		for i, v := range vals {
			want[i] = RefFP8Code(q, v)
		}
		e.CheckBytes(fmt.Sprint("q ", q), out, want)
		got, err := kernels.ToFloat32(am)
		require.NoError(e, err)
		require.True(e, math.IsNaN(float64(got[0])), "amax of a tensor with a NaN is NaN, got %v", got[0])
	}
}

// fp8mmCase is one FP8MatMul geometry: a [m, k], b [n, k].
type fp8mmCase struct {
	m, n, k int
	bias    bool
	act     kernels.Activation
	// rows scales a per row and b per output channel.
	rows bool
}

func (c fp8mmCase) String() string {
	s := fmt.Sprintf("%dx%dx%d", c.m, c.n, c.k)
	if c.bias {
		s += "/bias"
	}
	if c.act != kernels.ActNone {
		s += "/" + c.act.String()
	}
	if c.rows {
		s += "/per-row"
	}
	return s
}

// fp8Codes returns an [rows, cols] tensor of dt holding the codes of
// N(0, σ) values (finite, of the dynamic range of cast activations), and
// the values.
func (e *env) fp8Codes(name string, dt kernels.DType, sigma float64, rows, cols int) (*kernels.Tensor, []float64) {
	values := fp8Values(dt)
	vals := make([]float64, rows*cols)
	for i := range vals {
		vals[i] = values[RefFP8Code(dt, e.rng.NormFloat64()*sigma)]
	}
	return e.inputFromValues(name, dt, vals, rows, cols)
}

// fp8matmul checks one case against the float64 product of the decoded,
// scaled operands.
func (e *env) fp8matmul(at, bt, dt kernels.DType, c fp8mmCase) {
	a, av := e.fp8Codes("a", at, 20, c.m, c.k)
	b, bv := e.fp8Codes("b", bt, 50, c.n, c.k)
	na, nb := 1, 1
	if c.rows {
		na, nb = c.m, c.n
	}
	sa, sav := e.Uniform("aScaleInv", kernels.F32, 0.01, 0.02, na)
	sb, sbv := e.Uniform("bScaleInv", kernels.F32, 0.001, 0.002, nb)
	scale := func(v []float64, i int) float64 {
		if len(v) == 1 {
			return v[0]
		}
		return v[i]
	}
	p := kernels.FP8MatMulParams{AScaleInv: sa, BScaleInv: sb, Act: c.act}
	var bv2 []float64
	if c.bias {
		p.Bias, bv2 = e.Uniform("bias", kernels.F32, -1, 1, c.n)
	}
	want := make([]float64, c.m*c.n)
	for i := range c.m {
		for j := range c.n {
			var s float64
			for k := range c.k {
				s += av[i*c.k+k] * bv[j*c.k+k]
			}
			s *= scale(sav, i) * scale(sbv, j)
			if c.bias {
				s += bv2[j]
			}
			want[i*c.n+j] = RefAct(c.act, s)
		}
	}
	out := e.Output(dt, c.m, c.n)
	require.NoError(e, e.fp8().FP8MatMul(out, a, b, p))
	e.Check("out", out, want, 0)
}

// fp8matmulErrors checks that bad calls fail naming the op and argument.
func fp8matmulErrors(e *env) {
	q := e.fp8()
	a, _ := e.fp8Codes("a", kernels.E4M3, 1, 2, 16)
	b, _ := e.fp8Codes("b", kernels.E4M3, 1, 3, 16)
	a5, _ := e.fp8Codes("a5", kernels.E5M2, 1, 2, 16)
	b5, _ := e.fp8Codes("b5", kernels.E5M2, 1, 3, 16)
	s, _ := e.inputFromValues("s", kernels.F32, []float64{1}, 1)
	s2, _ := e.inputFromValues("s2", kernels.F32, []float64{1, 1}, 2)
	p := kernels.FP8MatMulParams{AScaleInv: s, BScaleInv: s}
	out := e.Output(kernels.F32, 2, 3)
	e.requireOpErr(q.FP8MatMul(out, a5, b5, p), kernels.ErrDType, "FP8MatMul", "both e5m2")
	x, _ := e.Input("x", kernels.F32, 2, 16)
	e.requireOpErr(q.FP8MatMul(out, x, b, p), kernels.ErrDType, "FP8MatMul", "a")
	e.requireOpErr(q.FP8MatMul(e.Output(kernels.I8, 2, 3), a, b, p), kernels.ErrDType, "FP8MatMul", "out")
	e.requireOpErr(q.FP8MatMul(e.Output(kernels.F32, 2, 4), a, b, p), kernels.ErrShape, "FP8MatMul", "out has shape")
	b17, _ := e.fp8Codes("b17", kernels.E4M3, 1, 3, 17)
	e.requireOpErr(q.FP8MatMul(out, a, b17, p), kernels.ErrShape, "FP8MatMul", "a's K")
	s5, _ := e.inputFromValues("s5", kernels.F32, []float64{1, 1, 1, 1, 1}, 5)
	e.requireOpErr(q.FP8MatMul(out, a, b, kernels.FP8MatMulParams{AScaleInv: s5, BScaleInv: s}), kernels.ErrShape, "FP8MatMul", "AScaleInv has 5 elements")
	e.requireOpErr(q.FP8MatMul(out, a, b, kernels.FP8MatMulParams{AScaleInv: s, BScaleInv: s2}), kernels.ErrShape, "FP8MatMul", "BScaleInv has 2 elements")

	x2, _ := e.Input("x2", kernels.F32, 3, 16)
	e.requireOpErr(q.CastFP8(e.Output(kernels.E4M3, 2, 16), nil, x2, s), kernels.ErrShape, "CastFP8", "q has shape")
	e.requireOpErr(q.CastFP8(e.Output(kernels.I8, 3, 16), nil, x2, s), kernels.ErrDType, "CastFP8", "q")
	e.requireOpErr(q.CastFP8Rows(e.Output(kernels.E4M3, 3, 16), s2, x2), kernels.ErrShape, "CastFP8Rows", "scaleInv")
}
