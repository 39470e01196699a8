package cpu

import (
	"fmt"
	"math"
	"math/rand/v2"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"gonum.org/v1/gonum/blas"
	"gonum.org/v1/gonum/blas/gonum"
)

// sgemmCase is one product of the SGEMM tests.
type sgemmCase struct {
	tA, tB      bool
	m, n, k     int
	pad         int // extra stride of a, b and c
	alpha, beta float32
	nanC        bool // c starts as NaN (with beta 0, which must overwrite it)
}

func (tc sgemmCase) String() string {
	return fmt.Sprintf("tA=%v/tB=%v/%dx%dx%d/pad=%d/alpha=%g/beta=%g/nan=%v",
		tc.tA, tc.tB, tc.m, tc.n, tc.k, tc.pad, tc.alpha, tc.beta, tc.nanC)
}

// checkSgemm runs tc through kern and compares c with a float64 reference,
// within float32 rounding scaled by k and the magnitude of the terms.
func checkSgemm(t *testing.T, kern sgemmKernel, tc sgemmCase, rng *rand.Rand) {
	t.Helper()
	ar, ac := tc.m, tc.k
	if tc.tA {
		ar, ac = tc.k, tc.m
	}
	br, bc := tc.k, tc.n
	if tc.tB {
		br, bc = tc.n, tc.k
	}
	lda, ldb, ldc := ac+tc.pad, bc+tc.pad, tc.n+tc.pad
	fill := func(n int) []float32 {
		s := make([]float32, n)
		for i := range s {
			s[i] = rng.Float32()*2 - 1
		}
		return s
	}
	a, b, c := fill((ar-1)*lda+ac), fill((br-1)*ldb+bc), fill((tc.m-1)*ldc+tc.n)
	if tc.nanC {
		for i := range c {
			c[i] = float32(math.NaN())
		}
	}
	c0 := append([]float32(nil), c...)
	sgemmWith(kern, tc.tA, tc.tB, tc.m, tc.n, tc.k, tc.alpha, a, lda, b, ldb, tc.beta, c, ldc)

	at := func(i, p int) float64 {
		if tc.tA {
			return float64(a[p*lda+i])
		}
		return float64(a[i*lda+p])
	}
	bt := func(p, j int) float64 {
		if tc.tB {
			return float64(b[j*ldb+p])
		}
		return float64(b[p*ldb+j])
	}
	eps := float64(tc.k+2) * 1.2e-7 * 2
	bad := 0
	for i := range tc.m {
		for j := range tc.n {
			var sum, mag float64
			for p := range tc.k {
				v := at(i, p) * bt(p, j)
				sum += v
				mag += math.Abs(v)
			}
			want := float64(tc.alpha) * sum
			mag *= math.Abs(float64(tc.alpha))
			if tc.beta != 0 {
				want += float64(tc.beta) * float64(c0[i*ldc+j])
				mag += math.Abs(float64(tc.beta) * float64(c0[i*ldc+j]))
			}
			if got := float64(c[i*ldc+j]); !(math.Abs(got-want) <= eps*(mag+1)) {
				if bad++; bad < 5 {
					t.Errorf("%s: c[%d][%d] = %g, want %g", tc, i, j, got, want)
				}
			}
		}
	}
	// The padding between rows of c is left alone.
	for i := 0; i < tc.m-1; i++ {
		for j := tc.n; j < ldc; j++ {
			if c[i*ldc+j] != c0[i*ldc+j] && !(tc.nanC && c[i*ldc+j] != c[i*ldc+j]) {
				t.Fatalf("%s: padding c[%d][%d] written", tc, i, j)
			}
		}
	}
}

// sgemmKernels are the micro-kernels this machine runs.
func sgemmKernels() []sgemmKernel {
	return append([]sgemmKernel{goKernel}, asmKernels...)
}

func TestSgemmShapes(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	type mnk struct{ m, n, k int }
	shapes := []mnk{
		{1, 1, 1}, {7, 7, 7}, {13, 13, 13}, {67, 67, 67}, {131, 131, 131},
		{1, 67, 13}, {67, 1, 13}, {1, 1, 300}, {5, 17, 3}, {6, 16, 1}, {12, 32, 8},
		{121, 33, 257}, {257, 7, 13}, {7, 257, 131}, {13, 40, 1000}, {30, 130, 513},
		{125, 18, 260}, {64, 4100, 3}, // past MC (120), KC (256), NC (4096)
	}
	for _, kern := range sgemmKernels() {
		t.Run(kern.name, func(t *testing.T) {
			for _, s := range shapes {
				for _, tA := range []bool{false, true} {
					for _, tB := range []bool{false, true} {
						checkSgemm(t, kern, sgemmCase{tA: tA, tB: tB, m: s.m, n: s.n, k: s.k, alpha: 1}, rng)
					}
				}
			}
			for _, alpha := range []float32{1, 2, -0.5} {
				for _, beta := range []float32{0, 1, 0.5} {
					for _, pad := range []int{0, 3} {
						checkSgemm(t, kern, sgemmCase{tA: pad > 0, m: 37, n: 45, k: 300, pad: pad, alpha: alpha, beta: beta}, rng)
						checkSgemm(t, kern, sgemmCase{tB: pad > 0, m: 12, n: 16, k: 9, pad: pad, alpha: alpha, beta: beta}, rng)
					}
				}
				checkSgemm(t, kern, sgemmCase{m: 13, n: 35, k: 270, alpha: alpha, nanC: true}, rng)
				checkSgemm(t, kern, sgemmCase{m: 12, n: 32, k: 5, alpha: alpha, nanC: true}, rng)
			}
			// Every count of rows a last, partial panel can have, through
			// the edge kernels, on whole and partial column panels.
			for m := 1; m <= 2*kern.mr; m++ {
				for _, n := range []int{kern.nr, kern.nr + 13} {
					for _, k := range []int{1, 2, 3, 17} {
						checkSgemm(t, kern, sgemmCase{tB: m%2 == 0, m: m, n: n, k: k, alpha: -0.5, beta: 0.5}, rng)
						checkSgemm(t, kern, sgemmCase{tA: k == 3, m: m, n: n, k: k, alpha: 2, nanC: true}, rng)
					}
				}
			}
			// Randomised shapes, transposes, strides and scalars.
			for range 60 {
				tc := sgemmCase{
					tA: rng.IntN(2) == 0, tB: rng.IntN(2) == 0,
					m: 1 + rng.IntN(140), n: 1 + rng.IntN(140), k: 1 + rng.IntN(600),
					pad:   rng.IntN(3) * rng.IntN(9),
					alpha: []float32{1, 2, -0.5}[rng.IntN(3)],
					beta:  []float32{0, 1, 0.5}[rng.IntN(3)],
				}
				tc.nanC = tc.beta == 0 && rng.IntN(2) == 0
				checkSgemm(t, kern, tc, rng)
			}
		})
	}
}

// TestSgemmGonum checks goBLASImpl against gonum's own SGEMM, degenerate
// calls and gonum's panics included.
func TestSgemmGonum(t *testing.T) {
	var ref gonum.Implementation
	var impl goBLASImpl
	rng := rand.New(rand.NewPCG(3, 4))
	fill := func(n int) []float32 {
		s := make([]float32, n)
		for i := range s {
			s[i] = rng.Float32()*2 - 1
		}
		return s
	}
	for _, s := range [][3]int{{1, 1, 1}, {67, 131, 257}, {200, 100, 70}, {0, 3, 3}, {3, 0, 3}, {3, 3, 0}} {
		m, n, k := s[0], s[1], s[2]
		for _, alpha := range []float32{0, 1.5} {
			a, b, c := fill((m+1)*(k+1)), fill((k+1)*(n+1)), fill((m+1)*(n+1))
			want := append([]float32(nil), c...)
			ref.Sgemm(blas.NoTrans, blas.Trans, m, n, k, alpha, a, max(k, 1), b, max(k, 1), 0.5, want, max(n, 1))
			impl.Sgemm(blas.NoTrans, blas.Trans, m, n, k, alpha, a, max(k, 1), b, max(k, 1), 0.5, c, max(n, 1))
			assert.InDeltaSlice(t, want, c, 1e-4, "%dx%dx%d alpha %g", m, n, k, alpha)
		}
	}
	assert.Panics(t, func() {
		impl.Sgemm(blas.NoTrans, blas.NoTrans, 4, 4, 4, 1, make([]float32, 15), 4, make([]float32, 16), 4, 0, make([]float32, 16), 4)
	})
	assert.Panics(t, func() {
		impl.Sgemm(blas.NoTrans, blas.NoTrans, 4, 4, 4, 1, make([]float32, 16), 3, make([]float32, 16), 4, 0, make([]float32, 16), 4)
	})
	assert.Panics(t, func() {
		impl.Sgemm('x', blas.NoTrans, 4, 4, 4, 1, make([]float32, 16), 4, make([]float32, 16), 4, 0, make([]float32, 16), 4)
	})
}

// TestSgemmConcurrent runs threaded products from several goroutines.
func TestSgemmConcurrent(t *testing.T) {
	const m, n, k = 150, 170, 190
	rng := rand.New(rand.NewPCG(5, 6))
	a, b := make([]float32, m*k), make([]float32, k*n)
	for i := range a {
		a[i] = rng.Float32()
	}
	for i := range b {
		b[i] = rng.Float32()
	}
	want := make([]float32, m*n)
	gonum.Implementation{}.Sgemm(blas.NoTrans, blas.NoTrans, m, n, k, 1, a, k, b, n, 0, want, n)
	var wg sync.WaitGroup
	got := make([][]float32, 6)
	for g := range got {
		wg.Add(1)
		go func() {
			defer wg.Done()
			got[g] = make([]float32, m*n)
			for range 3 {
				goBLASImpl{}.Sgemm(blas.NoTrans, blas.NoTrans, m, n, k, 1, a, k, b, n, 0, got[g], n)
			}
		}()
	}
	wg.Wait()
	for g := range got {
		require.InDeltaSlice(t, want, got[g], 1e-3, "goroutine %d", g)
	}
}

// BenchmarkSgemm compares our SGEMM with gonum's on square products (gonum
// only up to 1024, where it takes a second).
func BenchmarkSgemm(b *testing.B) {
	for _, n := range []int{256, 1024, 4096} {
		x, y, z := make([]float32, n*n), make([]float32, n*n), make([]float32, n*n)
		for i := range x {
			x[i], y[i] = float32(i%7)-3, float32(i%5)-2
		}
		for _, impl := range []struct {
			name string
			f    blas.Float32
		}{{"gonum", gonum.Implementation{}}, {goBLASName, goBLASImpl{}}} {
			if impl.name == "gonum" && n > 1024 {
				continue
			}
			b.Run(fmt.Sprintf("impl=%s/n=%d", impl.name, n), func(b *testing.B) {
				for b.Loop() {
					impl.f.Sgemm(blas.NoTrans, blas.NoTrans, n, n, n, 1, x, n, y, n, 0, z, n)
				}
				b.ReportMetric(2*float64(n*n*n)*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
			})
		}
	}
}

// BenchmarkSgemmEdge times our SGEMM on products whose rows leave a last,
// partial panel of the micro-kernel (mr 12 in AVX-512) against a product
// of whole panels just below: ResNet-50's last 3×3 convolutions as a
// product (49 output pixels by 512 filters of 4608) and BERT-base's rows at
// batch 1 and sequence 128 against its FFN weight.
func BenchmarkSgemmEdge(b *testing.B) {
	for _, s := range [][3]int{{48, 512, 4608}, {49, 512, 4608}, {56, 512, 4608}, {120, 3072, 768}, {128, 3072, 768}} {
		m, n, k := s[0], s[1], s[2]
		x, y, z := make([]float32, m*k), make([]float32, n*k), make([]float32, m*n)
		for i := range x {
			x[i] = float32(i%7) - 3
		}
		for i := range y {
			y[i] = float32(i%5) - 2
		}
		b.Run(fmt.Sprintf("m=%d/n=%d/k=%d", m, n, k), func(b *testing.B) {
			for b.Loop() {
				goBLASImpl{}.Sgemm(blas.NoTrans, blas.Trans, m, n, k, 1, x, k, y, k, 0, z, n)
			}
			b.ReportMetric(2*float64(m*n*k)*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
		})
	}
}
