package cpu

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"gonum.org/v1/gonum/blas"

	"github.com/zbench/zbench/kernels"
	"github.com/zbench/zbench/kernels/cpu/internal/sgemmasm"
)

// packCase is one transposing pack: rows r0:r0+rows, columns c0:c0+kc of
// a row-major matrix of stride ld, packed into w-wide panels.
type packCase struct {
	w, rows, kc, ld, r0, c0 int
}

func (tc packCase) String() string {
	return fmt.Sprintf("w=%d/rows=%d/kc=%d/ld=%d/r0=%d/c0=%d", tc.w, tc.rows, tc.kc, tc.ld, tc.r0, tc.c0)
}

// packCases are the transposing packs the tests run for panel width w:
// depths around the assembly's 16-column blocks, strides with and without
// padding, offsets, and whole and partial last panels.
func packCases(w int) []packCase {
	var cases []packCase
	for _, kc := range []int{1, 2, 7, 16, 17, 256} {
		for _, rows := range []int{w, 3 * w, 2*w + 5, w - 1, 1} {
			for _, pad := range []int{0, 3, 16} {
				cases = append(cases,
					packCase{w: w, rows: rows, kc: kc, ld: kc + pad},
					packCase{w: w, rows: rows, kc: kc, ld: kc + 5 + pad, r0: 7, c0: 5})
			}
		}
	}
	return cases
}

// randBits returns n floats of random bits, NaNs and infinities among them.
func randBits(rng *rand.Rand, n int) []float32 {
	s := make([]float32, n)
	for i := range s {
		s[i] = math.Float32frombits(rng.Uint32())
	}
	return s
}

// bits returns the bit patterns of s.
func bits(s []float32) []uint32 {
	u := make([]uint32, len(s))
	for i, v := range s {
		u[i] = math.Float32bits(v)
	}
	return u
}

// packWant is the definition of a transposing pack: panels of w columns,
// d[p*w+i] = src[(r0+i)*ld+c0+p], zero past the last row.
func packWant(src []float32, tc packCase) []float32 {
	panels := (tc.rows + tc.w - 1) / tc.w
	d := make([]float32, panels*tc.w*tc.kc)
	for r := range tc.rows {
		ir, i := r/tc.w, r%tc.w
		for p := range tc.kc {
			d[ir*tc.w*tc.kc+p*tc.w+i] = src[(tc.r0+r)*tc.ld+tc.c0+p]
		}
	}
	return d
}

// packGo packs as packA and packB do on the Go path, a panel at a time
// through packT.
func packGo(dst, src []float32, tc packCase) {
	for ir := 0; ir < tc.rows; ir += tc.w {
		packT(dst[ir*tc.kc:(ir+tc.w)*tc.kc], src[(tc.r0+ir)*tc.ld+tc.c0:], tc.ld, min(tc.w, tc.rows-ir), tc.kc, tc.w)
	}
}

// checkPack runs pack on a matrix that ends with the block, into a
// buffer of exactly the panels followed by a guard, and requires the
// panels of the definition and of the Go path, bit for bit.
func checkPack(t *testing.T, tc packCase, pack func(dst, src []float32)) {
	t.Helper()
	const guard = 64
	rng := rand.New(rand.NewPCG(uint64(tc.rows), uint64(tc.kc*1000+tc.ld)))
	src := randBits(rng, (tc.r0+tc.rows-1)*tc.ld+tc.c0+tc.kc)
	want := packWant(src, tc)
	buf := randBits(rng, len(want)+guard)
	guardBits := bits(buf[len(want):])
	dst := buf[:len(want)]
	pack(dst, src)
	require.Equal(t, bits(want), bits(dst), "%s", tc)
	require.Equal(t, guardBits, bits(buf[len(want):]), "%s: guard written", tc)

	goDst := randBits(rng, len(want))
	packGo(goDst, src, tc)
	require.Equal(t, bits(dst), bits(goDst), "%s: Go path", tc)
}

// TestPackA checks packA's gather (op(a) = a) for the panel heights of
// the micro-kernels, the AVX-512 kernel's in assembly where it runs.
func TestPackA(t *testing.T) {
	t.Logf("AVX-512 assembly: %v", sgemmasm.Available512)
	for _, mr := range []int{12, 6} {
		for _, tc := range packCases(mr) {
			checkPack(t, tc, func(dst, a []float32) {
				packA(dst, a, tc.ld, false, tc.r0, tc.rows, tc.c0, tc.kc, mr)
			})
		}
	}
}

// TestPackB checks packB's gather (op(b) = bᵀ) for the panel widths of
// the micro-kernels, the AVX-512 kernel's in assembly where it runs.
func TestPackB(t *testing.T) {
	t.Logf("AVX-512 assembly: %v", sgemmasm.Available512)
	for _, nr := range []int{32, 16} {
		for _, tc := range packCases(nr) {
			checkPack(t, tc, func(dst, b []float32) {
				packB(dst, b, tc.ld, true, tc.c0, tc.kc, tc.r0, tc.rows, nr)
			})
		}
	}
}

// TestPackAsm calls the assembly packs directly on single full panels.
func TestPackAsm(t *testing.T) {
	if !sgemmasm.Available512 {
		t.Skip("no AVX-512")
	}
	for _, w := range []int{12, 32} {
		for _, tc := range packCases(w) {
			if tc.rows != w {
				continue
			}
			checkPack(t, tc, func(dst, src []float32) {
				s := src[tc.r0*tc.ld+tc.c0:]
				if w == 12 {
					sgemmasm.PackA12(&dst[0], &s[0], tc.ld, tc.kc)
				} else {
					sgemmasm.PackBT32(&dst[0], &s[0], tc.ld, tc.kc)
				}
			})
		}
	}
}

// TestPackContiguous checks the copying packs (op(a) = aᵀ, op(b) = b)
// against their definition, with their zero padding.
func TestPackContiguous(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	for _, w := range []int{6, 12, 16, 32} {
		for _, kc := range []int{1, 17} {
			for _, cols := range []int{w, 2*w + 3} {
				const ld, r0, c0 = 80, 3, 2
				src := randBits(rng, (r0+kc-1)*ld+c0+cols)
				panels := (cols + w - 1) / w
				want := make([]float32, panels*w*kc)
				for p := range kc {
					for j := range cols {
						want[j/w*w*kc+p*w+j%w] = src[(r0+p)*ld+c0+j]
					}
				}
				gotA := randBits(rng, len(want))
				packA(gotA, src, ld, true, c0, cols, r0, kc, w)
				assert.Equal(t, bits(want), bits(gotA), "packA w=%d kc=%d cols=%d", w, kc, cols)
				gotB := randBits(rng, len(want))
				packB(gotB, src, ld, false, r0, kc, c0, cols, w)
				assert.Equal(t, bits(want), bits(gotB), "packB w=%d kc=%d cols=%d", w, kc, cols)
			}
		}
	}
}

// BenchmarkSgemmTrans times our SGEMM on the transposes whose packing
// gathers: square products with op(b) = bᵀ, and an attention tile
// (64×384×64) on the calling goroutine, plain and with bᵀ.
func BenchmarkSgemmTrans(b *testing.B) {
	type shape struct {
		name    string
		m, n, k int
		tB      bool
		serial  bool
	}
	shapes := []shape{
		{"square/tB", 256, 256, 256, true, false},
		{"square/tB", 1024, 1024, 1024, true, false},
		{"tile", 64, 384, 64, false, true},
		{"tile/tB", 64, 384, 64, true, true},
	}
	for _, s := range shapes {
		x, y, z := make([]float32, s.m*s.k), make([]float32, s.k*s.n), make([]float32, s.m*s.n)
		for i := range x {
			x[i] = float32(i%7) - 3
		}
		for i := range y {
			y[i] = float32(i%5) - 2
		}
		tB, ldb := blas.NoTrans, s.n
		if s.tB {
			tB, ldb = blas.Trans, s.k
		}
		b.Run(fmt.Sprintf("%s/%dx%dx%d", s.name, s.m, s.n, s.k), func(b *testing.B) {
			for b.Loop() {
				if s.serial {
					serialSgemm(blas.NoTrans, tB, s.m, s.n, s.k, 1, x, s.k, y, ldb, 0, z, s.n)
				} else {
					goBLASImpl{}.Sgemm(blas.NoTrans, tB, s.m, s.n, s.k, 1, x, s.k, y, ldb, 0, z, s.n)
				}
			}
			b.ReportMetric(2*float64(s.m*s.n*s.k)*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
		})
	}
}

// BenchmarkPackedLinear times MatMul of BERT-base's 128 rows (batch 1,
// sequence 128) against its linear layers' weights [N, K] transposed,
// packed on every call and packed once by PackLinear: GFLOP/s.
func BenchmarkPackedLinear(b *testing.B) {
	be := New()
	const m = 128
	for _, d := range [][2]int{{768, 768}, {3072, 768}, {768, 3072}} {
		n, k := d[0], d[1]
		x, err := kernels.FromFloat32(be, kernels.F32, seq(m*k, 0.37), m, k)
		require.NoError(b, err)
		out, err := be.Alloc(kernels.F32, m, n)
		require.NoError(b, err)
		for _, packed := range []bool{false, true} {
			w, err := kernels.FromFloat32(be, kernels.F32, seq(n*k, 0.11), n, k)
			require.NoError(b, err)
			if packed {
				require.NoError(b, be.PackLinear(w))
			}
			b.Run(fmt.Sprintf("n=%d/k=%d/packed=%v", n, k, packed), func(b *testing.B) { benchLinear(b, be, out, x, w, m, n, k) })
			require.NoError(b, be.Free(w))
		}
		require.NoError(b, be.Free(x))
		require.NoError(b, be.Free(out))
	}
}

// BenchmarkPackedLinear16 times a 16-bit linear layer's product,
// TinyLlama's up-projection [5632, 2048] against 64 rows of the same dtype
// (a serving step with prompt tokens), with the weight packed on every
// call and packed once by PackLinear (float16 widened to float32 panels,
// bfloat16 in pairs): GFLOP/s.
func BenchmarkPackedLinear16(b *testing.B) {
	be := New()
	const m, n, k = 64, 5632, 2048
	for _, dt := range []kernels.DType{kernels.F16, kernels.BF16} {
		x, err := kernels.FromFloat32(be, dt, seq(m*k, 0.37), m, k)
		require.NoError(b, err)
		out, err := be.Alloc(dt, m, n)
		require.NoError(b, err)
		for _, packed := range []bool{false, true} {
			w, err := kernels.FromFloat32(be, dt, seq(n*k, 0.11), n, k)
			require.NoError(b, err)
			if packed {
				require.NoError(b, be.PackLinear(w))
			}
			b.Run(fmt.Sprintf("dtype=%v/packed=%v", dt, packed), func(b *testing.B) { benchLinear(b, be, out, x, w, m, n, k) })
			require.NoError(b, be.Free(w))
		}
		require.NoError(b, be.Free(x))
		require.NoError(b, be.Free(out))
	}
}

// benchLinear times out = x·wᵀ, x [m, k] and w [n, k]: GFLOP/s.
func benchLinear(b *testing.B, be *Backend, out, x, w *kernels.Tensor, m, n, k int) {
	for b.Loop() {
		if err := be.MatMul(out, x, w, kernels.MatMulParams{TransB: true}); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(2*float64(m*n*k)*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
}

// BenchmarkPack times the transposing packs of blocks of a (mc×kc) and
// of bᵀ (kc×nc) on the Go path and as wired, for the panels of the
// AVX-512 kernel (12, 32) and of the AVX2 one (6, 16).
func BenchmarkPack(b *testing.B) {
	rng := rand.New(rand.NewPCG(9, 10))
	for _, tc := range []struct {
		name string
		a    bool
		pc   packCase
	}{
		{"A12/120x256", true, packCase{w: 12, rows: 120, kc: 256, ld: 1024}},
		{"A12/60x64", true, packCase{w: 12, rows: 60, kc: 64, ld: 64}},
		{"A6/120x256", true, packCase{w: 6, rows: 120, kc: 256, ld: 1024}},
		{"BT32/256x256", false, packCase{w: 32, rows: 256, kc: 256, ld: 1024}},
		{"BT32/384x64", false, packCase{w: 32, rows: 384, kc: 64, ld: 64}},
		{"BT16/256x256", false, packCase{w: 16, rows: 256, kc: 256, ld: 1024}},
	} {
		pc := tc.pc
		src := randBits(rng, pc.rows*pc.ld)
		dst := make([]float32, pc.rows*pc.kc)
		wired := func() {
			if tc.a {
				packA(dst, src, pc.ld, false, 0, pc.rows, 0, pc.kc, pc.w)
			} else {
				packB(dst, src, pc.ld, true, 0, pc.kc, 0, pc.rows, pc.w)
			}
		}
		for _, path := range []struct {
			name string
			f    func()
		}{{"go", func() { packGo(dst, src, pc) }}, {"wired", wired}} {
			b.Run(tc.name+"/"+path.name, func(b *testing.B) {
				for b.Loop() {
					path.f()
				}
				b.SetBytes(int64(4 * len(dst)))
			})
		}
	}
}

// TestQuantPanels checks that the weight-only quantized weights' panels,
// dequantized as they are packed, equal the rows dequantized by
// dequantRow and then packed, bit for bit: int8 with a scale per row and
// in groups of 32 and 128, float32 and float16 scales; int4 in groups of
// 32 and 128, NF4 of 32 and 64; k-blocks of whole and partial depth, and blocks
// of whole and partial panels.
func TestQuantPanels(t *testing.T) {
	t.Logf("AVX-512 assembly: %v", sgemmasm.Available512)
	be := New()
	rng := rand.New(rand.NewPCG(41, 42))
	type tc struct {
		f              kernels.WeightFormat
		group, k, rows int
		f16            bool
	}
	cases := []tc{
		{kernels.WInt8, 0, 2048, 64, false}, {kernels.WInt8, 0, 300, 45, false}, {kernels.WInt8, 32, 2048, 64, true},
		{kernels.WInt8, 32, 288, 64, false}, {kernels.WInt8, 32, 96, 45, true}, {kernels.WInt8, 128, 640, 64, false},
		{kernels.WInt8, 0, 48, 32, true},
		{kernels.WInt4, 32, 2048, 64, false}, {kernels.WInt4, 32, 288, 45, false}, {kernels.WInt4, 128, 640, 64, false},
		{kernels.WNF4, 32, 96, 64, false}, {kernels.WNF4, 64, 320, 33, false},
	}
	for _, c := range cases {
		t.Run(fmt.Sprintf("%v/group=%d/k=%d/rows=%d/f16=%v", c.f, c.group, c.k, c.rows, c.f16), func(t *testing.T) {
			const n0 = 32
			n := n0 + c.rows + 5
			w, _ := randQWeight(t, be, rng, c.f, c.group, n, c.k)
			if c.f16 {
				halfScales(t, be, &w)
			}
			var buf, refBuf []float32
			got := quantPanels(w, c.k)(&buf, n0, c.rows)
			want := widenedRows(c.k, func(dst []float32, r int) { dequantRow(dst, w, r, c.k) })(&refBuf, n0, c.rows)
			nc := (c.rows + 31) / 32 * 32
			for pc := 0; pc < c.k; pc += sgemmKC {
				kc := min(sgemmKC, c.k-pc)
				g, r := make([]float32, nc*kc), make([]float32, nc*kc)
				got(g, pc, kc, 0, c.rows)
				want(r, pc, kc, 0, c.rows)
				require.Equal(t, r, g, "k-block at %d", pc)
			}
		})
	}
}
