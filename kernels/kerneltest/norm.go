package kerneltest

import (
	"math"
	"strings"

	"github.com/stretchr/testify/require"
	"github.com/zbench/zbench/kernels"
)

func init() { suites = append(suites, normTests()) }

// inputFromValues returns an input tensor holding vals rounded to dt, and
// the rounded values in float64.
func (e *env) inputFromValues(name string, dt kernels.DType, vals []float64, shape ...int) (*kernels.Tensor, []float64) {
	e.Helper()
	f := make([]float32, len(vals))
	for i, v := range vals {
		f[i] = kernels.Round(dt, float32(v))
	}
	t, err := kernels.FromFloat32(e.b, dt, f, shape...)
	require.NoError(e, err, "upload %s", name)
	e.track(name, t)
	return t, widen(f)
}

// requireOpErr requires err to wrap sentinel and to name op (the method
// name, compared without regard to case), and every string of also.
func (e *env) requireOpErr(err, sentinel error, op string, also ...string) {
	e.Helper()
	require.ErrorIs(e, err, sentinel, "%s", op)
	msg := err.Error()
	require.Containsf(e, strings.ToLower(msg), strings.ToLower(op), "error %q should name the op", msg)
	for _, s := range also {
		require.Containsf(e, msg, s, "error %q should mention %q", msg, s)
	}
}

// requireDataErr is requireOpErr for errors found in the data (an id or a
// length out of range): a device that runs asynchronously reports them at
// the next Sync instead of from the call.
func (e *env) requireDataErr(err, sentinel error, op string, also ...string) {
	e.Helper()
	if err == nil {
		err = e.b.Sync()
	}
	e.requireOpErr(err, sentinel, op, also...)
}

const normEps = 1e-5

// normShapes are the shapes of x in the norm tests: [rows…, D].
var normShapes = [][]int{{1, 1}, {31, 31}, {3, 4097}, {2, 3, 33}, {64}}

func normTests() []test {
	var ts []test
	for _, dt := range kernels.FloatTypes {
		for _, shape := range normShapes {
			d := shape[len(shape)-1]
			rows := kernels.Shape(shape).Rows()
			ts = append(ts,
				test{name("LayerNorm", "dtype", dt, "shape", kernels.Shape(shape)), func(e *env) {
					x, xv := e.Uniform("x", dt, -2, 3, shape...)
					gamma, gv := e.Input("gamma", dt, d)
					beta, bv := e.Input("beta", dt, d)
					out := e.Output(dt, shape...)
					mean, rstd := e.Output(kernels.F32, rows), e.Output(kernels.F32, rows)
					require.NoError(e, e.b.LayerNorm(out, mean, rstd, x, gamma, beta, normEps))
					want, wm, wr := RefLayerNorm(xv, gv, bv, d, normEps)
					e.Check("out", out, want, 0)
					e.Check("mean", mean, wm, 0)
					e.Check("rstd", rstd, wr, 0)
				}},
				test{name("LayerNorm", "dtype", dt, "shape", kernels.Shape(shape), "beta", "nil", "stats", "nil"), func(e *env) {
					x, xv := e.Input("x", dt, shape...)
					gamma, gv := e.Input("gamma", dt, d)
					out := e.Output(dt, shape...)
					require.NoError(e, e.b.LayerNorm(out, nil, nil, x, gamma, nil, normEps))
					want, _, _ := RefLayerNorm(xv, gv, nil, d, normEps)
					e.Check("out", out, want, 0)
				}},
				test{name("LayerNormBackward", "dtype", dt, "shape", kernels.Shape(shape)), func(e *env) {
					x, xv := e.Uniform("x", dt, -2, 3, shape...)
					gamma, gv := e.Input("gamma", dt, d)
					dy, dyv := e.Input("dy", dt, shape...)
					_, m, r := RefLayerNorm(xv, gv, nil, d, normEps)
					mean, mv := e.inputFromValues("mean", kernels.F32, m, rows)
					rstd, rv := e.inputFromValues("rstd", kernels.F32, r, rows)
					dx, dgamma, dbeta := e.Output(dt, shape...), e.Output(dt, d), e.Output(dt, d)
					require.NoError(e, e.b.LayerNormBackward(dx, dgamma, dbeta, dy, x, gamma, mean, rstd))
					wdx, wdg, wdb := refLayerNormBackward(dyv, xv, gv, mv, rv, d)
					e.Check("dx", dx, wdx, 0)
					e.Check("dgamma", dgamma, wdg, 0)
					e.Check("dbeta", dbeta, wdb, 0)

					// Without the parameter gradients, and again to see that
					// dx is overwritten rather than accumulated.
					require.NoError(e, e.b.LayerNormBackward(dx, nil, nil, dy, x, gamma, mean, rstd))
					e.Check("dx (no dgamma, dbeta)", dx, wdx, 0)
				}},
				test{name("RMSNorm", "dtype", dt, "shape", kernels.Shape(shape)), func(e *env) {
					x, xv := e.Uniform("x", dt, -2, 3, shape...)
					gamma, gv := e.Input("gamma", dt, d)
					out := e.Output(dt, shape...)
					require.NoError(e, e.b.RMSNorm(out, x, gamma, normEps))
					e.Check("out", out, refRMSNorm(xv, gv, d, normEps), 0)
				}},
			)
		}
	}
	return append(ts, test{"LayerNorm/errors", normErrors})
}

// RefLayerNorm normalises rows of x in float64 (beta may be nil) and returns
// the rows' mean and 1/std: the reference of LayerNorm.
func RefLayerNorm(x, gamma, beta []float64, d int, eps float64) (out, mean, rstd []float64) {
	rows := len(x) / d
	out, mean, rstd = make([]float64, len(x)), make([]float64, rows), make([]float64, rows)
	for r := range rows {
		row := x[r*d : (r+1)*d]
		var m, v float64
		for _, xv := range row {
			m += xv
		}
		m /= float64(d)
		for _, xv := range row {
			v += (xv - m) * (xv - m)
		}
		v /= float64(d)
		rs := 1 / math.Sqrt(v+eps)
		mean[r], rstd[r] = m, rs
		for j, xv := range row {
			out[r*d+j] = (xv - m) * rs * gamma[j]
			if beta != nil {
				out[r*d+j] += beta[j]
			}
		}
	}
	return out, mean, rstd
}

// refLayerNormBackward is the analytic gradient of LayerNorm in float64.
func refLayerNormBackward(dy, x, gamma, mean, rstd []float64, d int) (dx, dgamma, dbeta []float64) {
	dx, dgamma, dbeta = make([]float64, len(x)), make([]float64, d), make([]float64, d)
	for r := range len(x) / d {
		var a, b float64
		for j := range d {
			xh := (x[r*d+j] - mean[r]) * rstd[r]
			g := dy[r*d+j] * gamma[j]
			a += g
			b += g * xh
			dgamma[j] += dy[r*d+j] * xh
			dbeta[j] += dy[r*d+j]
		}
		a, b = a/float64(d), b/float64(d)
		for j := range d {
			xh := (x[r*d+j] - mean[r]) * rstd[r]
			dx[r*d+j] = rstd[r] * (dy[r*d+j]*gamma[j] - a - xh*b)
		}
	}
	return dx, dgamma, dbeta
}

// refRMSNorm is x·rsqrt(mean(x²)+eps)·gamma per row in float64.
func refRMSNorm(x, gamma []float64, d int, eps float64) []float64 {
	out := make([]float64, len(x))
	for r := range len(x) / d {
		var ss float64
		for j := range d {
			ss += x[r*d+j] * x[r*d+j]
		}
		inv := 1 / math.Sqrt(ss/float64(d)+eps)
		for j := range d {
			out[r*d+j] = x[r*d+j] * inv * gamma[j]
		}
	}
	return out
}

func normErrors(e *env) {
	x, _ := e.Input("x", kernels.F32, 4, 8)
	xh, _ := e.Input("xh", kernels.F16, 4, 8)
	gamma, _ := e.Input("gamma", kernels.F32, 8)
	gamma7, _ := e.Input("gamma7", kernels.F32, 7)
	out := e.Output(kernels.F32, 4, 8)
	outH := e.Output(kernels.F16, 4, 8)
	mean, rstd := e.Output(kernels.F32, 4), e.Output(kernels.F32, 4)
	meanH := e.Output(kernels.F16, 4)
	mean5 := e.Output(kernels.F32, 5)

	e.requireOpErr(e.b.LayerNorm(out, nil, nil, x, gamma7, nil, normEps), kernels.ErrShape, "LayerNorm", "gamma")
	e.requireOpErr(e.b.LayerNorm(out, nil, nil, x, nil, nil, normEps), kernels.ErrShape, "LayerNorm", "gamma")
	e.requireOpErr(e.b.LayerNorm(outH, nil, nil, x, gamma, nil, normEps), kernels.ErrDType, "LayerNorm", "out")
	e.requireOpErr(e.b.LayerNorm(out, nil, nil, xh, gamma, nil, normEps), kernels.ErrDType, "LayerNorm")
	e.requireOpErr(e.b.LayerNorm(out, nil, nil, x, gamma, gamma7, normEps), kernels.ErrShape, "LayerNorm", "beta")
	e.requireOpErr(e.b.LayerNorm(out, meanH, rstd, x, gamma, nil, normEps), kernels.ErrDType, "LayerNorm", "mean")
	e.requireOpErr(e.b.LayerNorm(out, mean, mean5, x, gamma, nil, normEps), kernels.ErrShape, "LayerNorm", "rstd")

	dx := e.Output(kernels.F32, 4, 8)
	dg7 := e.Output(kernels.F32, 7)
	e.requireOpErr(e.b.LayerNormBackward(dx, dg7, nil, x, x, gamma, mean, rstd), kernels.ErrShape, "LayerNormBackward", "dgamma")
	e.requireOpErr(e.b.LayerNormBackward(dx, nil, nil, x, x, gamma, nil, rstd), kernels.ErrShape, "LayerNormBackward", "mean")
	e.requireOpErr(e.b.LayerNormBackward(dx, nil, nil, xh, x, gamma, mean, rstd), kernels.ErrDType, "LayerNormBackward", "dy")

	e.requireOpErr(e.b.RMSNorm(out, x, gamma7, normEps), kernels.ErrShape, "RMSNorm", "gamma")
	e.requireOpErr(e.b.RMSNorm(outH, x, gamma, normEps), kernels.ErrDType, "RMSNorm", "out")
	e.requireOpErr(e.b.RMSNorm(e.Output(kernels.F32, 8, 4), x, gamma, normEps), kernels.ErrShape, "RMSNorm", "out")
}
