//go:build cuda

package cuda

import (
	"fmt"
	"math"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/zbench/zbench/kernels"
)

// TestDecoderBackwardLaunches runs the DecoderBackward ops on dry-run
// backends of each image target, in every float dtype, with and without
// dgamma and in place, and checks every launch against the kernel's
// parameters in the PTX (as TestLaunchSignatures does for the other ops)
// and the arguments that carry the semantics: the row count and block
// count of RMSNorm's backward and its reduction, dropout's p, scale and
// seed bits.
func TestDecoderBackwardLaunches(t *testing.T) {
	for _, cc := range [][2]int{{7, 5}, {8, 0}, {9, 0}} {
		t.Run(fmt.Sprintf("cc=%d.%d", cc[0], cc[1]), func(t *testing.T) {
			var recs []launchRec
			b := dryRun(cc[0], cc[1], &recs)
			target := imageTarget(cc[0], cc[1])
			if target == "sm_90a" {
				target = "compute_80" // same kernels (TestImages)
			}
			params := ptxParams(t, target)
			a := func(dt kernels.DType, shape ...int) *kernels.Tensor {
				x, err := b.Alloc(dt, shape...)
				require.NoError(t, err)
				return x
			}
			// take returns the launches recorded since the last call.
			take := func() []launchRec {
				r := recs
				recs = nil
				return r
			}
			for _, dt := range kernels.FloatTypes {
				s := dt.String()
				for _, c := range []struct{ rows, d, parts int }{{1, 37, 1}, {3, 4097, 3}, {1000, 64, 264}} {
					x, dy, dx := a(dt, c.rows, c.d), a(dt, c.rows, c.d), a(dt, c.rows, c.d)
					gamma, dgamma := a(dt, c.d), a(dt, c.d)
					require.NoError(t, b.RMSNormBackward(dx, dgamma, dy, x, gamma, 1e-5))
					r := take()
					require.Len(t, r, 2, "%v %v: the row kernel and the reduction", dt, c)
					assert.Equal(t, "rmsnorm_backward_"+s, r[0].name)
					assert.Equal(t, dim3{c.parts, 1, 1}, r[0].grid, "%v %v: blocks", dt, c)
					assert.Equal(t, []any{ptrOf(dx), r[0].args[1], ptrOf(dy), ptrOf(x), ptrOf(gamma), int32(c.rows), int32(c.d), float32(1e-5)}, r[0].args)
					assert.NotZero(t, r[0].args[1], "partial sums")
					assert.Equal(t, "layernorm_param_grads_"+s, r[1].name)
					assert.Equal(t, []any{ptrOf(dgamma), devptr(0), r[0].args[1], devptr(0), int32(c.parts), int32(c.d)}, r[1].args)
					assert.GreaterOrEqual(t, r[1].grid.x*r[1].block.x, c.d, "one thread per column of dgamma")
					checkLaunches(t, params, r)

					require.NoError(t, b.RMSNormBackward(dy, nil, dy, x, gamma, 0)) // in place, no dgamma
					r = take()
					require.Len(t, r, 1, "%v %v: no reduction without dgamma", dt, c)
					assert.Equal(t, devptr(0), r[0].args[1], "no partial sums without dgamma")
					assert.Equal(t, r[0].args[0], r[0].args[2], "dx is dy")
					checkLaunches(t, params, r)
				}

				g, u, d := a(dt, 3, 4097), a(dt, 3, 4097), a(dt, 3, 4097)
				dg, du := a(dt, 3, 4097), a(dt, 3, 4097)
				require.NoError(t, b.SwiGLUBackward(dg, du, d, g, u))
				require.NoError(t, b.SwiGLUBackward(g, u, d, g, u))
				require.NoError(t, b.SwiGLUBackward(d, du, d, g, u))
				r := take()
				require.Len(t, r, 3)
				for _, l := range r {
					assert.Equal(t, "swiglu_backward_"+s, l.name)
					assert.Equal(t, int64(3*4097), l.args[5])
				}
				checkLaunches(t, params, r)

				x, out := a(dt, 5, 33), a(dt, 5, 33)
				for _, c := range []struct {
					p    float32
					seed uint64
				}{{0, 0}, {0.1, 42}, {0.5, math.MaxUint64}} {
					require.NoError(t, b.Dropout(out, x, c.p, c.seed))
					require.NoError(t, b.Dropout(x, x, c.p, c.seed)) // in place
					r := take()
					require.Len(t, r, 2)
					for _, l := range r {
						assert.Equal(t, "dropout_"+s, l.name)
						assert.Equal(t, []any{int64(5 * 33), c.p, kernels.DropoutScale(c.p), int64(c.seed)}, l.args[2:], "n, p, scale, seed bits")
					}
					checkLaunches(t, params, r)
				}
			}
		})
	}
}

// checkLaunches checks launches against the kernels' PTX parameters and
// the hardware's limits, as TestLaunchSignatures does.
func checkLaunches(t *testing.T, params map[string][]string, recs []launchRec) {
	t.Helper()
	for _, r := range recs {
		if !checkSignature(t, params, r) {
			continue
		}
		assert.LessOrEqual(t, r.block.x*r.block.y*r.block.z, 1024, r.name)
		assert.Positive(t, r.grid.x, r.name)
		assert.LessOrEqual(t, r.grid.x, math.MaxInt32, r.name)
		assert.Zero(t, r.smem, r.name)
	}
}

// checkSignature checks a launch's arguments against its kernel's PTX
// parameters, reporting false when the kernel or its arity is wrong.
func checkSignature(t *testing.T, params map[string][]string, r launchRec) bool {
	t.Helper()
	want, ok := params[r.name]
	if !assert.True(t, ok, "launch of %s, which the image lacks", r.name) {
		return false
	}
	if !assert.Len(t, r.args, len(want), "%s: arguments %v, parameters %v", r.name, r.args, want) {
		return false
	}
	for i, arg := range r.args {
		assert.Contains(t, goParam(arg), want[i], "%s argument %d: Go %T for PTX %s", r.name, i, arg, want[i])
	}
	return true
}

// TestDecoderBackwardErrors checks that bad calls fail before any launch,
// with errors naming the op and the argument.
func TestDecoderBackwardErrors(t *testing.T) {
	var recs []launchRec
	b := dryRun(8, 0, &recs)
	a := func(dt kernels.DType, shape ...int) *kernels.Tensor {
		x, err := b.Alloc(dt, shape...)
		require.NoError(t, err)
		return x
	}
	f32 := kernels.F32
	x, g := a(f32, 4, 8), a(f32, 8)
	for _, c := range []struct {
		err      error
		sentinel error
		msg      string
	}{
		{b.RMSNormBackward(a(f32, 4, 8), nil, a(f32, 4, 8), x, a(f32, 7), 1e-5), kernels.ErrShape, "cuda: RMSNormBackward: gamma"},
		{b.RMSNormBackward(x, nil, a(f32, 4, 8), x, g, 1e-5), kernels.ErrValue, "cuda: RMSNormBackward: dx is x's storage"},
		{b.RMSNormBackward(a(f32, 4, 8), nil, a(kernels.BF16, 4, 8), x, g, 1e-5), kernels.ErrDType, "cuda: RMSNormBackward: dy"},
		{b.SwiGLUBackward(x, x, x, a(f32, 4, 8), a(f32, 4, 8)), kernels.ErrValue, "cuda: SwiGLUBackward: dgate and dup"},
		{b.SwiGLUBackward(a(f32, 4, 8), a(f32, 4, 8), a(f32, 8, 4), x, a(f32, 4, 8)), kernels.ErrShape, "cuda: SwiGLUBackward: dy"},
		{b.Dropout(a(f32, 4, 8), x, 1, 0), kernels.ErrValue, "cuda: Dropout: p is 1"},
		{b.Dropout(a(f32, 4, 8), x, float32(math.NaN()), 0), kernels.ErrValue, "cuda: Dropout: p is NaN"},
		{b.Dropout(a(kernels.F16, 4, 8), x, 0.1, 0), kernels.ErrDType, "cuda: Dropout: out"},
	} {
		require.ErrorIs(t, c.err, c.sentinel, c.msg)
		assert.Contains(t, c.err.Error(), c.msg)
	}
	assert.Empty(t, recs, "a rejected call launches nothing")
}
