package kernels_test

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/zbench/zbench/kernels"
	"github.com/zbench/zbench/kernels/check"
	"github.com/zbench/zbench/kernels/cpu"
)

// TestAttentionByParts checks the composed attention, forward and
// backward, against the CPU backend's own kernels, with grouped KV heads,
// both masks and a key length different from the query length.
func TestAttentionByParts(t *testing.T) {
	be := cpu.New()
	cases := []struct {
		b, hq, hkv, sq, sk, d int
		causal, lens          bool
		scale                 float32
	}{
		{1, 2, 2, 5, 5, 8, false, false, 0},
		{2, 4, 2, 7, 9, 16, true, false, 0.3},
		{2, 6, 3, 4, 11, 8, false, true, 0.3},
		{3, 4, 1, 6, 6, 32, true, true, 0},
	}
	for _, c := range cases {
		t.Run(fmt.Sprintf("b%d-hq%d-hkv%d-sq%d-sk%d-d%d-causal=%v-lens=%v", c.b, c.hq, c.hkv, c.sq, c.sk, c.d, c.causal, c.lens), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(uint64(c.sq), uint64(c.sk)))
			in := func(shape ...int) *kernels.Tensor {
				v := make([]float32, kernels.Shape(shape).Len())
				for i := range v {
					v[i] = rng.Float32()*2 - 1
				}
				x, err := kernels.FromFloat32(be, kernels.F32, v, shape...)
				require.NoError(t, err)
				return x
			}
			out := func(shape ...int) *kernels.Tensor {
				x, err := be.Alloc(kernels.F32, shape...)
				require.NoError(t, err)
				return x
			}
			q, k, v := in(c.b, c.hq, c.sq, c.d), in(c.b, c.hkv, c.sk, c.d), in(c.b, c.hkv, c.sk, c.d)
			dout := in(c.b, c.hq, c.sq, c.d)
			p := kernels.AttentionParams{Scale: c.scale, Causal: c.causal}
			if c.lens {
				lens := make([]int32, c.b)
				for i := range lens {
					lens[i] = int32(1 + rng.IntN(c.sk))
				}
				var err error
				p.KeyLens, err = kernels.FromInt32(be, lens, c.b)
				require.NoError(t, err)
			}
			d, err := check.Attention("test", be, out(c.b, c.hq, c.sq, c.d), q, k, v, p)
			require.NoError(t, err)
			n := kernels.AttentionScratch(d)
			scratch := [3]*kernels.Tensor{out(n), out(n), out(n)}

			want, got := out(c.b, c.hq, c.sq, c.d), out(c.b, c.hq, c.sq, c.d)
			require.NoError(t, be.Attention(want, q, k, v, p))
			require.NoError(t, kernels.AttentionByParts(be, got, q, k, v, [2]*kernels.Tensor{scratch[0], scratch[1]}, p, d))
			requireClose(t, "out", want, got)

			grads := func() [3]*kernels.Tensor {
				return [3]*kernels.Tensor{out(c.b, c.hq, c.sq, c.d), out(c.b, c.hkv, c.sk, c.d), out(c.b, c.hkv, c.sk, c.d)}
			}
			w, g := grads(), grads()
			require.NoError(t, be.AttentionBackward(w[0], w[1], w[2], dout, q, k, v, p))
			require.NoError(t, kernels.AttentionBackwardByParts(be, g[0], g[1], g[2], dout, q, k, v, scratch, p, d))
			for i, name := range []string{"dq", "dk", "dv"} {
				requireClose(t, name, w[i], g[i])
			}
		})
	}
}

func requireClose(t *testing.T, name string, want, got *kernels.Tensor) {
	t.Helper()
	w, err := kernels.ToFloat32(want)
	require.NoError(t, err)
	g, err := kernels.ToFloat32(got)
	require.NoError(t, err)
	wf, gf := make([]float64, len(w)), make([]float64, len(g))
	for i := range w {
		wf[i], gf[i] = float64(w[i]), float64(g[i])
	}
	rel, _ := kernels.RelErr(gf, wf)
	require.Less(t, rel, 1e-5, "%s: rel-err %g", name, rel)
}
