//go:build amd64 && !purego

package hgemv

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
	"unsafe"

	"github.com/stretchr/testify/require"
	"github.com/x448/float16"
)

// dotKind is one weight type of the kernels: its size in bytes, its row
// built from float32 values, and its Dot1, Dot4 and Dot4x2 kernels over
// such rows.
type dotKind struct {
	name   string
	size   int
	row    func(v []float32) unsafe.Pointer
	dot1   func(x []float32, w unsafe.Pointer, k int) float32
	dot4   func(x []float32, ldx int, w unsafe.Pointer, k int, out []float32, ldo int)
	dot4x2 func(x []float32, ldx int, w unsafe.Pointer, ldw, k int, out []float32, ldo int)
}

// half builds a 16-bit weight row with to.
func half(to func(float32) uint16) func(v []float32) unsafe.Pointer {
	return func(v []float32) unsafe.Pointer {
		w := make([]uint16, len(v))
		for i, f := range v {
			w[i] = to(f)
		}
		return unsafe.Pointer(&w[0])
	}
}

var dotKinds = []dotKind{
	{"f32", 4,
		func(v []float32) unsafe.Pointer { return unsafe.Pointer(&append([]float32(nil), v...)[0]) },
		func(x []float32, w unsafe.Pointer, k int) float32 { return Dot1F32(&x[0], (*float32)(w), k) },
		func(x []float32, ldx int, w unsafe.Pointer, k int, out []float32, ldo int) {
			Dot4F32(&x[0], ldx, (*float32)(w), k, &out[0], ldo, (*float32)(w))
		},
		func(x []float32, ldx int, w unsafe.Pointer, ldw, k int, out []float32, ldo int) {
			Dot4x2F32(&x[0], ldx, (*float32)(w), ldw, k, &out[0], ldo, (*float32)(w))
		}},
	{"f16", 2,
		half(func(f float32) uint16 { return float16.Fromfloat32(f).Bits() }),
		func(x []float32, w unsafe.Pointer, k int) float32 { return Dot1F16(&x[0], (*uint16)(w), k) },
		func(x []float32, ldx int, w unsafe.Pointer, k int, out []float32, ldo int) {
			Dot4F16(&x[0], ldx, (*uint16)(w), k, &out[0], ldo, (*uint16)(w))
		},
		func(x []float32, ldx int, w unsafe.Pointer, ldw, k int, out []float32, ldo int) {
			Dot4x2F16(&x[0], ldx, (*uint16)(w), ldw, k, &out[0], ldo, (*uint16)(w))
		}},
	{"bf16", 2,
		half(func(f float32) uint16 { return uint16(math.Float32bits(f) >> 16) }),
		func(x []float32, w unsafe.Pointer, k int) float32 { return Dot1BF16(&x[0], (*uint16)(w), k) },
		func(x []float32, ldx int, w unsafe.Pointer, k int, out []float32, ldo int) {
			Dot4BF16(&x[0], ldx, (*uint16)(w), k, &out[0], ldo, (*uint16)(w))
		},
		func(x []float32, ldx int, w unsafe.Pointer, ldw, k int, out []float32, ldo int) {
			Dot4x2BF16(&x[0], ldx, (*uint16)(w), ldw, k, &out[0], ldo, (*uint16)(w))
		}},
}

// TestDot4EqualsDot1 checks that every row's sum from a Dot4 kernel is
// the Dot1 kernel's bit for bit, at lengths across the 64-, 16- and
// masked-tail steps, with rows of x padded apart, and that the kernel
// writes only the four sums.
func TestDot4EqualsDot1(t *testing.T) {
	if !Available {
		t.Skip("no AVX-512F")
	}
	rng := rand.New(rand.NewPCG(41, 42))
	for _, kind := range dotKinds {
		for _, k := range []int{1, 7, 15, 16, 17, 63, 64, 65, 100, 129, 2048, 2051} {
			t.Run(fmt.Sprintf("%s/k=%d", kind.name, k), func(t *testing.T) {
				ldx, ldo := k+5, 3
				x, w := uniform(rng, 4*ldx), kind.row(uniform(rng, k))
				out := sentinels(4 * ldo)
				kind.dot4(x, ldx, w, k, out, ldo)
				for i, v := range out {
					if i%ldo != 0 {
						require.Equal(t, float32(sentinel), v, "out[%d] is not one of the sums and was written", i)
						continue
					}
					r := i / ldo
					want := kind.dot1(x[r*ldx:], w, k)
					require.Equal(t, math.Float32bits(want), math.Float32bits(v), "row %d: Dot4 %v, Dot1 %v", r, v, want)
				}
			})
		}
	}
}

// TestDot4x2EqualsDot1 checks that every sum from a Dot4x2 kernel, four
// rows of x against two rows of w, is the Dot1 kernel's bit for bit, at
// lengths across the 32-, 16- and masked-tail steps, with the rows of x
// and of w padded apart, and that the kernel writes only the eight sums.
func TestDot4x2EqualsDot1(t *testing.T) {
	if !Available {
		t.Skip("no AVX-512F")
	}
	rng := rand.New(rand.NewPCG(43, 44))
	for _, kind := range dotKinds {
		for _, k := range []int{1, 7, 15, 16, 17, 31, 32, 33, 47, 48, 49, 63, 64, 65, 100, 2048, 2051} {
			t.Run(fmt.Sprintf("%s/k=%d", kind.name, k), func(t *testing.T) {
				ldx, ldw, ldo := k+5, k+3, 5
				x, w := uniform(rng, 4*ldx), kind.row(uniform(rng, 2*ldw))
				out := sentinels(4 * ldo)
				kind.dot4x2(x, ldx, w, ldw, k, out, ldo)
				for i, v := range out {
					r, c := i/ldo, i%ldo
					if c >= 2 {
						require.Equal(t, float32(sentinel), v, "out[%d] is not one of the sums and was written", i)
						continue
					}
					want := kind.dot1(x[r*ldx:], unsafe.Add(w, c*ldw*kind.size), k)
					require.Equal(t, math.Float32bits(want), math.Float32bits(v), "x row %d, w row %d: Dot4x2 %v, Dot1 %v", r, c, v, want)
				}
			})
		}
	}
}

// sentinel marks the values of out a kernel must not write.
const sentinel = -7.5

// uniform is n values drawn uniformly from [-1, 1).
func uniform(rng *rand.Rand, n int) []float32 {
	v := make([]float32, n)
	for i := range v {
		v[i] = float32(2*rng.Float64() - 1)
	}
	return v
}

// sentinels is n values of sentinel.
func sentinels(n int) []float32 {
	v := make([]float32, n)
	for i := range v {
		v[i] = sentinel
	}
	return v
}

// BenchmarkDot4 times the Dot4 kernels against four Dot1 calls on rows
// of TinyLlama's width (2048) with the weight row and x in cache: GFLOP/s.
func BenchmarkDot4(b *testing.B) {
	if !Available {
		b.Skip("no AVX-512F")
	}
	const k = 2048
	x := make([]float32, 4*k)
	for i := range x {
		x[i] = float32(i%7) - 3
	}
	for _, kind := range dotKinds {
		wv := make([]float32, k)
		for i := range wv {
			wv[i] = float32(i%5) - 2
		}
		w := kind.row(wv)
		out := make([]float32, 4)
		b.Run(kind.name+"/dot4", func(b *testing.B) {
			for b.Loop() {
				kind.dot4(x, k, w, k, out, 1)
			}
			b.ReportMetric(8*k*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
		})
		w2 := kind.row(append(append([]float32(nil), wv...), wv...))
		out2 := make([]float32, 8)
		b.Run(kind.name+"/dot4x2", func(b *testing.B) {
			for b.Loop() {
				kind.dot4x2(x, k, w2, k, k, out2, 2)
			}
			b.ReportMetric(16*k*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
		})
		b.Run(kind.name+"/dot1x4", func(b *testing.B) {
			for b.Loop() {
				for r := range 4 {
					out[r] = kind.dot1(x[r*k:], w, k)
				}
			}
			b.ReportMetric(8*k*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
		})
	}
}
