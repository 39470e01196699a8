package cpu

import (
	"fmt"
	"math"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	xcpu "golang.org/x/sys/cpu"

	"github.com/zbench/zbench/kernels/cpu/internal/vecmath"
	"github.com/zbench/zbench/kernels/kerneltest"
)

// vecmathPaths runs f as a subtest on each of package vecmath's code paths,
// AVX512 and AVX2, setting vecmath.AVX512 and restoring it after; it skips
// where the CPU has no vecmath assembly, and a path where it lacks the
// path's instructions.
func vecmathPaths(t *testing.T, f func(t *testing.T)) {
	if !vecmath.Available {
		t.Skip("no vecmath assembly on this CPU")
	}
	defer func(v bool) { vecmath.AVX512 = v }(vecmath.AVX512)
	for _, p := range []struct {
		name   string
		avx512 bool
		has    bool
	}{
		{"AVX512", true, xcpu.X86.HasAVX512F},
		{"AVX2", false, xcpu.X86.HasAVX2 && xcpu.X86.HasFMA},
	} {
		t.Run(p.name, func(t *testing.T) {
			if !p.has {
				t.Skipf("no %s on this CPU", p.name)
			}
			vecmath.AVX512 = p.avx512
			f(t)
		})
	}
}

// vecCase is one function of package vecmath with its scalar Go reference
// and its float64 definition.
type vecCase struct {
	name   string
	vec    func(dst, src []float32)
	scalar func(float32) float32
	want   func(float64) float64
}

func vecCases() []vecCase {
	gelu64 := func(x float64) float64 { return 0.5 * x * math.Erfc(-x/math.Sqrt2) }
	return []vecCase{
		{"Exp", vecmath.Exp, expf, math.Exp},
		{"SiLU", vecmath.SiLU, silu, func(x float64) float64 { return x * sigmoid64(x) }},
		{"GELUTanh", vecmath.GELUTanh, geluTanh, geluTanh64},
		{"GELU", vecmath.GELU, gelu, gelu64},
	}
}

// vecSweep returns n+1 evenly spaced points of [lo, hi].
func vecSweep(lo, hi float64, n int) []float32 {
	xs := make([]float32, n+1)
	for i := range xs {
		xs[i] = float32(lo + (hi-lo)*float64(i)/float64(n))
	}
	return xs
}

// TestVecmathAccuracy sweeps each vector function over a million points
// against float64, with mathf_test's tolerances, and reports its largest
// difference from the scalar Go reference.
func TestVecmathAccuracy(t *testing.T) { vecmathPaths(t, vecmathAccuracy) }

// vecmathAccuracy is TestVecmathAccuracy on the current path.
func vecmathAccuracy(t *testing.T) {
	byName := map[string]vecCase{}
	for _, c := range vecCases() {
		byName[c.name] = c
	}
	for _, tc := range []struct {
		fn     string
		lo, hi float64
		tol    float64
	}{
		{"Exp", expMin, expMax, 4e-7},
		{"Exp", -90, 90, 4e-7}, // overflow to +Inf, gradual underflow below expMin
		{"SiLU", -80, 80, 5e-7},
		{"SiLU", -200, 200, 5e-7},
		{"GELUTanh", -4, 12, 2e-6},
		{"GELUTanh", -12, -4, 2e-5},
		{"GELU", -5.6, 12, 4e-6},
		{"GELU", -12, -5.6, 2e-5},
	} {
		c := byName[tc.fn]
		t.Run(c.name, func(t *testing.T) {
			xs := vecSweep(tc.lo, tc.hi, 1_000_000)
			got := make([]float32, len(xs))
			c.vec(got, xs)
			worst, at, worstRef, atRef := 0.0, float32(0), 0.0, float32(0)
			for i, x := range xs {
				want := c.want(float64(x))
				if w32 := float32(want); math.IsInf(float64(w32), 0) {
					assert.Equal(t, w32, got[i], "x=%g", x)
					continue
				}
				if d := relDiff(got[i], want); d > worst {
					worst, at = d, x
				}
				if tc.fn == "Exp" && x < expMin {
					continue // the scalar expf flushes these to zero
				}
				if d := relDiff(got[i], float64(c.scalar(x))); d > worstRef {
					worstRef, atRef = d, x
				}
			}
			t.Logf("[%g, %g]: max rel err vs float64 %.3g at x=%g; max rel diff vs scalar Go %.3g at x=%g",
				tc.lo, tc.hi, worst, at, worstRef, atRef)
			assert.LessOrEqual(t, worst, tc.tol, "worst relative error %.3g at x=%g", worst, at)
		})
	}
}

// TestVecmathSpecial checks the special inputs and the tails: every length
// up to 40 from every offset, in place and not, writes exactly len(dst)
// values equal to a full-length call's.
func TestVecmathSpecial(t *testing.T) { vecmathPaths(t, vecmathSpecial) }

// vecmathSpecial is TestVecmathSpecial on the current path.
func vecmathSpecial(t *testing.T) {
	inf, nan := float32(math.Inf(1)), float32(math.NaN())
	denorm := math.Float32frombits(1)
	specials := []float32{0, float32(math.Copysign(0, -1)), inf, -inf, nan, denorm, -denorm,
		1e-30, -1e-30, expMax, expMin, 88.8, -87.5, -100, -103.9, -104.5, 1e30, -1e30, 5, -5, 40, -40}
	for _, c := range vecCases() {
		t.Run(c.name, func(t *testing.T) {
			got := make([]float32, len(specials))
			c.vec(got, specials)
			for i, x := range specials {
				ref := c.scalar(x)
				switch {
				case math.IsInf(float64(ref), 0):
					assert.Equal(t, ref, got[i], "%s(%g)", c.name, x)
				case ref != ref:
					assert.True(t, got[i] != got[i], "%s(%g) = %g, scalar %g", c.name, x, got[i], ref)
				case c.name == "Exp" && x < expMin:
					want := math.Exp(float64(x))
					assert.InDelta(t, want, float64(got[i]), 1.5e-45, "Exp(%g)", x)
				default:
					assert.InDelta(t, 0, relDiff(got[i], float64(ref)), 4e-6, "%s(%g) = %g, scalar %g", c.name, x, got[i], ref)
				}
			}
			src := vecSweep(-6, 6, 63)
			full := make([]float32, len(src))
			c.vec(full, src)
			for off := range 8 {
				for n := 0; n+off <= 40 && n+off <= len(src); n++ {
					dst := make([]float32, n+off+20)
					for i := range dst {
						dst[i] = -7
					}
					c.vec(dst[off:off+n], src[off:])
					for i, v := range dst {
						want := float32(-7)
						if i >= off && i < off+n {
							want = full[i]
						}
						require.Equal(t, want, v, "off %d n %d i %d", off, n, i)
					}
					inPlace := append(make([]float32, 0, n), src[off:off+n]...)
					c.vec(inPlace, inPlace)
					require.Equal(t, full[off:off+n], inPlace, "in place, off %d n %d", off, n)
				}
			}
		})
	}
}

// TestVecmathSoftmaxRow compares softmaxRow's vector exponentials with the
// scalar path: the results, the maximum and the denominator.
func TestVecmathSoftmaxRow(t *testing.T) { vecmathPaths(t, vecmathSoftmaxRow) }

// vecmathSoftmaxRow is TestVecmathSoftmaxRow on the current path.
func vecmathSoftmaxRow(t *testing.T) {
	defer func(u bool) { useVecmath = u }(useVecmath)
	for _, n := range []int{1, 7, 16, 17, 100, 384, 1000} {
		src := make([]float32, n+5)
		for i := range src {
			src[i] = float32(math.Sin(float64(i)*1.7)) * 30
		}
		if n > 3 {
			src[2] = float32(math.Inf(-1))
		}
		for _, scale := range []float32{1, 0.125} {
			want, got := make([]float32, n+5), make([]float32, n+5)
			useVecmath = false
			wm, ws := softmaxRow(want, src, n, scale)
			useVecmath = true
			gm, gs := softmaxRow(got, src, n, scale)
			assert.Equal(t, wm, gm)
			assert.InDelta(t, 0, math.Abs(gs-ws)/ws, 1e-6, "n %d: sum %g, scalar %g", n, gs, ws)
			for j := range got {
				assert.InDelta(t, float64(want[j]), float64(got[j]), 1e-6*float64(want[j])+1e-30, "n %d j %d", n, j)
			}
			s := vecmath.ExpScaledSum(got[:n], src, scale, gm)
			assert.InDelta(t, gs, s, 1e-12*gs)
		}
	}
}

// vecTestData returns n values of mixed sign and magnitude around an offset,
// as LayerNorm rows have.
func vecTestData(n int, seed float64) []float32 {
	xs := make([]float32, n)
	for i := range xs {
		xs[i] = float32(3 + 2*math.Sin(float64(i)*1.3+seed) + 0.01*math.Cos(float64(i)*7.1))
	}
	return xs
}

// TestVecmathReductions compares Max, Sum64 and SumSqDev64 with the scalar
// Go for every length up to 100 from every offset and for long rows: the
// maximum exactly, the sums within 1e-12 relative.
func TestVecmathReductions(t *testing.T) { vecmathPaths(t, vecmathReductions) }

// vecmathReductions is TestVecmathReductions on the current path.
func vecmathReductions(t *testing.T) {
	defer func(u bool) { useVecmath = u }(useVecmath)
	check := func(src []float32) {
		t.Helper()
		wantMax := float32(math.Inf(-1))
		var wantSum float64
		for _, v := range src {
			wantMax = max(wantMax, v)
			wantSum += float64(v)
		}
		require.Equal(t, wantMax, vecmath.Max(src), "Max, n %d", len(src))
		require.InDelta(t, wantSum, vecmath.Sum64(src), 1e-12*math.Abs(wantSum), "Sum64, n %d", len(src))
		for _, c := range []float64{0, 3.25, wantSum / float64(max(1, len(src)))} {
			useVecmath = false
			want := sumSquares(src, c)
			useVecmath = true
			require.InDelta(t, want, sumSquares(src, c), 1e-12*want, "SumSqDev64, n %d c %g", len(src), c)
			require.Equal(t, sumSquares(src, c), vecmath.SumSqDev64(src, c))
		}
		useVecmath = false
		wm, wv := rowMeanVar(src)
		useVecmath = true
		gm, gv := rowMeanVar(src)
		if len(src) > 0 {
			require.InDelta(t, wm, gm, 1e-12*math.Abs(wm), "mean, n %d", len(src))
			require.InDelta(t, wv, gv, 1e-12*wv, "variance, n %d", len(src))
		}
	}
	data := vecTestData(200, 0.5)
	for off := range 8 {
		for n := 0; n <= 100; n++ {
			check(data[off : off+n])
			neg := append([]float32(nil), data[off:off+n]...)
			for i := range neg {
				neg[i] = -neg[i] - 10
			}
			check(neg) // all negative: the tail's masked lanes must not win
		}
	}
	for _, n := range []int{768, 1000, 3072, 4099} {
		check(vecTestData(n, 1.5))
	}

	// Max's special values: NaN anywhere wins, then +Inf; −Inf only stays
	// −Inf; no values give −Inf; the zeros compare equal.
	inf, nan := float32(math.Inf(1)), float32(math.NaN())
	assert.Equal(t, -inf, vecmath.Max(nil))
	for n := 1; n <= 70; n++ {
		for i := range n {
			src := make([]float32, n)
			for j := range src {
				src[j] = -inf
			}
			require.Equal(t, -inf, vecmath.Max(src), "n %d", n)
			src[i] = -5
			require.Equal(t, float32(-5), vecmath.Max(src), "n %d i %d", n, i)
			src[i] = inf
			require.Equal(t, inf, vecmath.Max(src), "n %d i %d", n, i)
			src[i] = nan
			require.True(t, math.IsNaN(float64(vecmath.Max(src))), "n %d i %d", n, i)
			if n-1-i != i {
				src[n-1-i] = inf
				require.True(t, math.IsNaN(float64(vecmath.Max(src))), "n %d i %d", n, i)
			}
			for j := range src {
				src[j] = -1
			}
			src[i] = float32(math.Copysign(0, -1))
			require.Equal(t, float32(0), vecmath.Max(src), "n %d i %d", n, i)
			src[n-1-i] = 0
			require.Equal(t, float32(0), vecmath.Max(src), "n %d i %d", n, i)
		}
	}
}

// TestVecmathScaleNormalize compares Scale and Normalize (with and without
// beta) with the scalar Go within 1e-6 relative, for every length up to 40
// from every offset, in place and not, and checks that nothing outside dst
// is written.
func TestVecmathScaleNormalize(t *testing.T) { vecmathPaths(t, vecmathScaleNormalize) }

// vecmathScaleNormalize is TestVecmathScaleNormalize on the current path.
func vecmathScaleNormalize(t *testing.T) {
	src, gamma, beta := vecTestData(64, 0), vecTestData(64, 1), vecTestData(64, 2)
	for i := range beta {
		beta[i] -= 3
	}
	const mean, rstd, s = float32(2.9), float32(1.7), float32(0.37)
	fns := []struct {
		name   string
		vec    func(dst, src []float32)
		scalar func(i int, x float32) float32
	}{
		{"Scale", func(dst, src []float32) { vecmath.Scale(dst, src, s) },
			func(_ int, x float32) float32 { return x * s }},
		{"Normalize", func(dst, src []float32) { vecmath.Normalize(dst, src, gamma, beta, mean, rstd) },
			func(i int, x float32) float32 { return (x-mean)*rstd*gamma[i] + beta[i] }},
		{"NormalizeNoBeta", func(dst, src []float32) { vecmath.Normalize(dst, src, gamma, nil, mean, rstd) },
			func(i int, x float32) float32 { return (x - mean) * rstd * gamma[i] }},
	}
	for _, f := range fns {
		t.Run(f.name, func(t *testing.T) {
			for off := range 8 {
				for n := 0; n+off <= 40; n++ {
					in := src[off : off+n]
					dst := make([]float32, n+off+20)
					for i := range dst {
						dst[i] = -7
					}
					f.vec(dst[off:off+n], in)
					for i, v := range dst {
						if i < off || i >= off+n {
							require.Equal(t, float32(-7), v, "off %d n %d i %d", off, n, i)
							continue
						}
						want := f.scalar(i-off, in[i-off])
						require.InDelta(t, 0, relDiff(v, float64(want)), 1e-6, "off %d n %d i %d: %g, scalar %g", off, n, i, v, want)
					}
					inPlace := append(make([]float32, 0, n), in...)
					f.vec(inPlace, inPlace)
					require.Equal(t, dst[off:off+n], inPlace, "in place, off %d n %d", off, n)
				}
			}
		})
	}
}

// TestVecmathSoftmaxRowNaN checks that softmaxRow's vector maximum keeps the
// scalar NaN and −Inf semantics.
func TestVecmathSoftmaxRowNaN(t *testing.T) { vecmathPaths(t, vecmathSoftmaxRowNaN) }

// vecmathSoftmaxRowNaN is TestVecmathSoftmaxRowNaN on the current path.
func vecmathSoftmaxRowNaN(t *testing.T) {
	defer func(u bool) { useVecmath = u }(useVecmath)
	inf, nan := float32(math.Inf(1)), float32(math.NaN())
	for _, n := range []int{1, 5, 16, 17, 40} {
		for _, bad := range []float32{nan, inf, -inf} {
			for _, at := range []int{0, n / 2, n - 1} {
				src := vecTestData(n, 0)
				src[at] = bad
				want, got := make([]float32, n), make([]float32, n)
				useVecmath = false
				wm, ws := softmaxRow(want, src, n, 0.5)
				useVecmath = true
				gm, gs := softmaxRow(got, src, n, 0.5)
				for _, p := range [][2]float64{{float64(wm), float64(gm)}, {ws, gs}} {
					if math.IsNaN(p[0]) {
						require.True(t, math.IsNaN(p[1]), "n %d %g at %d", n, bad, at)
					} else {
						require.InDelta(t, p[0], p[1], 1e-6*math.Abs(p[0]), "n %d %g at %d", n, bad, at)
					}
				}
				for j := range want {
					if math.IsNaN(float64(want[j])) {
						require.True(t, math.IsNaN(float64(got[j])), "n %d %g at %d j %d", n, bad, at, j)
					} else {
						require.InDelta(t, float64(want[j]), float64(got[j]), 1e-6*float64(want[j])+1e-30, "n %d %g at %d j %d", n, bad, at, j)
					}
				}
			}
		}
	}
}

// TestVecmathReLU checks the vector ReLU bit for bit against Go's max(x, 0)
// (+0 for −0, NaN kept) over every length and offset of a tail, in place
// and not, without writing past dst.
func TestVecmathReLU(t *testing.T) { vecmathPaths(t, vecmathReLU) }

// vecmathReLU is TestVecmathReLU on the current path.
func vecmathReLU(t *testing.T) {
	nan, inf := float32(math.NaN()), float32(math.Inf(1))
	src := append([]float32{0, float32(math.Copysign(0, -1)), nan, -nan, inf, -inf, 1e-45, -1e-45,
		math.MaxFloat32, -math.MaxFloat32}, vecTestData(150, 3)...)
	for off := range 8 {
		for n := 0; n+off <= len(src); n++ {
			in := src[off : off+n]
			dst := make([]float32, n+16)
			for i := range dst {
				dst[i] = -7
			}
			vecmath.ReLU(dst[:n], in)
			for i, v := range dst {
				if i >= n {
					require.Equal(t, float32(-7), v, "off %d n %d: written past dst at %d", off, n, i)
					continue
				}
				want := max(in[i], 0)
				if want != want {
					require.True(t, v != v, "off %d n %d i %d: ReLU(NaN) = %g", off, n, i, v)
					continue
				}
				require.Equal(t, math.Float32bits(want), math.Float32bits(v), "off %d n %d i %d: ReLU(%g)", off, n, i, in[i])
			}
			inPlace := append([]float32(nil), in...)
			vecmath.ReLU(inPlace, inPlace)
			for i := range inPlace {
				assert.Equal(t, math.Float32bits(dst[i]), math.Float32bits(inPlace[i]), "in place, off %d n %d i %d", off, n, i)
			}
		}
	}
}

// TestVecmathPathsAgree checks that the AVX-512 and AVX2 paths give the same
// bits (any NaN for a NaN) for the elementwise functions, over a sweep with
// every tail length and the special values, and the same maximum.
func TestVecmathPathsAgree(t *testing.T) {
	if !vecmath.Available || !xcpu.X86.HasAVX512F || !xcpu.X86.HasAVX2 || !xcpu.X86.HasFMA {
		t.Skip("needs the vecmath assembly, AVX-512F, AVX2 and FMA")
	}
	defer func(v bool) { vecmath.AVX512 = v }(vecmath.AVX512)
	inf, nan := float32(math.Inf(1)), float32(math.NaN())
	src := append(vecSweep(-120, 120, 100_000), 0, float32(math.Copysign(0, -1)), inf, -inf, nan,
		math.Float32frombits(1), -math.Float32frombits(1), 88.72, 88.73, -87.34, -103.9, -104.5)
	gamma, beta := vecTestData(len(src), 1), vecTestData(len(src), 2)
	fns := []struct {
		name string
		f    func(dst, src []float32)
	}{
		{"Exp", vecmath.Exp}, {"SiLU", vecmath.SiLU}, {"GELUTanh", vecmath.GELUTanh}, {"GELU", vecmath.GELU},
		{"ReLU", vecmath.ReLU},
		{"Scale", func(dst, src []float32) { vecmath.Scale(dst, src, 0.37) }},
		{"Normalize", func(dst, src []float32) { vecmath.Normalize(dst, src, gamma, beta, 2.9, 1.7) }},
		{"NormalizeNoBeta", func(dst, src []float32) { vecmath.Normalize(dst, src, gamma, nil, 2.9, 1.7) }},
		{"ExpScaledSum", func(dst, src []float32) { vecmath.ExpScaledSum(dst, src, 0.125, 3) }},
	}
	for _, fn := range fns {
		t.Run(fn.name, func(t *testing.T) {
			for _, n := range []int{len(src), len(src) - 1, 1, 7, 9, 15, 17, 23} {
				in := src[len(src)-n:]
				want, got := make([]float32, n), make([]float32, n)
				vecmath.AVX512 = true
				fn.f(want, in)
				vecmath.AVX512 = false
				fn.f(got, in)
				for i := range want {
					if want[i] != want[i] {
						require.True(t, got[i] != got[i], "n %d: %s(%g) = %g, AVX-512 NaN", n, fn.name, in[i], got[i])
						continue
					}
					require.Equal(t, math.Float32bits(want[i]), math.Float32bits(got[i]),
						"n %d: %s(%g) = %g, AVX-512 %g", n, fn.name, in[i], got[i], want[i])
				}
			}
		})
	}
	for n := range 70 {
		in := src[len(src)-n:]
		vecmath.AVX512 = true
		want := vecmath.Max(in)
		vecmath.AVX512 = false
		got := vecmath.Max(in)
		if want != want {
			require.True(t, got != got, "Max, n %d", n)
		} else {
			require.Equal(t, want, got, "Max, n %d", n)
		}
	}
}

// TestVecmathConformanceAVX2 runs the conformance suite on the AVX2 path
// where the backend would otherwise take the AVX-512 one.
func TestVecmathConformanceAVX2(t *testing.T) {
	if !vecmath.Available || !vecmath.AVX512 || !xcpu.X86.HasAVX2 || !xcpu.X86.HasFMA {
		t.Skip("TestConformance already runs the only vecmath path of this CPU")
	}
	defer func(v bool) { vecmath.AVX512 = v }(vecmath.AVX512)
	vecmath.AVX512 = false
	kerneltest.Run(t, New())
}

// BenchmarkVecmath times ReLU, Exp, GELU and ExpScaledSum over a million values
// on each path.
func BenchmarkVecmath(b *testing.B) {
	if !vecmath.Available {
		b.Skip("no vecmath assembly on this CPU")
	}
	defer func(v bool) { vecmath.AVX512 = v }(vecmath.AVX512)
	src := vecSweep(-10, 10, 1<<20-1)
	dst := make([]float32, len(src))
	for _, p := range []struct {
		name   string
		avx512 bool
		has    bool
	}{
		{"AVX512", true, xcpu.X86.HasAVX512F},
		{"AVX2", false, xcpu.X86.HasAVX2 && xcpu.X86.HasFMA},
	} {
		if !p.has {
			continue
		}
		vecmath.AVX512 = p.avx512
		for _, fn := range []struct {
			name string
			f    func()
		}{
			{"ReLU", func() { vecmath.ReLU(dst, src) }},
			{"Exp", func() { vecmath.Exp(dst, src) }},
			{"GELU", func() { vecmath.GELU(dst, src) }},
			{"ExpScaledSum", func() { vecmath.ExpScaledSum(dst, src, 0.125, 1.25) }},
		} {
			b.Run(p.name+"/"+fn.name, func(b *testing.B) {
				b.SetBytes(int64(8 * len(src)))
				for b.Loop() {
					fn.f()
				}
			})
		}
	}
}

// TestVecmathReLULengths checks ReLU against Go's max(x, 0) at every length
// up to 300 from an odd offset, in place and not.
func TestVecmathReLULengths(t *testing.T) {
	vecmathPaths(t, func(t *testing.T) {
		src := vecSweep(-3, 3, 400)
		src[7], src[100] = float32(math.NaN()), float32(math.Copysign(0, -1))
		for n := range 301 {
			in := src[3 : 3+n]
			got := make([]float32, n)
			vecmath.ReLU(got, in)
			inPlace := slices.Clone(in)
			vecmath.ReLU(inPlace, inPlace)
			for i, x := range in {
				want := max(x, 0)
				if want != want {
					require.True(t, got[i] != got[i] && inPlace[i] != inPlace[i], "n %d: relu(NaN)", n)
					continue
				}
				require.Equal(t, math.Float32bits(want), math.Float32bits(got[i]), "n %d: relu(%g)", n, x)
				require.Equal(t, math.Float32bits(want), math.Float32bits(inPlace[i]), "n %d: relu(%g) in place", n, x)
			}
		}
	})
}

// TestVecmathMaxWindows checks MaxWindows against Go's max folded over
// each window, bit for bit (any NaN for a NaN), over special values, for
// channel counts the AVX-512 loop takes and others, overlapping windows
// and not, without writing past dst.
func TestVecmathMaxWindows(t *testing.T) {
	vecmathPaths(t, func(t *testing.T) {
		nan, inf, negz := float32(math.NaN()), float32(math.Inf(1)), float32(math.Copysign(0, -1))
		special := []float32{0, negz, nan, inf, -inf, 1, -1, 1e-45, math.MaxFloat32}
		for _, c := range []struct{ c, n, step, taps, tapStep int }{
			{16, 5, 32, 3, 16},  // a 3-wide window of stride 2, as ResNet's max pool
			{64, 4, 128, 3, 64}, // the same over 64 channels
			{48, 3, 48, 2, 96},  // stride 1, dilation 2
			{32, 1, 0, 1, 32},   // one tap: a copy
			{16, 6, 16, 4, 16},  // windows overlapping by three taps
			{20, 3, 40, 3, 20},  // channels no multiple of 16
			{3, 7, 6, 3, 3},     // an RGB image
		} {
			t.Run(fmt.Sprintf("c=%d/n=%d/step=%d/taps=%d/tapStep=%d", c.c, c.n, c.step, c.taps, c.tapStep), func(t *testing.T) {
				src := vecTestData((c.n-1)*c.step+(c.taps-1)*c.tapStep+c.c, 2)
				for i := range src {
					if i%5 == 0 {
						src[i] = special[(i/5)%len(special)]
					}
				}
				dst := make([]float32, c.n*c.c+16)
				for i := range dst {
					dst[i] = -7
				}
				vecmath.MaxWindows(dst[:c.n*c.c], src, c.c, c.n, c.step, c.taps, c.tapStep)
				for i, v := range dst {
					if i >= c.n*c.c {
						require.Equal(t, float32(-7), v, "written past dst at %d", i)
						continue
					}
					j, ch := i/c.c, i%c.c
					want := src[j*c.step+ch]
					for tap := 1; tap < c.taps; tap++ {
						want = max(want, src[j*c.step+tap*c.tapStep+ch])
					}
					if want != want {
						require.True(t, v != v, "window %d channel %d: %g, want NaN", j, ch, v)
						continue
					}
					require.Equal(t, math.Float32bits(want), math.Float32bits(v), "window %d channel %d", j, ch)
				}
			})
		}
	})
}

// TestVecmathMaxOf checks MaxOf against Go's max bit for bit (any NaN for a
// NaN) on every pair of special values and a sweep, at every length and
// offset of a tail, in place and not, without writing past dst.
func TestVecmathMaxOf(t *testing.T) {
	vecmathPaths(t, func(t *testing.T) {
		nan, inf, negz := float32(math.NaN()), float32(math.Inf(1)), float32(math.Copysign(0, -1))
		special := []float32{0, negz, nan, inf, -inf, 1, -1, 1e-45, -1e-45, math.MaxFloat32}
		var a, b []float32
		for _, x := range special {
			for _, y := range special {
				a, b = append(a, x), append(b, y)
			}
		}
		a, b = append(a, vecTestData(70, 3)...), append(b, vecTestData(70, 5)...)
		for off := range 3 {
			for n := 0; n+off <= len(a); n += 1 + n/16 {
				x, y := a[off:off+n], b[off:off+n]
				dst := make([]float32, n+16)
				for i := range dst {
					dst[i] = -7
				}
				vecmath.MaxOf(dst[:n], x, y)
				inPlace := slices.Clone(x)
				vecmath.MaxOf(inPlace, inPlace, y)
				for i, v := range dst {
					if i >= n {
						require.Equal(t, float32(-7), v, "off %d n %d: written past dst at %d", off, n, i)
						continue
					}
					want := max(x[i], y[i])
					if want != want {
						require.True(t, v != v && inPlace[i] != inPlace[i], "off %d n %d i %d: max(%g, %g) = %g", off, n, i, x[i], y[i], v)
						continue
					}
					require.Equal(t, math.Float32bits(want), math.Float32bits(v), "off %d n %d i %d: max(%g, %g)", off, n, i, x[i], y[i])
					require.Equal(t, math.Float32bits(want), math.Float32bits(inPlace[i]), "in place: off %d n %d i %d", off, n, i)
				}
			}
		}
	})
}
