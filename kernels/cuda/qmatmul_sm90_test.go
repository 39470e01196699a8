//go:build cuda

package cuda

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/zbench/zbench/kernels"
	"github.com/zbench/zbench/kernels/check"
	"github.com/zbench/zbench/kernels/kerneltest"
)

// TestQMMSM90Geometry checks, without a GPU, the constants and tensor maps
// of qmatmul_sm90_T against its launch comment and TMA's rules: the
// shared-memory layout of matmul_sm90's kernels within the 227 KiB a block
// may have, row strides of whole 16-byte units, boxes of at most 256
// elements whose rows are the 128 bytes the 128-byte swizzle takes.
func TestQMMSM90Geometry(t *testing.T) {
	assert.Equal(t, 197696, qmmSM90Smem, "qmatmul_sm90.cu's SMEM")
	assert.Equal(t, sm90Smem, qmmSM90Smem, "matmul_sm90's layout: 128-byte rows of the same stages")
	assert.LessOrEqual(t, qmmSM90Smem, 227<<10)
	assert.GreaterOrEqual(t, qmmSM90Stages*(qmmSM90TileM+qmmSM90TileN)*qmmSM90TileK, 2*64*(qmmSM90TileN+8)*4,
		"the epilogue's int32 staging fits in the stages")
	assert.Equal(t, 128, qmmSM90TileK, "one 128-byte swizzle row of int8 per stage row")

	l := qmmLaunch{a: 1 << 20, b: 2 << 20, m: 192, n: 320, k: 400}
	a, b := qmmSM90Specs(l)
	assert.Equal(t, tensorMapSpec{1 << 20, []uint64{400, 192}, []uint64{400}, []uint32{128, 128}}, a)
	assert.Equal(t, tensorMapSpec{2 << 20, []uint64{400, 320}, []uint64{400}, []uint32{128, 256}}, b)
	for _, s := range []tensorMapSpec{a, b} {
		assert.Zero(t, s.base%16, "16-byte aligned base")
		for _, st := range s.strides {
			assert.Zero(t, st%16, "row strides of whole 16 bytes")
		}
		for _, x := range s.box {
			assert.LessOrEqual(t, x, uint32(256), "box sizes")
		}
		assert.Equal(t, uint32(128), s.box[0], "128-byte box rows (int8), the 128-byte swizzle's width")
	}
	// Every launch chooseQMatMul sends to the kernel meets those rules.
	var recs []launchRec
	b9 := dryRun(9, 0, &recs)
	for _, c := range []struct {
		m, n, k int
		a, w    devptr
	}{{128, 256, 128, 256, 512}, {300, 520, 1040, 4096, 8192}, {1 << 16, 1 << 14, 16 << 10, 256, 512}} {
		d := check.QMatMulDims{M: c.m, N: c.n, K: c.k}
		require.Equal(t, qmmSM90, b9.chooseQMatMul(d, c.a, c.w), "%+v", c)
		sa, sb := qmmSM90Specs(qmmLaunch{a: c.a, b: c.w, m: c.m, n: c.n, k: c.k})
		assert.Zero(t, uint64(sa.base%16+sb.base%16)+sa.strides[0]%16+sb.strides[0]%16, "%+v", c)
	}
}

// qmmGPU returns a backend on the first GPU, or skips the test when there
// is none; with ZBENCH_REQUIRE_GPU=1 a missing GPU fails it instead.
func qmmGPU(t *testing.T) *Backend {
	t.Helper()
	b, err := New(0)
	if errors.Is(err, kernels.ErrNoDevice) {
		if os.Getenv("ZBENCH_REQUIRE_GPU") == "1" {
			t.Fatalf("ZBENCH_REQUIRE_GPU=1 but %v", err)
		}
		t.Skipf("no GPU: %v", err)
	}
	require.NoError(t, err)
	t.Cleanup(func() { assert.NoError(t, b.Close()) })
	return b
}

// qmmTiledPaths are the tiled QMatMul kernels b's device runs: the Hopper
// kernel on compute capability 9.0, the cp.async tensor-core kernel from
// 8.0, the register-staged kernel everywhere.
func qmmTiledPaths(b *Backend) []qmmPath {
	var ps []qmmPath
	if b.major == 9 && b.minor == 0 {
		ps = append(ps, qmmSM90)
	}
	if b.major >= 8 {
		ps = append(ps, qmmTC)
	}
	return append(ps, qmmMMA)
}

// qmmGPUShapes take the Hopper kernel through one whole tile and stage;
// tails of M, N and K; tile rows past a rasterisation group of 16 with a
// partial last group; and a K of 32 stages, round the 4-stage ring 8 times.
var qmmGPUShapes = [][3]int{{128, 256, 128}, {192, 320, 400}, {300, 520, 1040}, {2100, 520, 256}, {256, 512, 4096}}

// qmmUpload allocates a tensor of dtype dt and shape on b holding the bytes
// data.
func qmmUpload(t *testing.T, b *Backend, dt kernels.DType, data []byte, shape ...int) *kernels.Tensor {
	t.Helper()
	x, err := b.Alloc(dt, shape...)
	require.NoError(t, err)
	require.NoError(t, b.Upload(x, data))
	t.Cleanup(func() { _ = b.Free(x) })
	return x
}

// qmmDownload returns t's bytes.
func qmmDownload(t *testing.T, x *kernels.Tensor) []byte {
	t.Helper()
	out := make([]byte, x.Bytes())
	require.NoError(t, x.Backend().Download(out, x))
	return out
}

// qmmRandBytes returns n random bytes.
func qmmRandBytes(rng *rand.Rand, n int) []byte {
	out := make([]byte, n)
	for i := range out {
		out[i] = byte(rng.Uint32())
	}
	return out
}

// qmmInt8s views bytes as int8 values.
func qmmInt8s(p []byte) []int8 {
	out := make([]int8, len(p))
	for i, v := range p {
		out[i] = int8(v)
	}
	return out
}

// TestQMatMulPathsGPU checks the exact int32 sums of every tiled QMatMul
// kernel the device has on qmmGPUShapes, over the whole int8 range, and
// that QMatMul itself picks the Hopper kernel for them on 9.0.
func TestQMatMulPathsGPU(t *testing.T) {
	b := qmmGPU(t)
	rng := rand.New(rand.NewPCG(1, 2))
	for _, s := range qmmGPUShapes {
		m, n, k := s[0], s[1], s[2]
		av, bv := qmmRandBytes(rng, m*k), qmmRandBytes(rng, n*k)
		a, w := qmmUpload(t, b, kernels.I8, av, m, k), qmmUpload(t, b, kernels.I8, bv, n, k)
		want := kerneltest.RefQMatMul(qmmInt8s(av), qmmInt8s(bv), m, n, k)
		verify := func(t *testing.T, out *kernels.Tensor) {
			got, err := kernels.ToInt32(out)
			require.NoError(t, err)
			for i, w := range want {
				if int64(got[i]) != w {
					require.Failf(t, "sum differs", "out[%d, %d] = %d, want %d", i/n, i%n, got[i], w)
				}
			}
		}
		for _, path := range qmmTiledPaths(b) {
			t.Run(fmt.Sprintf("%dx%dx%d/%v", m, n, k, path), func(t *testing.T) {
				out := qmmUpload(t, b, kernels.I32, qmmRandBytes(rng, 4*m*n), m, n)
				require.NoError(t, b.launchQMMPath(qmmLaunch{dt: kernels.I32, c: ptrOf(out), a: ptrOf(a), b: ptrOf(w),
					m: m, n: n, k: k, ldc: n}, path))
				verify(t, out)
			})
		}
		if b.major == 9 && b.minor == 0 {
			t.Run(fmt.Sprintf("%dx%dx%d/QMatMul", m, n, k), func(t *testing.T) {
				require.Equal(t, qmmSM90, b.chooseQMatMul(check.QMatMulDims{M: m, N: n, K: k}, ptrOf(a), ptrOf(w)))
				out := qmmUpload(t, b, kernels.I32, make([]byte, 4*m*n), m, n)
				require.NoError(t, b.QMatMul(out, a, w, kernels.QMatMulParams{}))
				verify(t, out)
			})
		}
	}
}

// TestQMatMulMaxKGPU checks the sums at the longest K (a multiple of 16)
// with every product at ±2¹⁴: −128·−128 gives K·16384 = 2147221504, within
// 263 of int32's largest value, and −128·127 gives −K·16256; a kernel that
// saturated or wrapped would miss them.
func TestQMatMulMaxKGPU(t *testing.T) {
	b := qmmGPU(t)
	m, n, k := 128, 256, kernels.QMatMulMaxK&^15
	av, bv := make([]byte, m*k), make([]byte, n*k)
	for i := range av {
		av[i] = 0x80 // −128
	}
	for j := range n { // b's rows alternate −128 and 127
		for x := range k {
			bv[j*k+x] = byte(0x80 - j%2)
		}
	}
	a, w := qmmUpload(t, b, kernels.I8, av, m, k), qmmUpload(t, b, kernels.I8, bv, n, k)
	for _, path := range qmmTiledPaths(b) {
		t.Run(path.String(), func(t *testing.T) {
			out := qmmUpload(t, b, kernels.I32, make([]byte, 4*m*n), m, n)
			require.NoError(t, b.launchQMMPath(qmmLaunch{dt: kernels.I32, c: ptrOf(out), a: ptrOf(a), b: ptrOf(w),
				m: m, n: n, k: k, ldc: n}, path))
			got, err := kernels.ToInt32(out)
			require.NoError(t, err)
			for i, g := range got {
				want := int64(k) * 16384
				if i%n%2 == 1 {
					want = -int64(k) * 16256
				}
				if int64(g) != want {
					require.Failf(t, "sum differs", "out[%d, %d] = %d, want %d", i/n, i%n, g, want)
				}
			}
		})
	}
}

// qmmEpi is one epilogue of TestQMatMulEpilogueGPU: the out dtype, per-row
// or shared scales, a bias, the activation, the row pitch ldc = N + pad,
// and a residual (qmmResNone, qmmResSeparate, or qmmResInPlace: out itself).
type qmmEpi struct {
	dt         kernels.DType
	aRow, bRow bool
	bias       bool
	act        kernels.Activation
	pad        int
	res        int
}

// The residuals of a qmmEpi.
const (
	qmmResNone = iota
	qmmResSeparate
	qmmResInPlace
)

// String names the epilogue in subtest names.
func (e qmmEpi) String() string {
	return fmt.Sprintf("%v/a-row=%v/b-row=%v/bias=%v/%v/ldc=N+%d/res=%d", e.dt, e.aRow, e.bRow, e.bias, e.act, e.pad, e.res)
}

// qmmEpis take the epilogue through every out dtype, per-row and shared
// scales, bias, ReLU, a separate and an in-place residual, and row pitches
// that allow 4-element vector stores (N + 0, 4, 8) and that do not.
var qmmEpis = []qmmEpi{
	{dt: kernels.F32, aRow: true, bRow: true, bias: true, act: kernels.ActReLU, pad: 4, res: qmmResSeparate},
	{dt: kernels.F32, bRow: true, pad: 3, res: qmmResInPlace},
	{dt: kernels.F16},
	{dt: kernels.F16, aRow: true, bRow: true, bias: true, act: kernels.ActReLU, pad: 8, res: qmmResSeparate},
	{dt: kernels.BF16, aRow: true, bRow: true, bias: true, act: kernels.ActReLU, res: qmmResInPlace},
	{dt: kernels.BF16, bRow: true, bias: true, pad: 1},
	{dt: kernels.I8, bRow: true, bias: true, act: kernels.ActReLU},
	{dt: kernels.I8, aRow: true, pad: 5},
}

// qmmEpiValue is the kernels' float epilogue of one sum in float32, each
// operation rounded in turn (the conversions keep Go from fusing them):
// act(float(acc)·(sa·sb) + bias + res) for act none or ReLU.
func qmmEpiValue(acc int64, sa, sb, bias float32, hasBias bool, res float32, hasRes bool, act kernels.Activation) float32 {
	v := float32(float32(acc) * float32(sa*sb))
	if hasBias {
		v = float32(v + bias)
	}
	if hasRes {
		v = float32(v + res)
	}
	if act == kernels.ActReLU {
		v = max(v, 0)
	}
	return v
}

// qmmGetF returns element i of p (dtype dt) as float32.
func qmmGetF(dt kernels.DType, p []byte, i int) float32 {
	switch dt {
	case kernels.F16, kernels.BF16:
		var v [1]float32
		_ = kernels.DecodeFloat32(dt, v[:], p[2*i:2*i+2])
		return v[0]
	}
	return math.Float32frombits(binary.LittleEndian.Uint32(p[4*i:]))
}

// qmmPutF stores v rounded to dt as element i of p.
func qmmPutF(dt kernels.DType, p []byte, i int, v float32) {
	sz := dt.Size()
	_ = kernels.EncodeFloat32(dt, p[sz*i:sz*i+sz], []float32{v})
}

// qmmRandF returns n float32 values uniform in [lo, hi).
func qmmRandF(rng *rand.Rand, n int, lo, hi float32) []float32 {
	out := make([]float32, n)
	for i := range out {
		out[i] = lo + (hi-lo)*rng.Float32()
	}
	return out
}

// qmmF32Bytes encodes v as F32.
func qmmF32Bytes(v []float32) []byte {
	out := make([]byte, 4*len(v))
	_ = kernels.EncodeFloat32(kernels.F32, out, v)
	return out
}

// TestQMatMulEpilogueGPU runs every tiled QMatMul kernel the device has
// with each epilogue of qmmEpis on shapes with tails in M, N and K, and
// requires out to be, byte for byte, the epilogue computed on the host
// from the exact sums in the same float32 operations, rounded once to the
// out dtype or requantized as kernels.QuantizeValue does, with the
// columns past N of each row untouched. GELU (erfc on the device) is
// checked against float64 within 1e-5 relative.
func TestQMatMulEpilogueGPU(t *testing.T) {
	b := qmmGPU(t)
	rng := rand.New(rand.NewPCG(3, 4))
	for _, s := range [][3]int{{192, 320, 400}, {300, 520, 1040}} {
		m, n, k := s[0], s[1], s[2]
		av, bv := qmmRandBytes(rng, m*k), qmmRandBytes(rng, n*k)
		for i := range av { // the scheme's range, as quantized tensors hold
			av[i] = byte(max(int8(av[i]), -127))
		}
		a, w := qmmUpload(t, b, kernels.I8, av, m, k), qmmUpload(t, b, kernels.I8, bv, n, k)
		sums := kerneltest.RefQMatMul(qmmInt8s(av), qmmInt8s(bv), m, n, k)
		saAll, sbAll := qmmRandF(rng, m, 0.3/127, 1.7/127), qmmRandF(rng, n, 0.3/127, 1.7/127)
		biasV := qmmRandF(rng, n, -2, 2)
		as, bs, bias := qmmUpload(t, b, kernels.F32, qmmF32Bytes(saAll), m), qmmUpload(t, b, kernels.F32, qmmF32Bytes(sbAll), n),
			qmmUpload(t, b, kernels.F32, qmmF32Bytes(biasV), n)
		for _, e := range qmmEpis {
			ldc := n + e.pad
			// The int8 out's scale: the largest magnitude over 110, so
			// that the largest values clamp.
			amax := float32(0)
			for i, acc := range sums {
				r, c := i/n, i%n
				sa, sb := saAll[0], sbAll[0]
				if e.aRow {
					sa = saAll[r]
				}
				if e.bRow {
					sb = sbAll[c]
				}
				amax = max(amax, float32(math.Abs(float64(qmmEpiValue(acc, sa, sb, biasV[c], e.bias, 0, false, e.act)))))
			}
			osV := amax / 110
			outScale := qmmUpload(t, b, kernels.F32, qmmF32Bytes([]float32{osV}), 1)
			init := qmmRandBytes(rng, m*ldc*e.dt.Size())
			var resBytes []byte
			if e.dt != kernels.I8 {
				resBytes = make([]byte, len(init))
				for i := range m * ldc {
					qmmPutF(e.dt, resBytes, i, -2+4*rng.Float32())
				}
				if e.res == qmmResInPlace {
					copy(init, resBytes)
				}
			}
			want := append([]byte{}, init...)
			for i, acc := range sums {
				r, c := i/n, i%n
				o := r*ldc + c
				sa, sb := saAll[0], sbAll[0]
				if e.aRow {
					sa = saAll[r]
				}
				if e.bRow {
					sb = sbAll[c]
				}
				var res float32
				if e.res != qmmResNone {
					res = qmmGetF(e.dt, resBytes, o)
				}
				v := qmmEpiValue(acc, sa, sb, biasV[c], e.bias, res, e.res != qmmResNone, e.act)
				if e.dt == kernels.I8 {
					want[o] = byte(kernels.QuantizeValue(v, osV))
				} else {
					qmmPutF(e.dt, want, o, v)
				}
			}
			for _, path := range qmmTiledPaths(b) {
				t.Run(fmt.Sprintf("%dx%dx%d/%v/%v", m, n, k, e, path), func(t *testing.T) {
					out := qmmUpload(t, b, e.dt, init, m, ldc)
					l := qmmLaunch{dt: e.dt, c: ptrOf(out), a: ptrOf(a), b: ptrOf(w), aScale: ptrOf(as), bScale: ptrOf(bs),
						m: m, n: n, k: k, ldc: ldc, aRowScale: e.aRow, bRowScale: e.bRow, act: e.act}
					if e.bias {
						l.bias = ptrOf(bias)
					}
					if e.dt == kernels.I8 {
						l.outScale = ptrOf(outScale)
					}
					switch e.res {
					case qmmResSeparate:
						l.res = ptrOf(qmmUpload(t, b, e.dt, resBytes, m, ldc))
					case qmmResInPlace:
						l.res = l.c
					}
					require.NoError(t, b.launchQMMPath(l, path))
					got := qmmDownload(t, out)
					sz := e.dt.Size()
					for i := range m * ldc {
						if string(got[sz*i:sz*i+sz]) != string(want[sz*i:sz*i+sz]) {
							require.Failf(t, "out differs", "out[%d, %d] (N = %d): bytes %x, want %x", i/ldc, i%ldc, n,
								got[sz*i:sz*i+sz], want[sz*i:sz*i+sz])
						}
					}
				})
			}
		}
		for _, path := range qmmTiledPaths(b) {
			t.Run(fmt.Sprintf("%dx%dx%d/gelu/%v", m, n, k, path), func(t *testing.T) {
				out := qmmUpload(t, b, kernels.F32, make([]byte, 4*m*n), m, n)
				require.NoError(t, b.launchQMMPath(qmmLaunch{dt: kernels.F32, c: ptrOf(out), a: ptrOf(a), b: ptrOf(w),
					aScale: ptrOf(as), bScale: ptrOf(bs), bias: ptrOf(bias), m: m, n: n, k: k, ldc: n,
					aRowScale: true, bRowScale: true, act: kernels.ActGELU}, path))
				got := qmmDownload(t, out)
				for i, acc := range sums {
					r, c := i/n, i%n
					y := kerneltest.RefAct(kernels.ActGELU, float64(acc)*float64(saAll[r])*float64(sbAll[c])+float64(biasV[c]))
					g := float64(qmmGetF(kernels.F32, got, i))
					require.InDelta(t, y, g, 1e-5*(1+math.Abs(y)), "out[%d, %d]", r, c)
				}
			})
		}
	}
}
