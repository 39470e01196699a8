//go:build amd64 && !purego

package winograd

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestInput checks the assembly input transform against InputRef, bit
// for bit, over strided tiles of several widths, and that it writes
// nothing between the channels it was given.
func TestInput(t *testing.T) {
	if !Available {
		t.Skip("no AVX-512F on this CPU")
	}
	for _, c := range []struct{ n, rs, cs, vs int }{{16, 64, 16, 16}, {64, 7 * 64, 64, 80}, {48, 3 * 48, 48, 48}, {256, 16 * 260, 260, 256}} {
		t.Run(fmt.Sprintf("n=%d/rs=%d/cs=%d/vs=%d", c.n, c.rs, c.cs, c.vs), func(t *testing.T) {
			r := rand.New(rand.NewPCG(uint64(c.n), uint64(c.rs)))
			x := make([]float32, 3*c.rs+3*c.cs+c.n)
			for i := range x {
				x[i] = r.Float32()*2 - 1
			}
			got, want := make([]float32, 15*c.vs+c.n), make([]float32, 15*c.vs+c.n)
			for i := range got {
				got[i] = float32(i)
				want[i] = float32(i)
			}
			Input(c.n, &x[0], c.rs, c.cs, &got[0], c.vs)
			InputRef(c.n, x, c.rs, c.cs, want, c.vs)
			require.Equal(t, want, got)
		})
	}
}

// TestOutput checks the assembly output transform against OutputRef, bit
// for bit, with and without bias and residual (its own or y itself),
// under floors of 0 and −Inf, NaN kept, and that it writes only its four
// pixels' channels.
func TestOutput(t *testing.T) {
	if !Available {
		t.Skip("no AVX-512F on this CPU")
	}
	inf := float32(math.Inf(-1))
	for _, c := range []struct {
		n, ms, rs, cs    int
		floor            float32
		bias, res, inOut bool
	}{
		{n: 16, ms: 16, rs: 32, cs: 16, floor: inf},
		{n: 64, ms: 96, rs: 9 * 64, cs: 64, floor: 0, bias: true},
		{n: 32, ms: 32, rs: 5 * 40, cs: 40, floor: 0, bias: true, res: true},
		{n: 128, ms: 128, rs: 4 * 128, cs: 128, floor: inf, bias: true, res: true, inOut: true},
		{n: 48, ms: 64, rs: 2 * 48, cs: 48, floor: 0, res: true},
	} {
		t.Run(fmt.Sprintf("n=%d/ms=%d/floor=%g/bias=%t/res=%t/inout=%t", c.n, c.ms, c.floor, c.bias, c.res, c.inOut), func(t *testing.T) {
			r := rand.New(rand.NewPCG(uint64(c.n), uint64(c.ms)))
			fill := func(n int) []float32 {
				s := make([]float32, n)
				for i := range s {
					s[i] = r.Float32()*2 - 1
				}
				return s
			}
			m := fill(15*c.ms + c.n)
			m[3*c.ms+1] = float32(math.NaN()) // m[0][3] of channel 1, which reaches y[0][1] alone
			ylen := c.rs + c.cs + c.n
			y := fill(ylen)
			want := append([]float32(nil), y...)
			var bias, res, resRef []float32
			var bp, rp *float32
			if c.bias {
				bias = fill(c.n)
				bp = &bias[0]
			}
			if c.res {
				res = fill(ylen)
				resRef = res
				if c.inOut {
					res = y
					resRef = want
				}
				rp = &res[0]
			}
			OutputRef(c.n, m, c.ms, want, c.rs, c.cs, resRef, bias, c.floor)
			Output(c.n, &m[0], c.ms, &y[0], c.rs, c.cs, rp, bp, c.floor)
			require.True(t, math.IsNaN(float64(y[c.cs+1])), "the output the NaN reaches: %v", y[c.cs+1])
			require.Equal(t, bits(want), bits(y))
		})
	}
}

// bits are s's values as their bit patterns, NaN's among them.
func bits(s []float32) []uint32 {
	b := make([]uint32, len(s))
	for i, v := range s {
		b[i] = math.Float32bits(v)
	}
	return b
}
