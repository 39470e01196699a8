package kerneltest

import (
	"math"

	"github.com/stretchr/testify/require"
	"github.com/zbench/zbench/kernels"
)

func init() { suites = append(suites, decoderBackwardTests()) }

// decoderBackward returns the backend's DecoderBackward ops, or skips the
// test when the backend has not adopted the group.
func (e *env) decoderBackward() kernels.DecoderBackward {
	e.Helper()
	return optionalGroup[kernels.DecoderBackward](e)
}

// RefRMSNormBackward is DecoderBackward.RMSNormBackward in float64 for x
// and dy [rows, d] and gamma [d]: dx [rows, d] and dgamma [d].
func RefRMSNormBackward(dy, x, gamma []float64, d int, eps float64) (dx, dgamma []float64) {
	dx, dgamma = make([]float64, len(x)), make([]float64, d)
	for r := range len(x) / d {
		xr, dyr := x[r*d:(r+1)*d], dy[r*d:(r+1)*d]
		var ss, dot float64
		for j, v := range xr {
			ss += v * v
			dot += dyr[j] * gamma[j] * v
		}
		inv := 1 / math.Sqrt(ss/float64(d)+eps)
		c := dot * inv * inv * inv / float64(d)
		for j, v := range xr {
			dx[r*d+j] = inv*gamma[j]*dyr[j] - v*c
			dgamma[j] += dyr[j] * v * inv
		}
	}
	return dx, dgamma
}

// RefSwiGLUBackward is DecoderBackward.SwiGLUBackward in float64:
// dgate = dy·up·silu'(gate), dup = dy·silu(gate).
func RefSwiGLUBackward(dy, gate, up []float64) (dgate, dup []float64) {
	dgate, dup = make([]float64, len(dy)), make([]float64, len(dy))
	for i, g := range gate {
		s := 1 / (1 + math.Exp(-g))
		dgate[i] = dy[i] * up[i] * s * (1 + g*(1-s))
		dup[i] = dy[i] * g * s
	}
	return dgate, dup
}

// refSwiGLU is Decoder.SwiGLU in float64.
func refSwiGLU(gate, up []float64) []float64 {
	out := make([]float64, len(gate))
	for i, g := range gate {
		out[i] = g / (1 + math.Exp(-g)) * up[i]
	}
	return out
}

// refDropoutUniform is element i's uniform number under seed, written here
// from the specification of kernels.DropoutUniform (splitmix64's
// finaliser of seed + (i+1)·γ, the top 24 bits over 2²⁴) rather than
// calling it, so that the two are checked against each other.
func refDropoutUniform(seed uint64, i int) float64 {
	const (
		gamma = 0x9E3779B97F4A7C15
		m1    = 0xBF58476D1CE4E5B9
		m2    = 0x94D049BB133111EB
	)
	z := seed + gamma*uint64(i+1)
	z ^= z >> 30
	z *= m1
	z ^= z >> 27
	z *= m2
	z ^= z >> 31
	return math.Ldexp(float64(z>>40), -24)
}

// RefDropout is DecoderBackward.Dropout of x (values of dtype dt): element
// i is kept when its uniform number is at least p and then becomes the
// float32 product x·float32(1/(1−p)) rounded to dt; the others are 0. It
// is exact, not a float64 approximation.
func RefDropout(x []float64, dt kernels.DType, p float32, seed uint64) []float32 {
	s := float32(1 / (1 - float64(p)))
	out := make([]float32, len(x))
	for i, v := range x {
		if refDropoutUniform(seed, i) >= float64(p) {
			out[i] = kernels.Round(dt, float32(v)*s)
		}
	}
	return out
}

// rmsNormBackwardShapes are the shapes of x in the RMSNormBackward tests:
// [rows…, D] with D not a multiple of 8, one row, and many rows. D = 1 is
// left out: there dx = r·gamma·dy·eps/(x²+eps) is all cancellation, which
// float32 cannot resolve to the reference's relative accuracy.
var rmsNormBackwardShapes = [][]int{{1, 2}, {1, 37}, {64}, {31, 31}, {3, 4097}, {2, 3, 33}, {513, 72}}

// swigluBackwardShapes are the shapes of the SwiGLUBackward tests.
var swigluBackwardShapes = [][]int{{1}, {7}, {3, 4097}, {2, 5, 33}}

func decoderBackwardTests() []test {
	var ts []test
	for _, dt := range kernels.FloatTypes {
		for _, shape := range rmsNormBackwardShapes {
			d := shape[len(shape)-1]
			for _, withDgamma := range []bool{true, false} {
				dg := "set"
				if !withDgamma {
					dg = "nil"
				}
				ts = append(ts, test{name("RMSNormBackward", "dtype", dt, "shape", kernels.Shape(shape), "dgamma", dg), func(e *env) {
					x, xv := e.Uniform("x", dt, -2, 3, shape...)
					gamma, gv := e.Input("gamma", dt, d)
					dy, dyv := e.Input("dy", dt, shape...)
					dx := e.Output(dt, shape...)
					var dgamma *kernels.Tensor
					if withDgamma {
						dgamma = e.Output(dt, d)
					}
					ops := e.decoderBackward()
					require.NoError(e, ops.RMSNormBackward(dx, dgamma, dy, x, gamma, normEps))
					wdx, wdg := RefRMSNormBackward(dyv, xv, gv, d, normEps)
					e.Check("dx", dx, wdx, 0)
					if withDgamma {
						e.Check("dgamma", dgamma, wdg, 0)
						// Again: overwritten, not accumulated, and the same
						// bits (the sum over rows is deterministic).
						first := e.download(dgamma)
						require.NoError(e, ops.RMSNormBackward(dx, dgamma, dy, x, gamma, normEps))
						e.Check("dgamma (second call)", dgamma, wdg, 0)
						require.Equal(e, first, e.download(dgamma), "dgamma differs between two identical calls")
					}
				}})
			}
		}
		ts = append(ts, test{name("RMSNormBackward", "dtype", dt, "dx", "dy"), func(e *env) {
			const rows, d = 5, 67
			x, xv := e.Uniform("x", dt, -2, 3, rows, d)
			gamma, gv := e.Input("gamma", dt, d)
			dy, dyv := e.mutable(dt, rows, d)
			dgamma := e.Output(dt, d)
			require.NoError(e, e.decoderBackward().RMSNormBackward(dy, dgamma, dy, x, gamma, normEps))
			wdx, wdg := RefRMSNormBackward(dyv, xv, gv, d, normEps)
			e.Check("dx (in dy)", dy, wdx, 0)
			e.Check("dgamma", dgamma, wdg, 0)
		}})

		for _, shape := range swigluBackwardShapes {
			ts = append(ts, test{name("SwiGLUBackward", "dtype", dt, "shape", kernels.Shape(shape)), func(e *env) {
				gate, gv := e.Uniform("gate", dt, -6, 6, shape...)
				up, uv := e.Input("up", dt, shape...)
				dy, dyv := e.Input("dy", dt, shape...)
				dgate, dup := e.Output(dt, shape...), e.Output(dt, shape...)
				require.NoError(e, e.decoderBackward().SwiGLUBackward(dgate, dup, dy, gate, up))
				wg, wu := RefSwiGLUBackward(dyv, gv, uv)
				e.Check("dgate", dgate, wg, 0)
				e.Check("dup", dup, wu, 0)
			}})
		}
		// The in-place calls the doc allows: an output over each input it
		// may replace (65 elements: a vector body and a scalar tail).
		for _, c := range []struct {
			name       string
			dgate, dup string // "gate", "up", "dy" or "" for a separate output
		}{
			{"dgate=gate,dup=up", "gate", "up"},
			{"dgate=up,dup=gate", "up", "gate"},
			{"dgate=dy", "dy", ""},
			{"dup=dy", "", "dy"},
		} {
			ts = append(ts, test{name("SwiGLUBackward", "dtype", dt, "inplace", c.name), func(e *env) {
				const n = 65
				ins := map[string]*kernels.Tensor{}
				vals := map[string][]float64{}
				for _, in := range []string{"gate", "up", "dy"} {
					var t *kernels.Tensor
					var v []float64
					if in == c.dgate || in == c.dup {
						t, v = e.mutable(dt, 3, n)
					} else {
						t, v = e.Uniform(in, dt, -4, 4, 3, n)
					}
					ins[in], vals[in] = t, v
				}
				out := func(to string) *kernels.Tensor {
					if to == "" {
						return e.Output(dt, 3, n)
					}
					return ins[to]
				}
				dgate, dup := out(c.dgate), out(c.dup)
				require.NoError(e, e.decoderBackward().SwiGLUBackward(dgate, dup, ins["dy"], ins["gate"], ins["up"]))
				wg, wu := RefSwiGLUBackward(vals["dy"], vals["gate"], vals["up"])
				e.Check("dgate", dgate, wg, 0)
				e.Check("dup", dup, wu, 0)
			}})
		}

		for _, shape := range [][]int{{1}, {3, 4097}, {2, 5, 33}} {
			for _, p := range []float32{0, 0.1, 0.5, 0.9} {
				ts = append(ts, test{name("Dropout", "dtype", dt, "shape", kernels.Shape(shape), "p", p), func(e *env) {
					x, xv := e.Input("x", dt, shape...)
					out := e.Output(dt, shape...)
					seed := uint64(0x5eed_0000) + uint64(len(shape))
					require.NoError(e, e.decoderBackward().Dropout(out, x, p, seed))
					require.Equal(e, RefDropout(xv, dt, p, seed), e.download(out),
						"Dropout is exact: the mask of the spec, x·s in float32 rounded once")
				}})
			}
		}
		ts = append(ts, test{name("Dropout", "dtype", dt, "out", "x"), func(e *env) {
			x, xv := e.mutable(dt, 7, 129)
			const p, seed = 0.25, 1<<63 + 12345
			require.NoError(e, e.decoderBackward().Dropout(x, x, p, seed))
			require.Equal(e, RefDropout(xv, dt, p, seed), e.download(x))
		}})
	}
	for _, p := range []float32{0.1, 0.5} {
		ts = append(ts, test{name("Dropout", "statistics", "p", p), func(e *env) { dropoutStatistics(e, p) }})
	}
	return append(ts,
		test{"Dropout/seeds", dropoutSeeds},
		test{"Dropout/mask", dropoutMask},
		test{"DecoderBackward/reference/finite-differences", decoderBackwardFiniteDifferences},
		test{"DecoderBackward/errors", decoderBackwardErrors},
	)
}

// download returns t's values as float32 after a Sync.
func (e *env) download(t *kernels.Tensor) []float32 {
	e.Helper()
	require.NoError(e, e.b.Sync())
	v, err := kernels.ToFloat32(t)
	require.NoError(e, err)
	return v
}

// dropoutStatistics checks over n ≥ 10⁵ elements that the keep rate is
// within 5σ of 1−p, kept elements are exactly x·s and dropped ones exactly 0.
func dropoutStatistics(e *env, p float32) {
	const rows, cols = 64, 2048 // 131072
	n := rows * cols
	x, xv := e.Uniform("x", kernels.F32, 0.5, 1.5, rows, cols)
	out := e.Output(kernels.F32, rows, cols)
	require.NoError(e, e.decoderBackward().Dropout(out, x, p, 42))
	got := e.download(out)
	s := float32(1 / (1 - float64(p)))
	kept := 0
	for i, v := range got {
		switch v {
		case 0:
		case float32(xv[i]) * s:
			kept++
		default:
			require.Failf(e, "dropout value", "out[%d] = %v, want 0 or x·s = %v", i, v, float32(xv[i])*s)
		}
	}
	mean := float64(n) * (1 - float64(p))
	sigma := math.Sqrt(float64(n) * float64(p) * (1 - float64(p)))
	require.InDeltaf(e, mean, float64(kept), 5*sigma, "kept %d of %d at p = %v", kept, n, p)
}

// dropoutSeeds checks that a seed gives the same output every time and
// that another seed gives another mask.
func dropoutSeeds(e *env) {
	const n = 10000
	x, _ := e.Uniform("x", kernels.F32, 0.5, 1.5, n)
	ops := e.decoderBackward()
	run := func(seed uint64) []float32 {
		out := e.Output(kernels.F32, n)
		require.NoError(e, ops.Dropout(out, x, 0.5, seed))
		return e.download(out)
	}
	a, b, c := run(7), run(7), run(8)
	require.Equal(e, a, b, "the same seed twice")
	differ := 0
	for i := range a {
		if (a[i] == 0) != (c[i] == 0) {
			differ++
		}
	}
	// Independent masks at p = 0.5 differ in half the elements.
	require.InDelta(e, n/2, differ, 5*math.Sqrt(n/4), "seeds 7 and 8 give masks differing in %d of %d", differ, n)
}

// dropoutMask checks kernels.DropoutUniform and DropoutKeep against this
// package's own reading of the specification, at small and large indices
// and seeds (the arithmetic wraps mod 2⁶⁴).
func dropoutMask(e *env) {
	for _, seed := range []uint64{0, 1, 42, 0x9E3779B97F4A7C15, math.MaxUint64} {
		for _, i := range []int{0, 1, 2, 1000, 1<<31 - 1, 1 << 40, math.MaxInt64} {
			u := refDropoutUniform(seed, i)
			require.Equal(e, u, float64(kernels.DropoutUniform(seed, i)), "seed %d element %d", seed, i)
			require.True(e, u >= 0 && u < 1, "u = %v", u)
			for _, p := range []float32{0, 0.1, 0.5, 0.999} {
				require.Equal(e, u >= float64(p), kernels.DropoutKeep(seed, i, p), "seed %d element %d p %v", seed, i, p)
			}
		}
	}
	// splitmix64's first output for state 0 (the finaliser of 0x9E3779B97F4A7C15),
	// the widely published 0xE220A8397B1DCDAF: its top 24 bits over 2²⁴.
	require.Equal(e, float64(0xE220A8)/(1<<24), refDropoutUniform(0, 0))
	require.Equal(e, float32(1), kernels.DropoutScale(0))
	require.Equal(e, float32(2), kernels.DropoutScale(0.5))
}

// decoderBackwardFiniteDifferences checks the float64 references of the
// gradients (those the backends are held to) against central differences
// of the forward references: d/dθ Σ dy·forward.
func decoderBackwardFiniteDifferences(e *env) {
	const rows, d, h = 3, 7, 1e-6
	rnd := func(n int, lo, hi float64) []float64 {
		v := make([]float64, n)
		for i := range v {
			v[i] = lo + (hi-lo)*e.rng.Float64()
		}
		return v
	}
	dot := func(a, b []float64) float64 {
		var s float64
		for i := range a {
			s += a[i] * b[i]
		}
		return s
	}
	// grad returns the central differences of f over the elements of v.
	grad := func(v []float64, f func() float64) []float64 {
		g := make([]float64, len(v))
		for i := range v {
			old := v[i]
			v[i] = old + h
			up := f()
			v[i] = old - h
			down := f()
			v[i] = old
			g[i] = (up - down) / (2 * h)
		}
		return g
	}
	near := func(what string, got, want []float64) {
		rel, maxAbs := kernels.RelErr(got, want)
		require.LessOrEqualf(e, rel, 1e-6, "%s: reference against finite differences: rel-err %.3g (max-abs %.3g)", what, rel, maxAbs)
	}

	x, gamma, dy := rnd(rows*d, -2, 3), rnd(d, -1, 1), rnd(rows*d, -1, 1)
	loss := func() float64 { return dot(dy, refRMSNorm(x, gamma, d, normEps)) }
	dx, dgamma := RefRMSNormBackward(dy, x, gamma, d, normEps)
	near("RMSNormBackward dx", dx, grad(x, loss))
	near("RMSNormBackward dgamma", dgamma, grad(gamma, loss))

	gate, up, dy2 := rnd(20, -6, 6), rnd(20, -1, 1), rnd(20, -1, 1)
	loss2 := func() float64 { return dot(dy2, refSwiGLU(gate, up)) }
	dgate, dup := RefSwiGLUBackward(dy2, gate, up)
	near("SwiGLUBackward dgate", dgate, grad(gate, loss2))
	near("SwiGLUBackward dup", dup, grad(up, loss2))
}

// decoderBackwardErrors checks that bad calls fail with errors naming the
// op and the argument.
func decoderBackwardErrors(e *env) {
	ops := e.decoderBackward()
	f32 := kernels.F32
	x, _ := e.Input("x", f32, 4, 8)
	xh, _ := e.Input("xh", kernels.F16, 4, 8)
	dy, _ := e.Input("dy", f32, 4, 8)
	gamma, _ := e.Input("gamma", f32, 8)
	gamma7, _ := e.Input("gamma7", f32, 7)
	dx := e.Output(f32, 4, 8)
	dg := e.Output(f32, 8)

	const rb = "RMSNormBackward"
	e.requireOpErr(ops.RMSNormBackward(dx, nil, dy, x, gamma7, normEps), kernels.ErrShape, rb, "gamma")
	e.requireOpErr(ops.RMSNormBackward(dx, e.Output(f32, 7), dy, x, gamma, normEps), kernels.ErrShape, rb, "dgamma")
	e.requireOpErr(ops.RMSNormBackward(dx, e.Output(kernels.F16, 8), dy, x, gamma, normEps), kernels.ErrDType, rb, "dgamma")
	e.requireOpErr(ops.RMSNormBackward(dx, nil, xh, x, gamma, normEps), kernels.ErrDType, rb, "dy")
	e.requireOpErr(ops.RMSNormBackward(e.Output(f32, 8, 4), nil, dy, x, gamma, normEps), kernels.ErrShape, rb, "dx")
	e.requireOpErr(ops.RMSNormBackward(dx, nil, dy, x, nil, normEps), kernels.ErrShape, rb, "gamma")
	e.requireOpErr(ops.RMSNormBackward(dx, nil, dy, x, gamma, -1), kernels.ErrValue, rb, "eps")
	e.requireOpErr(ops.RMSNormBackward(x, nil, dy, x, gamma, normEps), kernels.ErrValue, rb, "dx is x's storage")
	e.requireOpErr(ops.RMSNormBackward(dx, gamma, dy, x, gamma, normEps), kernels.ErrValue, rb, "dgamma is gamma's storage")
	e.requireOpErr(ops.RMSNormBackward(dx, dg, dy, e.Ints("ints", make([]int32, 32), 4, 8), gamma, normEps), kernels.ErrDType, rb, "x")

	const sb = "SwiGLUBackward"
	g, _ := e.Input("gate", f32, 3, 5)
	u, _ := e.Input("up", f32, 3, 5)
	d, _ := e.Input("dy3", f32, 3, 5)
	u16, _ := e.Input("up16", kernels.BF16, 3, 5)
	d4, _ := e.Input("dy4", f32, 5, 3)
	out1, out2 := e.Output(f32, 3, 5), e.Output(f32, 3, 5)
	e.requireOpErr(ops.SwiGLUBackward(out1, out2, d, g, u16), kernels.ErrDType, sb, "up")
	e.requireOpErr(ops.SwiGLUBackward(out1, e.Output(kernels.F16, 3, 5), d, g, u), kernels.ErrDType, sb, "dup")
	e.requireOpErr(ops.SwiGLUBackward(out1, out2, d4, g, u), kernels.ErrShape, sb, "dy")
	e.requireOpErr(ops.SwiGLUBackward(e.Output(f32, 15), out2, d, g, u), kernels.ErrShape, sb, "dgate")
	e.requireOpErr(ops.SwiGLUBackward(out1, out1, d, g, u), kernels.ErrValue, sb, "dgate and dup")
	e.requireOpErr(ops.SwiGLUBackward(out1, out2, nil, g, u), kernels.ErrShape, sb, "dy")

	const db = "Dropout"
	out := e.Output(f32, 4, 8)
	for _, p := range []float32{1, -0.1, 1.5, float32(math.NaN()), float32(math.Inf(1))} {
		e.requireOpErr(ops.Dropout(out, x, p, 1), kernels.ErrValue, db, "p is")
	}
	e.requireOpErr(ops.Dropout(e.Output(f32, 32), x, 0.1, 1), kernels.ErrShape, db, "out")
	e.requireOpErr(ops.Dropout(e.Output(kernels.BF16, 4, 8), x, 0.1, 1), kernels.ErrDType, db, "out")
	e.requireOpErr(ops.Dropout(out, e.Ints("ints", make([]int32, 32), 4, 8), 0.1, 1), kernels.ErrDType, db, "x")
	e.requireOpErr(ops.Dropout(out, nil, 0.1, 1), kernels.ErrShape, db, "x")
}
