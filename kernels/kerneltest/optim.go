package kerneltest

import (
	"fmt"
	"math"
	"slices"

	"github.com/stretchr/testify/require"
	"github.com/zbench/zbench/kernels"
)

func init() { suites = append(suites, optimTests()) }

// adamwCase is one AdamW update of a parameter of the given shape; the
// moments start at zero when fresh (the first step), else random.
type adamwCase struct {
	shape []int
	p     kernels.AdamWParams
	fresh bool
}

func (c adamwCase) String() string {
	return fmt.Sprintf("%v/lr=%g/betas=%g,%g/eps=%g/wd=%g/step=%d/fresh=%v",
		kernels.Shape(c.shape), c.p.LR, c.p.Beta1, c.p.Beta2, c.p.Eps, c.p.WeightDecay, c.p.Step, c.fresh)
}

// adamwDefaults are torch.optim.AdamW's defaults (lr 1e-3, betas 0.9,
// 0.999, eps 1e-8, weight decay 1e-2) at the first step.
var adamwDefaults = kernels.AdamWParams{LR: 1e-3, Beta1: 0.9, Beta2: 0.999, Eps: 1e-8, WeightDecay: 1e-2, Step: 1}

func adamwCases() []adamwCase {
	with := func(f func(p *kernels.AdamWParams)) kernels.AdamWParams {
		p := adamwDefaults
		f(&p)
		return p
	}
	return []adamwCase{
		{shape: []int{1}, p: adamwDefaults, fresh: true},
		{shape: []int{31, 17}, p: adamwDefaults, fresh: true},
		{shape: []int{31, 17}, p: with(func(p *kernels.AdamWParams) { p.Step = 2 })},
		{shape: []int{4097}, p: with(func(p *kernels.AdamWParams) { p.LR, p.WeightDecay, p.Step = 0.1, 0.1, 7 })},
		{shape: []int{3, 5, 7}, p: with(func(p *kernels.AdamWParams) { p.LR, p.WeightDecay, p.Step = 0.05, 0, 1000 })},
		{shape: []int{3, 5, 7}, p: with(func(p *kernels.AdamWParams) { p.Beta1, p.Beta2, p.Eps, p.Step = 0, 0, 1e-3, 3 })},
		{shape: []int{2, 40009}, p: with(func(p *kernels.AdamWParams) { p.LR, p.Step = 0.02, 12 })},
		{shape: []int{64}, p: with(func(p *kernels.AdamWParams) { p.LR, p.Step = 0, 5 })}, // moments move, param stays
	}
}

func optimTests() []test {
	var ts []test
	for _, c := range adamwCases() {
		ts = append(ts, test{name("AdamW", "case", c), func(e *env) { e.adamw(c) }})
	}
	for _, dt := range []kernels.DType{kernels.F32, kernels.BF16, kernels.F16} {
		ts = append(ts, test{name("AdamWAll", "grad", dt), func(e *env) { e.adamwAll(dt) }})
	}
	return append(ts, test{"AdamW/errors", adamwErrors}, test{"AdamWAll/errors", adamwAllErrors})
}

// adamwAll checks one AdamWAll update of three parameters (one element,
// a matrix, and more elements than a GPU block's chunk) with gradients in
// dt and, for 16-bit dt, copies in dt: against the float64 reference, and
// bit for bit against AdamW on each parameter, the gradient widened first.
func (e *env) adamwAll(dt kernels.DType) {
	e.Helper()
	f32 := kernels.F32
	p := adamwDefaults
	p.LR, p.Step = 0.01, 3
	shapes := [][]int{{1}, {31, 17}, {2, 40009}}
	ps := make([]kernels.AdamWParam, len(shapes))
	type want struct{ param, m, v []float64 }
	wants := make([]want, len(shapes))
	twins := make([]kernels.AdamWParam, len(shapes)) // the same state for AdamW
	for i, shape := range shapes {
		param, pv := e.initialOutput(fmt.Sprint("param", i), f32, shape...)
		grad, gv := e.Input(fmt.Sprint("grad", i), dt, shape...)
		m, mv := e.initialOutput(fmt.Sprint("m", i), f32, shape...)
		sq := make([]float64, len(pv))
		for j := range sq {
			u := e.rng.Float64()
			sq[j] = 0.5 * u * u
		}
		v, vv := e.initialOutputFrom(fmt.Sprint("v", i), f32, sq, shape...)
		ps[i] = kernels.AdamWParam{Param: param, Grad: grad, M: m, V: v, NoDecay: i == 0}
		if dt != f32 {
			ps[i].Copy = e.Output(dt, shape...)
		}
		tp, _ := e.initialOutputFrom(fmt.Sprint("twin param", i), f32, pv, shape...)
		tg, _ := e.inputFromValues(fmt.Sprint("twin grad", i), f32, gv, shape...)
		tm, _ := e.initialOutputFrom(fmt.Sprint("twin m", i), f32, mv, shape...)
		tv, _ := e.initialOutputFrom(fmt.Sprint("twin v", i), f32, vv, shape...)
		twins[i] = kernels.AdamWParam{Param: tp, Grad: tg, M: tm, V: tv}
		hp := p
		if ps[i].NoDecay {
			hp.WeightDecay = 0
		}
		w := want{slices.Clone(pv), slices.Clone(mv), slices.Clone(vv)}
		refAdamW(w.param, gv, w.m, w.v, hp)
		wants[i] = w
	}
	require.NoError(e, e.b.AdamWAll(ps, p))
	for i, x := range ps {
		e.Check("param", x.Param, wants[i].param, 0)
		e.Check("m", x.M, wants[i].m, 0)
		e.Check("v", x.V, wants[i].v, 0)
		if x.Copy != nil {
			e.Check("copy", x.Copy, wants[i].param, 0)
		}
		hp := p
		if x.NoDecay {
			hp.WeightDecay = 0
		}
		t := twins[i]
		require.NoError(e, e.b.AdamW(t.Param, t.Grad, t.M, t.V, hp))
		for _, pair := range [][2]*kernels.Tensor{{x.Param, t.Param}, {x.M, t.M}, {x.V, t.V}} {
			got, err := kernels.ToFloat32(pair[0])
			require.NoError(e, err)
			alone, err := kernels.ToFloat32(pair[1])
			require.NoError(e, err)
			require.Equal(e, alone, got, "parameter %d: AdamWAll and AdamW differ", i)
		}
		if x.Copy != nil {
			got, err := kernels.ToFloat32(x.Copy)
			require.NoError(e, err)
			alone, err := kernels.ToFloat32(t.Param)
			require.NoError(e, err)
			rounded, err := kernels.FromFloat32(e.b, dt, alone, x.Copy.Shape()...)
			require.NoError(e, err)
			want, err := kernels.ToFloat32(rounded)
			require.NoError(e, err)
			require.NoError(e, e.b.Free(rounded))
			require.Equal(e, want, got, "parameter %d: the copy is not the update rounded to %v", i, dt)
		}
	}
}

func adamwAllErrors(e *env) {
	f32 := kernels.F32
	param, _ := e.Input("param", f32, 5, 3)
	grad, _ := e.Input("grad", kernels.BF16, 5, 3)
	m, _ := e.Input("m", f32, 5, 3)
	v, _ := e.Uniform("v", f32, 0, 1, 5, 3)
	other, _ := e.Input("other", f32, 5, 3)
	grad15, _ := e.Input("grad15", f32, 15)
	copy32, _ := e.Input("copy32", f32, 5, 3)
	ok := kernels.AdamWParam{Param: param, Grad: grad, M: m, V: v}
	with := func(f func(x *kernels.AdamWParam)) []kernels.AdamWParam {
		x := ok
		f(&x)
		return []kernels.AdamWParam{x}
	}
	call := func(ps []kernels.AdamWParam, f func(p *kernels.AdamWParams)) func() error {
		p := adamwDefaults
		if f != nil {
			f(&p)
		}
		return func() error { return e.b.AdamWAll(ps, p) }
	}
	e.checkErrors("adamwall", []errCase{
		{"nil m", kernels.ErrShape, call(with(func(x *kernels.AdamWParam) { x.M = nil }), nil)},
		{"grad shape", kernels.ErrShape, call(with(func(x *kernels.AdamWParam) { x.Grad = grad15 }), nil)},
		{"f32 copy", kernels.ErrDType, call(with(func(x *kernels.AdamWParam) { x.Copy = copy32 }), nil)},
		{"m as v", kernels.ErrValue, call(with(func(x *kernels.AdamWParam) { x.V = m }), nil)},
		{"a param twice", kernels.ErrValue, call([]kernels.AdamWParam{ok, {Param: param, Grad: grad, M: other, V: copy32}}, nil)},
		{"step 0", kernels.ErrValue, call([]kernels.AdamWParam{ok}, func(p *kernels.AdamWParams) { p.Step = 0 })},
	})
	e.requireOpErr(call(with(func(x *kernels.AdamWParam) { x.Grad = grad15 }), nil)(), kernels.ErrShape, "AdamWAll", "parameter 0's grad")
	require.NoError(e, e.b.AdamWAll(nil, adamwDefaults), "no parameters: nothing to do")
}

// refAdamW applies PyTorch's single-tensor AdamW to param, m and v in
// float64.
func refAdamW(param, grad, m, v []float64, p kernels.AdamWParams) {
	lr, b1, b2 := float64(p.LR), float64(p.Beta1), float64(p.Beta2)
	bc1 := 1 - math.Pow(b1, float64(p.Step))
	bc2 := 1 - math.Pow(b2, float64(p.Step))
	for i, g := range grad {
		param[i] *= 1 - lr*float64(p.WeightDecay)
		m[i] = b1*m[i] + (1-b1)*g
		v[i] = b2*v[i] + (1-b2)*g*g
		param[i] -= lr / bc1 * m[i] / (math.Sqrt(v[i])/math.Sqrt(bc2) + float64(p.Eps))
	}
}

// adamw checks param, m and v after one update, and the update of param on
// its own (param − its old value), which a tolerance relative to param
// alone would let through for small learning rates.
func (e *env) adamw(c adamwCase) {
	e.Helper()
	f32 := kernels.F32
	param, pv := e.initialOutput("param", f32, c.shape...)
	grad, gv := e.Input("grad", f32, c.shape...)
	n := kernels.Shape(c.shape).Len()
	var m, v *kernels.Tensor
	var mv, vv []float64
	if c.fresh {
		m, mv = e.initialOutputFrom("m", f32, make([]float64, n), c.shape...)
		v, vv = e.initialOutputFrom("v", f32, make([]float64, n), c.shape...)
	} else {
		m, mv = e.initialOutput("m", f32, c.shape...)
		sq := make([]float64, n)
		for i := range sq { // a second moment: positive, about g²
			u := e.rng.Float64()
			sq[i] = 0.5 * u * u
		}
		v, vv = e.initialOutputFrom("v", f32, sq, c.shape...)
	}
	old := append([]float64(nil), pv...)
	require.NoError(e, e.b.AdamW(param, grad, m, v, c.p))

	refAdamW(pv, gv, mv, vv, c.p)
	e.Check("param", param, pv, 0)
	e.Check("m", m, mv, 0)
	e.Check("v", v, vv, 0)

	got, err := kernels.ToFloat32(param)
	require.NoError(e, err)
	gotStep, wantStep := make([]float64, len(got)), make([]float64, len(got))
	for i, x := range got {
		gotStep[i], wantStep[i] = float64(x)-old[i], pv[i]-old[i]
	}
	// The difference of two float32 values near 1 is off by up to an ulp
	// of 1 (6e-8); the smallest updates here are about 1e-3.
	rel, maxAbs := kernels.RelErr(gotStep, wantStep)
	require.LessOrEqualf(e, rel, 2e-4, "param update: rel-err %.3g (max-abs %.3g)", rel, maxAbs)
}

// initialOutputFrom is initialOutput with the given values (rounded to dt).
func (e *env) initialOutputFrom(name string, dt kernels.DType, vals []float64, shape ...int) (*kernels.Tensor, []float64) {
	e.Helper()
	t, rounded := e.inputFromValues(name, dt, vals, shape...)
	e.inputs = e.inputs[:len(e.inputs)-1] // updated in place: drop the unchanged check
	return t, rounded
}

func adamwErrors(e *env) {
	f32 := kernels.F32
	// Tracked as inputs: a call that fails must not have touched them.
	param, _ := e.Input("param", f32, 5, 3)
	grad, _ := e.Input("grad", f32, 5, 3)
	m, _ := e.Input("m", f32, 5, 3)
	v, _ := e.Uniform("v", f32, 0, 1, 5, 3)
	grad15, _ := e.Input("grad15", f32, 15)
	m16, _ := e.Input("m16", kernels.F16, 5, 3)
	bf, _ := e.Input("bf", kernels.BF16, 5, 3)
	call := func(param, grad, m, v *kernels.Tensor, f func(p *kernels.AdamWParams)) func() error {
		p := adamwDefaults
		if f != nil {
			f(&p)
		}
		return func() error { return e.b.AdamW(param, grad, m, v, p) }
	}
	bad := func(f func(p *kernels.AdamWParams)) func() error { return call(param, grad, m, v, f) }
	e.checkErrors("adamw", []errCase{
		{"nil param", kernels.ErrShape, call(nil, grad, m, v, nil)},
		{"nil v", kernels.ErrShape, call(param, grad, m, nil, nil)},
		{"grad shape", kernels.ErrShape, call(param, grad15, m, v, nil)},
		{"m dtype", kernels.ErrDType, call(param, grad, m16, v, nil)},
		{"bf16 everywhere", kernels.ErrDType, call(bf, bf, bf, bf, nil)},
		{"step 0", kernels.ErrValue, bad(func(p *kernels.AdamWParams) { p.Step = 0 })},
		{"negative lr", kernels.ErrValue, bad(func(p *kernels.AdamWParams) { p.LR = -1e-3 })},
		{"infinite lr", kernels.ErrValue, bad(func(p *kernels.AdamWParams) { p.LR = float32(math.Inf(1)) })},
		{"beta1 1", kernels.ErrValue, bad(func(p *kernels.AdamWParams) { p.Beta1 = 1 })},
		{"beta2 negative", kernels.ErrValue, bad(func(p *kernels.AdamWParams) { p.Beta2 = -0.1 })},
		{"beta2 NaN", kernels.ErrValue, bad(func(p *kernels.AdamWParams) { p.Beta2 = float32(math.NaN()) })},
		{"eps 0", kernels.ErrValue, bad(func(p *kernels.AdamWParams) { p.Eps = 0 })},
		{"weight decay negative", kernels.ErrValue, bad(func(p *kernels.AdamWParams) { p.WeightDecay = -0.01 })},
	})
	e.requireOpErr(bad(func(p *kernels.AdamWParams) { p.Beta1 = 1.5 })(), kernels.ErrValue, "AdamW", "Beta1", "1.5")
	e.requireOpErr(bad(func(p *kernels.AdamWParams) { p.Step = -3 })(), kernels.ErrValue, "AdamW", "Step", "-3")
	e.requireOpErr(call(param, grad, m, m16, nil)(), kernels.ErrDType, "AdamW", "v", "f16")
}
