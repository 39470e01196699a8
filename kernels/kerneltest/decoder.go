package kerneltest

import (
	"math"

	"github.com/stretchr/testify/require"
	"github.com/zbench/zbench/kernels"
)

func init() { suites = append(suites, decoderTests()) }

// decoder returns the backend's Decoder ops; every backend implements them.
func (e *env) decoder() kernels.Decoder {
	e.Helper()
	return group[kernels.Decoder](e)
}

// mutable returns a tensor of uniform values in [-1, 1) rounded to dt that
// an op may write (not checked unchanged), and its values.
func (e *env) mutable(dt kernels.DType, shape ...int) (*kernels.Tensor, []float64) {
	e.Helper()
	vals := make([]float32, kernels.Shape(shape).Len())
	for i := range vals {
		vals[i] = kernels.Round(dt, float32(2*e.rng.Float64()-1))
	}
	t, err := kernels.FromFloat32(e.b, dt, vals, shape...)
	require.NoError(e, err)
	e.owned = append(e.owned, t)
	return t, widen(vals)
}

// RefRoPE rotates x [B, S, H, D] by pos [B, S] and invFreq [D/2] as
// Decoder.RoPE does: θ is the float32 product pos·invFreq, the rotation is
// in float64.
func RefRoPE(x []float64, pos []int32, invFreq []float32, B, S, H, D int) []float64 {
	out := append([]float64(nil), x...)
	half := D / 2
	for t := range B * S {
		for i := range half {
			s, c := math.Sincos(float64(float32(pos[t]) * invFreq[i]))
			for h := range H {
				v := out[(t*H+h)*D:][:D]
				a, b := v[i], v[i+half]
				v[i], v[i+half] = a*c-b*s, b*c+a*s
			}
		}
	}
	return out
}

// RefCachedAttention is Decoder.CachedAttention in float64: q
// [B, Hq, Sq, D], caches [B, Hkv, T, D].
func RefCachedAttention(q, k, v []float64, lens []int32, B, Hq, Hkv, Sq, T, D int, scale float64) []float64 {
	out := make([]float64, len(q))
	g := Hq / Hkv
	for b := range B {
		for h := range Hq {
			kv := (b*Hkv + h/g) * T * D
			for s := range Sq {
				qr := q[((b*Hq+h)*Sq+s)*D:][:D]
				n := int(lens[b]) - Sq + s + 1
				sc := make([]float64, n)
				m := math.Inf(-1)
				for j := range n {
					for d := range D {
						sc[j] += qr[d] * k[kv+j*D+d]
					}
					sc[j] *= scale
					m = math.Max(m, sc[j])
				}
				sum := 0.0
				for j := range sc {
					sc[j] = math.Exp(sc[j] - m)
					sum += sc[j]
				}
				o := out[((b*Hq+h)*Sq+s)*D:][:D]
				for j, p := range sc {
					for d := range D {
						o[d] += p / sum * v[kv+j*D+d]
					}
				}
			}
		}
	}
	return out
}

func decoderTests() []test {
	var ts []test
	for _, dt := range kernels.FloatTypes {
		for _, c := range []struct{ B, S, H, D int }{{1, 1, 1, 2}, {2, 7, 3, 34}, {1, 33, 8, 64}, {3, 5, 2, 128}} {
			ts = append(ts, test{name("RoPE", "dtype", dt, "x", kernels.Shape{c.B, c.S, c.H, c.D}), func(e *env) {
				x, xv := e.mutable(dt, c.B, c.S, c.H, c.D)
				pos := e.RandInts(c.B*c.S, 4096)
				freq := make([]float32, c.D/2)
				for i := range freq { // θ_i = 10000^(−2i/D), the low ones scaled as llama3 does
					freq[i] = float32(math.Pow(10000, -2*float64(i)/float64(c.D)))
					if i > c.D/4 {
						freq[i] /= 8
					}
				}
				f, _ := e.inputFromValues("invFreq", kernels.F32, widen(freq), c.D/2)
				require.NoError(e, e.decoder().RoPE(x, e.Ints("pos", pos, c.B, c.S), f))
				e.Check("x", x, RefRoPE(xv, pos, freq, c.B, c.S, c.H, c.D), 0)
			}})
		}
		for _, shape := range [][]int{{1}, {3, 4097}, {2, 5, 33}} {
			ts = append(ts, test{name("SwiGLU", "dtype", dt, "shape", kernels.Shape(shape)), func(e *env) {
				gate, gv := e.Uniform("gate", dt, -6, 6, shape...)
				up, uv := e.Input("up", dt, shape...)
				out := e.Output(dt, shape...)
				require.NoError(e, e.decoder().SwiGLU(out, gate, up))
				want := make([]float64, len(gv))
				for i, g := range gv {
					want[i] = g / (1 + math.Exp(-g)) * uv[i]
				}
				e.Check("out", out, want, 0)
			}})
		}
		ts = append(ts, test{name("SwiGLU", "dtype", dt, "out", "gate"), func(e *env) {
			gate, gv := e.mutable(dt, 3, 65)
			up, uv := e.Input("up", dt, 3, 65)
			require.NoError(e, e.decoder().SwiGLU(gate, gate, up))
			want := make([]float64, len(gv))
			for i, g := range gv {
				want[i] = g / (1 + math.Exp(-g)) * uv[i]
			}
			e.Check("gate", gate, want, 0)
		}})
		ts = append(ts, test{name("SwiGLU", "dtype", dt, "out", "up"), func(e *env) {
			gate, gv := e.Input("gate", dt, 3, 65)
			up, uv := e.mutable(dt, 3, 65)
			require.NoError(e, e.decoder().SwiGLU(up, gate, up))
			want := make([]float64, len(gv))
			for i, g := range gv {
				want[i] = g / (1 + math.Exp(-g)) * uv[i]
			}
			e.Check("up", up, want, 0)
		}})
		for _, c := range []struct {
			B, S, H, T, D int
			start         []int32
		}{{1, 1, 1, 1, 2, []int32{0}}, {2, 1, 4, 40, 64, []int32{39, 0}}, {3, 6, 2, 19, 34, []int32{0, 7, 13}}} {
			ts = append(ts, test{name("CacheWrite", "dtype", dt, "x", kernels.Shape{c.B, c.S, c.H, c.D}, "T", c.T), func(e *env) {
				cache, before := e.mutable(dt, c.B, c.H, c.T, c.D)
				x, xv := e.Input("x", dt, c.B, c.S, c.H, c.D)
				require.NoError(e, e.decoder().CacheWrite(cache, x, e.Ints("start", c.start, c.B)))
				want := append([]float64(nil), before...)
				for b := range c.B {
					for s := range c.S {
						for h := range c.H {
							copy(want[((b*c.H+h)*c.T+int(c.start[b])+s)*c.D:][:c.D], xv[((b*c.S+s)*c.H+h)*c.D:][:c.D])
						}
					}
				}
				require.NoError(e, e.b.Sync())
				got, err := kernels.ToFloat32(cache)
				require.NoError(e, err)
				require.Equal(e, want, widen(got), "a copy is exact, and the other positions are kept")
			}})
		}
		for _, c := range []struct {
			B, Hq, Hkv, Sq, T, D int
			lens                 []int32
		}{
			{1, 1, 1, 1, 1, 2, []int32{1}},
			{1, 32, 4, 1, 1100, 64, []int32{1037}}, // TinyLlama's heads at batch 1
			{3, 8, 2, 1, 70, 128, []int32{1, 70, 33}},
			{2, 6, 6, 9, 40, 34, []int32{9, 40}}, // prefill after a cached prefix
			{2, 4, 1, 17, 17, 24, []int32{17, 17}},
		} {
			ts = append(ts, test{name("CachedAttention", "dtype", dt, "q", kernels.Shape{c.B, c.Hq, c.Sq, c.D}, "kv", kernels.Shape{c.B, c.Hkv, c.T, c.D}), func(e *env) {
				q, qv := e.Input("q", dt, c.B, c.Hq, c.Sq, c.D)
				k, kv := e.Uniform("k", dt, -2, 2, c.B, c.Hkv, c.T, c.D)
				v, vv := e.Input("v", dt, c.B, c.Hkv, c.T, c.D)
				out := e.Output(dt, c.B, c.Hq, c.Sq, c.D)
				require.NoError(e, e.decoder().CachedAttention(out, q, k, v, e.Ints("lens", c.lens, c.B), 0))
				e.Check("out", out, RefCachedAttention(qv, kv, vv, c.lens, c.B, c.Hq, c.Hkv, c.Sq, c.T, c.D, 1/math.Sqrt(float64(c.D))), 0)
			}})
		}
		for _, shape := range [][]int{{5}, {3, 32000}, {2, 2, 97}} {
			ts = append(ts, test{name("Argmax", "dtype", dt, "x", kernels.Shape(shape)), func(e *env) {
				x, xv := e.Uniform("x", dt, -8, 8, shape...)
				s := kernels.Shape(shape)
				rows, n := s.Rows(), s.Last()
				lead := shape[:len(shape)-1]
				if len(lead) == 0 {
					lead = []int{1}
				}
				out := e.Output(kernels.I32, lead...)
				require.NoError(e, e.decoder().Argmax(out, x))
				want := make([]int32, rows)
				for r := range rows {
					for i, val := range xv[r*n : (r+1)*n] {
						if val > xv[r*n+int(want[r])] {
							want[r] = int32(i)
						}
					}
				}
				require.NoError(e, e.b.Sync())
				got, err := kernels.ToInt32(out)
				require.NoError(e, err)
				require.Equal(e, want, got)
			}})
		}
		ts = append(ts, test{name("Argmax", "dtype", dt, "ties", "nan"), func(e *env) {
			x, _ := e.inputFromValues("x", dt, []float64{1, 3, 3, -1, 2, math.NaN(), 7, math.NaN()}, 2, 4)
			out := e.Output(kernels.I32, 2)
			require.NoError(e, e.decoder().Argmax(out, x))
			require.NoError(e, e.b.Sync())
			got, err := kernels.ToInt32(out)
			require.NoError(e, err)
			require.Equal(e, []int32{1, 1}, got, "the first of tied maxima; NaN as the largest (torch.argmax)")
		}})
	}
	return append(ts, test{"decoder/errors", decoderErrors})
}

// decoderErrors checks that bad calls fail with errors naming the op and
// the argument.
func decoderErrors(e *env) {
	d := e.decoder()
	f32 := kernels.F32
	x, _ := e.mutable(f32, 1, 2, 2, 6)
	odd, _ := e.mutable(f32, 1, 2, 2, 5)
	pos := e.Ints("pos", []int32{0, 1}, 1, 2)
	freq, _ := e.Input("invFreq", f32, 3)
	e.requireOpErr(d.RoPE(odd, pos, freq), kernels.ErrShape, "RoPE", "want it even")
	e.requireOpErr(d.RoPE(x, e.Ints("pos3", []int32{0, 1, 2}, 1, 3), freq), kernels.ErrShape, "RoPE", "pos")
	f16freq, _ := e.Input("invFreq16", kernels.F16, 3)
	e.requireOpErr(d.RoPE(x, pos, f16freq), kernels.ErrDType, "RoPE", "invFreq")

	g, _ := e.Input("gate", f32, 4)
	u16, _ := e.Input("up", kernels.BF16, 4)
	e.requireOpErr(d.SwiGLU(e.Output(f32, 4), g, u16), kernels.ErrDType, "SwiGLU", "up")

	cache, _ := e.mutable(f32, 2, 2, 4, 6)
	kx, _ := e.Input("k", f32, 2, 3, 2, 6)
	e.requireDataErr(d.CacheWrite(cache, kx, e.Ints("start", []int32{0, 2}, 2)), kernels.ErrValue, "CacheWrite", "start[1] = 2")
	e.requireDataErr(d.CacheWrite(cache, kx, e.Ints("start-", []int32{-1, 0}, 2)), kernels.ErrValue, "CacheWrite", "start[0] = -1")
	big, _ := e.Input("big", f32, 2, 5, 2, 6)
	e.requireOpErr(d.CacheWrite(cache, big, e.Ints("start0", []int32{0, 0}, 2)), kernels.ErrShape, "CacheWrite", "more than the cache's 4")

	q, _ := e.Input("q", f32, 2, 4, 2, 6)
	out := e.Output(f32, 2, 4, 2, 6)
	e.requireDataErr(d.CachedAttention(out, q, cache, cache, e.Ints("lens", []int32{1, 3}, 2), 0), kernels.ErrValue, "CachedAttention", "lens[0] = 1")
	e.requireDataErr(d.CachedAttention(out, q, cache, cache, e.Ints("lens5", []int32{2, 5}, 2), 0), kernels.ErrValue, "CachedAttention", "lens[1] = 5")
	q3, _ := e.Input("q3", f32, 2, 3, 2, 6)
	e.requireOpErr(d.CachedAttention(e.Output(f32, 2, 3, 2, 6), q3, cache, cache, e.Ints("lens2", []int32{2, 2}, 2), 0),
		kernels.ErrShape, "CachedAttention", "not a multiple")
	e.requireOpErr(d.CachedAttention(out, q, cache, cache, e.Ints("lensNaN", []int32{2, 2}, 2), float32(math.Inf(1))),
		kernels.ErrValue, "CachedAttention", "scale")

	xs, _ := e.Input("x", f32, 3, 7)
	e.requireOpErr(d.Argmax(e.Output(f32, 3), xs), kernels.ErrDType, "Argmax", "out")
	e.requireOpErr(d.Argmax(e.Output(kernels.I32, 7), xs), kernels.ErrShape, "Argmax", "out")
}
