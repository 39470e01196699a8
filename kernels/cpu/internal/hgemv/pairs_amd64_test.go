//go:build amd64 && !purego

package hgemv

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"
)

// pairsRef is Dot1PairsBF16 in Go, the reference for the pair kernels:
// VDPBF16PS's arithmetic (each lane adds its odd product, then its even
// one, rounding each addition to float32 and flushing subnormal values
// to zero) in the kernels' order of chunks, accumulators and lanes.
func pairsRef(x, w []uint16) float32 {
	var acc [2][16]float32
	for c := 0; c*32 < len(w); c++ {
		a := &acc[c%2]
		for j := range 16 {
			var xs, ws [2]float32 // value 2j, then 2j+1, zero past the end
			for h := range 2 {
				if p := c*32 + 2*j + h; p < len(w) {
					xs[h], ws[h] = flushedBF16(x[p]), flushedBF16(w[p])
				}
			}
			a[j] = flush(flush(a[j]+xs[1]*ws[1]) + xs[0]*ws[0])
		}
	}
	var t [16]float32
	for j := range t {
		t[j] = acc[0][j] + acc[1][j]
	}
	for j := range 8 {
		t[j] += t[j+8]
	}
	for j := range 4 {
		t[j] += t[j+4]
	}
	return (t[0] + t[2]) + (t[1] + t[3])
}

// flushedBF16 is the float32 of bfloat16 h, a subnormal read as zero of
// its sign.
func flushedBF16(h uint16) float32 { return flush(math.Float32frombits(uint32(h) << 16)) }

// flush is x with a subnormal flushed to zero of its sign.
func flush(x float32) float32 {
	if u := math.Float32bits(x); u&0x7f800000 == 0 {
		return math.Float32frombits(u & 0x80000000)
	}
	return x
}

// bf16Values is n bfloat16 values (truncated from float32) drawn from
// rng: mostly uniform in [-1, 1), with some of other magnitudes, some
// subnormal and some zero, so that every step of VDPBF16PS's arithmetic
// shows in the sums.
func bf16Values(rng *rand.Rand, n int) []uint16 {
	v := make([]uint16, n)
	for i := range v {
		f := float32(2*rng.Float64() - 1)
		switch rng.IntN(16) {
		case 0:
			f *= 1e6
		case 1:
			f *= 1e-30
		case 2:
			f *= 1e-39 // subnormal
		case 3:
			f = 0
		}
		v[i] = uint16(math.Float32bits(f) >> 16)
	}
	return v
}

// pairLengths are the k of the pair kernels' tests: across the 64- and
// 32-value steps and the masked tail, odd ones included.
var pairLengths = []int{1, 2, 7, 31, 32, 33, 63, 64, 65, 95, 96, 97, 127, 128, 129, 2048, 2051, 5632}

// TestDot1PairsMatchesRef checks Dot1PairsBF16 against pairsRef bit for
// bit.
func TestDot1PairsMatchesRef(t *testing.T) {
	if !AvailablePairs {
		t.Skip("no AVX-512 BF16")
	}
	rng := rand.New(rand.NewPCG(45, 46))
	for _, k := range pairLengths {
		t.Run(fmt.Sprintf("k=%d", k), func(t *testing.T) {
			for range 20 {
				x, w := bf16Values(rng, k), bf16Values(rng, k)
				want := pairsRef(x, w)
				got := Dot1PairsBF16(&x[0], &w[0], k)
				require.Equal(t, math.Float32bits(want), math.Float32bits(got), "Dot1PairsBF16 %v, reference %v", got, want)
			}
		})
	}
}

// TestDotPairsEqualDot1 checks that every sum of Dot4PairsBF16 and
// Dot4x2PairsBF16 is Dot1PairsBF16's bit for bit, with the rows of x and
// w padded apart, and that the kernels write only their sums.
func TestDotPairsEqualDot1(t *testing.T) {
	if !AvailablePairs {
		t.Skip("no AVX-512 BF16")
	}
	rng := rand.New(rand.NewPCG(47, 48))
	for _, k := range pairLengths {
		t.Run(fmt.Sprintf("k=%d", k), func(t *testing.T) {
			ldx, ldw, ldo := k+5, k+3, 5
			x, w := bf16Values(rng, 4*ldx), bf16Values(rng, 2*ldw)
			check := func(name string, out []float32, cols int) {
				for i, v := range out {
					r, c := i/ldo, i%ldo
					if c >= cols {
						require.Equal(t, float32(sentinel), v, "%s: out[%d] is not one of the sums and was written", name, i)
						continue
					}
					want := Dot1PairsBF16(&x[r*ldx], &w[c*ldw], k)
					require.Equal(t, math.Float32bits(want), math.Float32bits(v), "%s: x row %d, w row %d: %v, Dot1PairsBF16 %v", name, r, c, v, want)
				}
			}
			out := sentinels(4 * ldo)
			Dot4PairsBF16(&x[0], ldx, &w[0], k, &out[0], ldo, &w[ldw])
			check("Dot4PairsBF16", out, 1)
			out = sentinels(4 * ldo)
			Dot4x2PairsBF16(&x[0], ldx, &w[0], ldw, k, &out[0], ldo, &w[0])
			check("Dot4x2PairsBF16", out, 2)
		})
	}
}
