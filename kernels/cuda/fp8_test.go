//go:build cuda

package cuda

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/zbench/zbench/kernels"
	"github.com/zbench/zbench/kernels/check"
	"github.com/zbench/zbench/kernels/cpu"
	"github.com/zbench/zbench/kernels/kerneltest"
)

// fp8Pairs are FP8MatMul's pairings of a's and b's formats.
var fp8Pairs = [][2]kernels.DType{{kernels.E4M3, kernels.E4M3}, {kernels.E4M3, kernels.E5M2}, {kernels.E5M2, kernels.E4M3}}

// dryFP8 calls every FP8 operation with valid arguments: both casts from
// every float dtype into both formats, with and without the amax, and
// FP8MatMul in every pairing into every out dtype, per tensor and per row,
// with a bias and an activation, on K aligned and not.
func dryFP8(t *testing.T, b *Backend) []error {
	a := func(dt kernels.DType, shape ...int) *kernels.Tensor {
		x, err := b.Alloc(dt, shape...)
		require.NoError(t, err)
		return x
	}
	f32 := kernels.F32
	var errs []error
	for _, q := range []kernels.DType{kernels.E4M3, kernels.E5M2} {
		for _, dt := range kernels.FloatTypes {
			x := a(dt, 33, 77)
			errs = append(errs, b.CastFP8(a(q, 33, 77), a(f32, 1), x, a(f32, 1)),
				b.CastFP8(a(q, 33, 77), nil, x, a(f32, 1)),
				b.CastFP8Rows(a(q, 33, 77), a(f32, 33), x))
		}
	}
	for _, pr := range fp8Pairs {
		for _, dt := range kernels.FloatTypes {
			for _, k := range []int{256, 77} {
				errs = append(errs,
					b.FP8MatMul(a(dt, 130, 70), a(pr[0], 130, k), a(pr[1], 70, k),
						kernels.FP8MatMulParams{AScaleInv: a(f32, 1), BScaleInv: a(f32, 1)}),
					b.FP8MatMul(a(dt, 2, 65, 70), a(pr[0], 2, 65, k), a(pr[1], 70, k),
						kernels.FP8MatMulParams{AScaleInv: a(f32, 130), BScaleInv: a(f32, 70), Bias: a(f32, 70), Act: kernels.ActGELU}))
			}
		}
	}
	return errs
}

// TestFP8Launch checks FP8's refusal on devices without it (an error
// wrapping kernels.ErrUnsupported that names the capability, and no
// launch), and on compute capabilities 8.9 (fp8.cu's compute_89 PTX) and
// 9.0 (the sm_90a cubin, whose kernels are the compute_80 PTX's) every
// launch against the kernel's PTX parameters, the hardware's limits and
// the geometry fp8.cu's comment states.
func TestFP8Launch(t *testing.T) {
	for _, cc := range [][2]int{{7, 5}, {8, 0}, {8, 6}, {10, 0}, {12, 0}} {
		t.Run(fmt.Sprintf("cc=%d.%d", cc[0], cc[1]), func(t *testing.T) {
			var recs []launchRec
			errs := dryFP8(t, dryRun(cc[0], cc[1], &recs))
			for _, err := range errs {
				require.ErrorIs(t, err, kernels.ErrUnsupported)
				assert.ErrorContains(t, err, fmt.Sprintf("FP8 needs compute capability 8.9 or 9.0; this device is %d.%d", cc[0], cc[1]))
			}
			assert.Empty(t, recs, "launches on a device without FP8")
		})
	}
	for _, c := range []struct {
		cc     [2]int
		target string
	}{{[2]int{8, 9}, "compute_89"}, {[2]int{9, 0}, "compute_80"}} {
		t.Run(fmt.Sprintf("cc=%d.%d", c.cc[0], c.cc[1]), func(t *testing.T) {
			var recs []launchRec
			for _, err := range dryFP8(t, dryRun(c.cc[0], c.cc[1], &recs)) {
				require.NoError(t, err)
			}
			params := ptxParams(t, c.target)
			seen := map[string]bool{}
			for _, r := range recs {
				seen[r.name] = true
				if !checkSignature(t, params, r) {
					continue
				}
				assert.Zero(t, r.smem, r.name)
				switch {
				case len(r.name) > 5 && r.name[:5] == "fp8mm":
					assert.Equal(t, dim3{x: fp8mmThreads, y: 1, z: 1}, r.block, r.name)
					m, n := int(r.args[6].(int32)), int(r.args[7].(int32))
					assert.Equal(t, dim3{x: ceilDiv(n, fp8mmTile), y: ceilDiv(m, fp8mmTile), z: 1}, r.grid, r.name)
				default:
					assert.Equal(t, dim3{x: fp8CastThreads, y: 1, z: 1}, r.block, r.name)
					assert.LessOrEqual(t, r.grid.x, fp8CastMaxBlocks, r.name)
				}
			}
			for _, dt := range kernels.FloatTypes {
				s := dt.String()
				must := []string{"castfp8_" + s, "castfp8_rows_" + s}
				for _, pr := range fp8Pairs {
					must = append(must, fp8mmKernel(pr[0], pr[1], dt))
				}
				for _, name := range must {
					assert.True(t, seen[name], "no launch of %s", name)
				}
			}
			// The per-row flags and the sizes of one product.
			for _, r := range recs {
				if r.name == "fp8mm_e4m3_e5m2_bf16" && r.args[6].(int32) == 130 && r.args[11].(int32) == int32(kernels.ActGELU) {
					assert.Equal(t, []any{int32(130), int32(70), int32(r.args[8].(int32)), int32(1), int32(1), int32(kernels.ActGELU)}, r.args[6:])
					assert.NotZero(t, r.args[5], "bias")
				}
			}
		})
	}
}

// fp8GPU returns a backend on the first GPU and a CPU backend, skipping
// the test when there is no GPU (failing it with ZBENCH_REQUIRE_GPU=1) or
// the GPU has no FP8.
func fp8GPU(t *testing.T) (*Backend, *cpu.Backend) {
	t.Helper()
	b := qmmGPU(t)
	if err := b.fp8Capable("FP8"); err != nil {
		t.Skip(err)
	}
	return b, cpu.New()
}

// fp8Ops returns be's FP8 ops, failing the test with kernels.Group's
// error where it has none.
func fp8Ops(t *testing.T, be kernels.Backend) kernels.FP8 {
	t.Helper()
	f, err := kernels.Group[kernels.FP8](be)
	require.NoError(t, err)
	return f
}

// fp8HostTensor uploads vals, rounded to dt, to be as a tensor of shape.
func fp8HostTensor(t *testing.T, be kernels.Backend, dt kernels.DType, vals []float32, shape ...int) *kernels.Tensor {
	t.Helper()
	x, err := kernels.FromFloat32(be, dt, vals, shape...)
	require.NoError(t, err)
	t.Cleanup(func() { _ = be.Free(x) })
	return x
}

// fp8Alloc allocates a tensor on be, freed at the end of the test.
func fp8Alloc(t *testing.T, be kernels.Backend, dt kernels.DType, shape ...int) *kernels.Tensor {
	t.Helper()
	x, err := be.Alloc(dt, shape...)
	require.NoError(t, err)
	t.Cleanup(func() { _ = be.Free(x) })
	return x
}

// fp8Bytes returns x's bytes.
func fp8Bytes(t *testing.T, x *kernels.Tensor) []byte {
	t.Helper()
	out := make([]byte, x.Bytes())
	require.NoError(t, x.Backend().Download(out, x))
	return out
}

// fp8CastInputs are n values meant to hit every case of the encoding once
// scaled by 1: both signs of NaN, infinities and zero, magnitudes past
// either format's largest value and between its last two, subnormals of
// both formats, exact midpoints between codes (ties), and N(0, σ) values
// over many decades.
func fp8CastInputs(rng *rand.Rand, n int) []float32 {
	special := []float32{float32(math.NaN()), math.Float32frombits(0xffc00000), float32(math.Inf(1)), float32(math.Inf(-1)),
		0, float32(math.Copysign(0, -1)), 448, 449, 464, 465, 480, -500, 57344, 61440, 65536, -1e30,
		1.0 / 512, 3.0 / 1024, 1.0 / 1024, 1e-7, -1e-7, 1.0 / 65536, 3.0 / 131072, 1.0 / 131072, 1e-45, 1.0625, 1.1875, -1.125, 1.375}
	v := make([]float32, n)
	for i := range v {
		if i < len(special) {
			v[i] = special[i]
			continue
		}
		v[i] = float32(rng.NormFloat64() * math.Pow(10, float64(rng.IntN(14)-8)))
	}
	return v
}

// TestFP8CastGPU checks CastFP8 against the CPU backend byte for byte, in
// both formats from every float dtype, on special values, ties and random
// ones, with scales of 1, a fraction and a NaN (NaN·NaN takes the scale's
// sign, as kernels.EncodeFP8 defines it), and the amax exactly
// (NaN where x holds one).
func TestFP8CastGPU(t *testing.T) {
	g, c := fp8GPU(t)
	rng := rand.New(rand.NewPCG(17, 89))
	const n = 100003
	for _, q := range []kernels.DType{kernels.E4M3, kernels.E5M2} {
		for _, dt := range kernels.FloatTypes {
			for _, s := range []float32{1, 0.37, 0, float32(math.NaN()), math.Float32frombits(0xffc00000)} {
				for _, nan := range []bool{true, false} {
					vals := fp8CastInputs(rng, n)
					if !nan {
						vals = vals[2:]
					}
					name := fmt.Sprintf("%v from %v scale %v nan %v", q, dt, s, nan)
					var outs [2][]byte
					var amaxes [2]float32
					for i, be := range []kernels.Backend{g, c} {
						x := fp8HostTensor(t, be, dt, vals, len(vals))
						sc := fp8HostTensor(t, be, kernels.F32, []float32{s}, 1)
						out, am := fp8Alloc(t, be, q, len(vals)), fp8Alloc(t, be, kernels.F32, 1)
						require.NoError(t, fp8Ops(t, be).CastFP8(out, am, x, sc), name)
						outs[i] = fp8Bytes(t, out)
						amaxes[i] = math.Float32frombits(binary.LittleEndian.Uint32(fp8Bytes(t, am)))
					}
					for i := range outs[0] {
						if outs[0][i] != outs[1][i] {
							t.Fatalf("%s: element %d (%v): GPU code %#02x, CPU %#02x", name, i, vals[i], outs[0][i], outs[1][i])
						}
					}
					if nan {
						assert.True(t, amaxes[0] != amaxes[0], "%s: amax %v, want NaN", name, amaxes[0])
					} else {
						assert.Equal(t, amaxes[1], amaxes[0], "%s: amax", name)
					}
				}
			}
		}
	}
}

// TestFP8CastRowsGPU checks CastFP8Rows against the CPU backend byte for
// byte (codes and scaleInv) on rows of every range, a row of zeros, rows
// with an infinity and a NaN, a row of subnormals whose fp8_max/amax
// overflows, and rows longer and shorter than the block.
func TestFP8CastRowsGPU(t *testing.T) {
	g, c := fp8GPU(t)
	rng := rand.New(rand.NewPCG(3, 5))
	for _, k := range []int{1, 77, 256, 4099} {
		const rows = 12
		vals := make([]float32, rows*k)
		for r := range rows {
			for i := range k {
				v := float32(rng.NormFloat64() * math.Pow(10, float64(r-6)))
				switch r {
				case 2:
					v = 0
				case 3:
					v = 1e-40 * float32(i%7)
				}
				vals[r*k+i] = v
			}
		}
		vals[4*k+k/2] = float32(math.Inf(-1))
		vals[5*k] = float32(math.NaN())
		for _, q := range []kernels.DType{kernels.E4M3, kernels.E5M2} {
			for _, dt := range kernels.FloatTypes {
				name := fmt.Sprintf("%v from %v k %d", q, dt, k)
				var outs, invs [2][]byte
				for i, be := range []kernels.Backend{g, c} {
					x := fp8HostTensor(t, be, dt, vals, rows, k)
					out, inv := fp8Alloc(t, be, q, rows, k), fp8Alloc(t, be, kernels.F32, rows)
					require.NoError(t, fp8Ops(t, be).CastFP8Rows(out, inv, x), name)
					outs[i], invs[i] = fp8Bytes(t, out), fp8Bytes(t, inv)
				}
				require.Equal(t, invs[1], invs[0], "%s: scaleInv", name)
				for i := range outs[0] {
					if outs[0][i] != outs[1][i] {
						t.Fatalf("%s: element %d (%v): GPU code %#02x, CPU %#02x", name, i, vals[i], outs[0][i], outs[1][i])
					}
				}
			}
		}
	}
}

// fp8RandCodes returns n codes of dt of N(0, σ) values (finite) and the
// values.
func fp8RandCodes(rng *rand.Rand, dt kernels.DType, sigma float64, n int) ([]byte, []float64) {
	enc, dec := kernels.E4M3FromFloat32, kernels.E4M3ToFloat32
	if dt == kernels.E5M2 {
		enc, dec = kernels.E5M2FromFloat32, kernels.E5M2ToFloat32
	}
	codes, vals := make([]byte, n), make([]float64, n)
	for i := range codes {
		codes[i] = enc(float32(rng.NormFloat64() * sigma))
		vals[i] = float64(dec(codes[i]))
	}
	return codes, vals
}

// fp8mmRun runs FP8MatMul on be with a [m, k] and b [n, k] of those codes,
// per-row scales sa [m], sb [n] and a bias, and returns out as float64.
func fp8mmRun(t *testing.T, be kernels.Backend, pr [2]kernels.DType, dt kernels.DType, ac, bc []byte, sa, sb, bias []float32,
	m, n, k int, act kernels.Activation) []float64 {
	t.Helper()
	a, b := fp8Alloc(t, be, pr[0], m, k), fp8Alloc(t, be, pr[1], n, k)
	require.NoError(t, be.Upload(a, ac))
	require.NoError(t, be.Upload(b, bc))
	out := fp8Alloc(t, be, dt, m, n)
	p := kernels.FP8MatMulParams{AScaleInv: fp8HostTensor(t, be, kernels.F32, sa, len(sa)),
		BScaleInv: fp8HostTensor(t, be, kernels.F32, sb, len(sb)), Act: act}
	if bias != nil {
		p.Bias = fp8HostTensor(t, be, kernels.F32, bias, n)
	}
	require.NoError(t, fp8Ops(t, be).FP8MatMul(out, a, b, p))
	got, err := kernels.ToFloat32(out)
	require.NoError(t, err)
	o := make([]float64, len(got))
	for i, v := range got {
		o[i] = float64(v)
	}
	return o
}

// fp8mmCheck compares out with act of the float64 product of the decoded
// codes: each element within the float32-sum bound, K·2⁻²⁴ of
// Σ|a·b|·sa·sb (γ_K, the worst case of any order of float32 sums), a few
// float32 roundings of the epilogue and half an ulp of the out dtype (or
// half its smallest subnormal), plus accErr·Σ|a·b|·sa·sb where the sums
// are not float32 ones (fp8AccErr); with an activation (whose slope is at
// most 1.13 for GELU) 1.2 times that and a few float32 ulps of the result.
// It returns the largest error relative to Σ|a·b|·sa·sb.
func fp8mmCheck(t *testing.T, name string, out []float64, av, bv []float64, sa, sb, bias []float32, m, n, k int, dt kernels.DType,
	act kernels.Activation, accErr float64) float64 {
	t.Helper()
	ulp := map[kernels.DType]float64{kernels.F32: 0x1p-24, kernels.F16: 0x1p-11, kernels.BF16: 0x1p-8}[dt]
	tiny := map[kernels.DType]float64{kernels.F32: 0x1p-150, kernels.F16: 0x1p-25, kernels.BF16: 0x1p-134}[dt] // half the smallest subnormal
	worst := 0.0
	for i := range m {
		for j := range n {
			var s, abs float64
			for x := range k {
				p := av[i*k+x] * bv[j*k+x]
				s += p
				abs += math.Abs(p)
			}
			sc := float64(sa[min(i, len(sa)-1)]) * float64(sb[min(j, len(sb)-1)])
			want := s * sc
			if bias != nil {
				want += float64(bias[j])
			}
			got := out[i*n+j]
			mag := abs * sc
			bound := ((float64(k)+4)*0x1p-24+accErr)*mag + ulp*(math.Abs(want)+mag*(float64(k)*0x1p-24+accErr)) + tiny
			if act != kernels.ActNone {
				want = kerneltest.RefAct(act, want)
				bound = 1.2*bound + 8*0x1p-24*math.Abs(want) + 1e-7
			}
			if math.Abs(got-want) > bound {
				t.Fatalf("%s: out[%d, %d] = %v, want %v within %.3g (Σ|ab|·scales %.3g)", name, i, j, got, want, bound, mag)
			}
			if mag > 0 {
				worst = max(worst, math.Abs(got-want)/mag)
			}
		}
	}
	if accErr > 0 {
		t.Logf("%s: largest error / Σ|a·b|·scales %.3g (accErr %.3g)", name, worst, accErr)
	}
	return worst
}

// fp8SM90AccErr bounds, relative to Σ|a·b|, the error the Hopper kernel's
// tensor cores add to a sum: Hopper's FP8 wgmma does not sum in float32,
// and fp8mm_sm90_A_B_T promotes its sums to float32 every 128 of K, so
// that this error does not grow with K (fp8.cu's file comment). On an
// H100 the largest measured, float32 out, were 1.9e-4 (one 128-deep
// stage, signs mixed) and 7.2e-4 (TestFP8AccumulatorGPU: K = 8192, all
// positive, so that the truncations add up): 2⁻⁹ is 2.7 times the larger.
const fp8SM90AccErr = 0x1p-9

// fp8AccErr is fp8mmCheck's accErr for FP8MatMul of m×n×k on be:
// fp8SM90AccErr where FP8MatMul takes the Hopper kernel for 16-byte aligned
// operands, else 0 (float32 sums).
func fp8AccErr(be kernels.Backend, m, n, k int) float64 {
	if g, ok := be.(*Backend); ok && g.chooseFP8MatMul(check.FP8Dims{M: m, N: n, K: k}, 256, 512) == fp8mmSM90 {
		return fp8SM90AccErr
	}
	return 0
}

// fp8mmOperands draws the operands of an m×n×k FP8MatMul of the pairing
// pr: a's and b's codes and values, a scale inverse per row of each
// (their first element also serving as the per-tensor one) and a bias.
func fp8mmOperands(rng *rand.Rand, pr [2]kernels.DType, m, n, k int) (ac []byte, av []float64, bc []byte, bv []float64, sa, sb, bias []float32) {
	ac, av = fp8RandCodes(rng, pr[0], 20, m*k)
	bc, bv = fp8RandCodes(rng, pr[1], 50, n*k)
	sa, sb, bias = make([]float32, m), make([]float32, n), make([]float32, n)
	for i := range sa {
		sa[i] = float32(0.01 + 0.01*rng.Float64())
	}
	for i := range sb {
		sb[i] = float32(0.001 + 0.001*rng.Float64())
		bias[i] = float32(rng.Float64()*2 - 1)
	}
	return ac, av, bc, bv, sa, sb, bias
}

// TestFP8MatMulGPU checks FP8MatMul in every pairing into every out dtype
// against the float64 product within the float32-sum bound, on tails of
// M, N and K (K aligned to 16 and not, and a's rows unaligned), per-tensor
// and per-row scales, with a bias; and with the GELU against the float64
// reference, within that bound widened by the activation's slope.
func TestFP8MatMulGPU(t *testing.T) {
	g, _ := fp8GPU(t)
	rng := rand.New(rand.NewPCG(8, 9))
	for _, shape := range [][3]int{{1, 5, 16}, {7, 33, 48}, {64, 64, 64}, {130, 200, 1000}, {257, 70, 77}, {200, 300, 2048}} {
		m, n, k := shape[0], shape[1], shape[2]
		acc := fp8AccErr(g, m, n, k)
		for _, pr := range fp8Pairs {
			ac, av, bc, bv, sa, sb, bias := fp8mmOperands(rng, pr, m, n, k)
			for _, dt := range kernels.FloatTypes {
				name := fmt.Sprintf("%v×%v into %v, %dx%dx%d", pr[0], pr[1], dt, m, n, k)
				out := fp8mmRun(t, g, pr, dt, ac, bc, sa[:1], sb[:1], nil, m, n, k, kernels.ActNone)
				fp8mmCheck(t, name+" per tensor", out, av, bv, sa[:1], sb[:1], nil, m, n, k, dt, kernels.ActNone, acc)
				out = fp8mmRun(t, g, pr, dt, ac, bc, sa, sb, bias, m, n, k, kernels.ActNone)
				fp8mmCheck(t, name+" per row, bias", out, av, bv, sa, sb, bias, m, n, k, dt, kernels.ActNone, acc)
				out = fp8mmRun(t, g, pr, dt, ac, bc, sa, sb, bias, m, n, k, kernels.ActGELU)
				fp8mmCheck(t, name+" per row, bias, gelu", out, av, bv, sa, sb, bias, m, n, k, dt, kernels.ActGELU, acc)
			}
		}
	}
}

// TestFP8AccumulatorGPU measures the sums' precision over a long K
// (Hopper's FP8 tensor cores keep fewer bits than float32 in their sums,
// which DeepSeek-V3 works around by promoting to float32 registers every
// 128 of K): a K = 8192 product of E4M3 values of one sign (no
// cancellation, so that lost bits show) against the float64 reference, on
// the mma.sync kernel (float32 sums: within the float32-sum bound) and, on
// compute capability 9.0, the Hopper kernel (within that bound and
// fp8SM90AccErr), logging the largest error relative to Σ|a·b| of each
// next to the CPU backend's (float32 SGEMM).
func TestFP8AccumulatorGPU(t *testing.T) {
	g, c := fp8GPU(t)
	rng := rand.New(rand.NewPCG(1, 17))
	const m, n, k = 128, 256, 8192
	pr := [2]kernels.DType{kernels.E4M3, kernels.E4M3}
	ac, av := fp8RandCodes(rng, kernels.E4M3, 1, m*k)
	bc, bv := fp8RandCodes(rng, kernels.E4M3, 1, n*k)
	for i := range ac { // all positive: |Σ| = Σ|·|
		ac[i] &^= 0x80
		av[i] = math.Abs(av[i])
	}
	for i := range bc {
		bc[i] &^= 0x80
		bv[i] = math.Abs(bv[i])
	}
	one := []float32{1}
	verify := func(name string, out []float64, accErr float64) {
		e := fp8mmCheck(t, fmt.Sprintf("K=%d on %s", k, name), out, av, bv, one, one, nil, m, n, k, kernels.F32, kernels.ActNone, accErr)
		t.Logf("K=%d E4M3×E4M3 on %s: largest error / Σ|a·b| %.3g (float32-sum bound %.3g, accErr %.3g)", k, name, e, float64(k)*0x1p-24, accErr)
	}
	verify("cpu", fp8mmRun(t, c, pr, kernels.F32, ac, bc, one, one, nil, m, n, k, kernels.ActNone), 0)
	verify("cuda mma", fp8mmRunPath(t, g, fp8mmMMA, pr, kernels.F32, ac, bc, one, one, nil, m, n, k, kernels.ActNone), 0)
	if g.major == 9 && g.minor == 0 {
		verify("cuda hopper", fp8mmRunPath(t, g, fp8mmSM90, pr, kernels.F32, ac, bc, one, one, nil, m, n, k, kernels.ActNone), fp8SM90AccErr)
	}
}

// TestFP8SM90Launch checks, without a GPU, FP8MatMul's choice of
// fp8mm_sm90_A_B_T (only on compute capability 9.0, only for M ≥ 128,
// N ≥ 128, K ≥ 128, K % 16 == 0 and 16-byte aligned operands) and its
// launches against the kernel's PTX parameters, the 227 KiB of shared
// memory a block may have and fp8.cu's launch comment.
func TestFP8SM90Launch(t *testing.T) {
	assert.Equal(t, 197728, fp8SM90Smem, "fp8.cu's sm90::SMEM")
	assert.LessOrEqual(t, fp8SM90Smem, 227<<10)
	for _, cc := range [][2]int{{7, 5}, {8, 0}, {8, 9}, {9, 0}, {10, 0}, {12, 0}} {
		var recs []launchRec
		b := dryRun(cc[0], cc[1], &recs)
		want := fp8mmMMA
		if cc == [2]int{9, 0} {
			want = fp8mmSM90
		}
		assert.Equal(t, want, b.chooseFP8MatMul(check.FP8Dims{M: 128, N: 256, K: 128}, 256, 512), "cc %v", cc)
	}
	var recs []launchRec
	b := dryRun(9, 0, &recs)
	for _, c := range []struct {
		m, n, k int
		a, w    devptr
		want    fp8mmPath
	}{
		{128, 256, 128, 256, 512, fp8mmSM90}, {300, 520, 1040, 4096, 8192, fp8mmSM90}, {1 << 16, 1 << 14, 16 << 10, 256, 512, fp8mmSM90},
		{127, 256, 128, 256, 512, fp8mmMMA}, {128, 127, 128, 256, 512, fp8mmMMA}, {128, 128, 128, 256, 512, fp8mmSM90},
		{128, 255, 128, 256, 512, fp8mmSM90}, {128, 256, 112, 256, 512, fp8mmMMA},
		{128, 256, 144, 256, 512, fp8mmSM90}, {128, 256, 136, 256, 512, fp8mmMMA}, {128, 256, 128, 264, 512, fp8mmMMA},
		{128, 256, 128, 256, 520, fp8mmMMA},
	} {
		assert.Equal(t, c.want, b.chooseFP8MatMul(check.FP8Dims{M: c.m, N: c.n, K: c.k}, c.a, c.w), "%+v", c)
	}
	a := func(dt kernels.DType, shape ...int) *kernels.Tensor {
		x, err := b.Alloc(dt, shape...)
		require.NoError(t, err)
		return x
	}
	f32 := kernels.F32
	for _, pr := range fp8Pairs {
		for _, dt := range kernels.FloatTypes {
			require.NoError(t, b.FP8MatMul(a(dt, 2, 150, 300), a(pr[0], 2, 150, 256), a(pr[1], 300, 256),
				kernels.FP8MatMulParams{AScaleInv: a(f32, 300), BScaleInv: a(f32, 300), Bias: a(f32, 300), Act: kernels.ActGELU}))
			require.NoError(t, b.FP8MatMul(a(dt, 128, 256), a(pr[0], 128, 128), a(pr[1], 256, 128),
				kernels.FP8MatMulParams{AScaleInv: a(f32, 1), BScaleInv: a(f32, 1)}))
		}
	}
	params := ptxParams(t, "compute_80") // the sm_90a cubin's kernels are the compute_80 PTX's (TestImages)
	seen := map[string]bool{}
	for _, r := range recs {
		seen[r.name] = true
		if !checkSignature(t, params, r) {
			continue
		}
		assert.Equal(t, fp8SM90Smem, r.smem, r.name)
		assert.Equal(t, dim3{x: qmmSM90Threads, y: 1, z: 1}, r.block, r.name)
		m, n := int(r.args[6].(int32)), int(r.args[7].(int32))
		assert.Equal(t, dim3{x: ceilDiv(m, fp8SM90TileM) * ceilDiv(n, fp8SM90TileN), y: 1, z: 1}, r.grid, r.name)
		if m == 300 {
			assert.Equal(t, []any{int32(300), int32(300), int32(256), int32(1), int32(1), int32(kernels.ActGELU)}, r.args[6:], r.name)
			assert.NotZero(t, r.args[5], "bias")
		} else {
			assert.Equal(t, []any{int32(128), int32(256), int32(128), int32(0), int32(0), int32(kernels.ActNone)}, r.args[6:], r.name)
			assert.Zero(t, r.args[5], "no bias")
		}
	}
	assert.Len(t, recs, 2*len(fp8Pairs)*len(kernels.FloatTypes))
	for _, pr := range fp8Pairs {
		for _, dt := range kernels.FloatTypes {
			assert.True(t, seen[fp8mmSM90Kernel(pr[0], pr[1], dt)], "no launch of %s", fp8mmSM90Kernel(pr[0], pr[1], dt))
		}
	}
}

// fp8mmRunPath is fp8mmRun on g's kernel of path.
func fp8mmRunPath(t *testing.T, g *Backend, path fp8mmPath, pr [2]kernels.DType, dt kernels.DType, ac, bc []byte, sa, sb, bias []float32,
	m, n, k int, act kernels.Activation) []float64 {
	t.Helper()
	a, b := fp8Alloc(t, g, pr[0], m, k), fp8Alloc(t, g, pr[1], n, k)
	require.NoError(t, g.Upload(a, ac))
	require.NoError(t, g.Upload(b, bc))
	out := fp8Alloc(t, g, dt, m, n)
	p := kernels.FP8MatMulParams{AScaleInv: fp8HostTensor(t, g, kernels.F32, sa, len(sa)),
		BScaleInv: fp8HostTensor(t, g, kernels.F32, sb, len(sb)), Act: act}
	if bias != nil {
		p.Bias = fp8HostTensor(t, g, kernels.F32, bias, n)
	}
	d, err := check.FP8MatMul("test", g, out, a, b, p)
	require.NoError(t, err)
	if path == fp8mmSM90 {
		require.Equal(t, fp8mmSM90, g.chooseFP8MatMul(d, ptrOf(a), ptrOf(b)), "FP8MatMul's choice")
	}
	require.NoError(t, g.launchFP8MM(out, a, b, p, d, path))
	got, err := kernels.ToFloat32(out)
	require.NoError(t, err)
	o := make([]float64, len(got))
	for i, v := range got {
		o[i] = float64(v)
	}
	return o
}

// TestFP8MatMulSM90GPU checks the Hopper kernel (wgmma, sums promoted to
// float32 every 128 of K) against the float64 product within fp8mmCheck's
// bound with fp8SM90AccErr, and the mma.sync kernel within the float32-sum
// bound (the errors and the number of outputs that differ are logged), in
// every pairing and out dtype, on one whole tile and stage, tails of M, N
// and K, and a K of 32 stages (round the 6-stage ring 5 times; float32 out only),
// per-row scales with a bias, and the GELU (bf16 out, and at K = 4096).
func TestFP8MatMulSM90GPU(t *testing.T) {
	g, _ := fp8GPU(t)
	if g.major != 9 || g.minor != 0 {
		t.Skipf("the Hopper kernel needs compute capability 9.0; this device is %d.%d", g.major, g.minor)
	}
	rng := rand.New(rand.NewPCG(90, 8))
	for _, shape := range [][3]int{{128, 256, 128}, {192, 320, 400}, {300, 520, 1040}, {256, 512, 4096}} {
		m, n, k := shape[0], shape[1], shape[2]
		for _, pr := range fp8Pairs {
			ac, av, bc, bv, sa, sb, bias := fp8mmOperands(rng, pr, m, n, k)
			for _, dt := range kernels.FloatTypes {
				if k > 2048 && dt != kernels.F32 { // the float64 reference is the test's cost
					continue
				}
				for _, act := range []kernels.Activation{kernels.ActNone, kernels.ActGELU} {
					if act != kernels.ActNone && dt != kernels.BF16 && k < 2048 {
						continue
					}
					name := fmt.Sprintf("%v×%v into %v, %dx%dx%d, act %v", pr[0], pr[1], dt, m, n, k, act)
					hop := fp8mmRunPath(t, g, fp8mmSM90, pr, dt, ac, bc, sa, sb, bias, m, n, k, act)
					mma := fp8mmRunPath(t, g, fp8mmMMA, pr, dt, ac, bc, sa, sb, bias, m, n, k, act)
					eh := fp8mmCheck(t, name+" hopper", hop, av, bv, sa, sb, bias, m, n, k, dt, act, fp8SM90AccErr)
					em := fp8mmCheck(t, name+" mma", mma, av, bv, sa, sb, bias, m, n, k, dt, act, 0)
					diff := 0
					for i := range hop {
						if hop[i] != mma[i] {
							diff++
						}
					}
					if dt == kernels.F32 && act == kernels.ActNone {
						t.Logf("%s: largest error / Σ|a·b|·scales: hopper %.3g, mma %.3g; %d of %d outputs differ", name, eh, em, diff, len(hop))
					}
				}
			}
		}
	}
	// FP8MatMul itself takes the Hopper path there, bit for bit.
	m, n, k := 192, 320, 400
	pr := fp8Pairs[0]
	ac, _ := fp8RandCodes(rng, pr[0], 20, m*k)
	bc, _ := fp8RandCodes(rng, pr[1], 50, n*k)
	one := []float32{1}
	assert.Equal(t, fp8mmRunPath(t, g, fp8mmSM90, pr, kernels.F32, ac, bc, one, one, nil, m, n, k, kernels.ActNone),
		fp8mmRun(t, g, pr, kernels.F32, ac, bc, one, one, nil, m, n, k, kernels.ActNone))
}

// TestFP8Errors checks the capability error's form on a real device
// without FP8, and the arguments' checks before it.
func TestFP8Errors(t *testing.T) {
	var recs []launchRec
	b := dryRun(8, 6, &recs)
	x, err := b.Alloc(kernels.F32, 3, 16)
	require.NoError(t, err)
	q, err := b.Alloc(kernels.E4M3, 2, 16)
	require.NoError(t, err)
	s, err := b.Alloc(kernels.F32, 1)
	require.NoError(t, err)
	// Bad arguments are reported as such, before the capability.
	err = b.CastFP8(q, nil, x, s)
	require.ErrorIs(t, err, kernels.ErrShape)
	require.False(t, errors.Is(err, kernels.ErrUnsupported))
	q3, err := b.Alloc(kernels.E4M3, 3, 16)
	require.NoError(t, err)
	err = b.CastFP8(q3, nil, x, s)
	require.ErrorIs(t, err, kernels.ErrUnsupported)
	require.EqualError(t, err, "cuda: CastFP8: FP8 needs compute capability 8.9 or 9.0; this device is 8.6: "+kernels.ErrUnsupported.Error())
}
