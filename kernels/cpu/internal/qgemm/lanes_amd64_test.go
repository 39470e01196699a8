//go:build amd64 && !purego

package qgemm

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// randCodes returns n random int8 codes, every byte value alike.
func randCodes(rng *rand.Rand, n int) []int8 {
	w := make([]int8, n)
	for i := range w {
		w[i] = int8(rng.IntN(256) - 128)
	}
	return w
}

// randScales returns n scales drawn uniformly from [lo, lo+span).
func randScales(rng *rand.Rand, n int, lo, span float64) []float32 {
	s := make([]float32, n)
	for i := range s {
		s[i] = float32(lo + span*rng.Float64())
	}
	return s
}

// laneCase is one row of a lane-ordered dot product: k values, a scale
// per group of them (0: one for the row).
type laneCase struct{ k, group int }

func (c laneCase) String() string { return fmt.Sprintf("k=%d/group=%d", c.k, c.group) }

// laneRef is Σ x[p]·level(p)·scale(p) in float64, x in natural order.
func laneRef(x []float32, levels []float64, scales []float32, group int) float64 {
	var s float64
	for p, v := range levels {
		sc := scales[0]
		if group > 0 {
			sc = scales[p/group]
		}
		s += float64(x[p]) * v * float64(sc)
	}
	return s
}

func laneInputs(rng *rand.Rand, c laneCase) ([]float32, []float32) {
	x := make([]float32, c.k)
	for i := range x {
		x[i] = float32(2*rng.Float64() - 1)
	}
	n := 1
	if c.group > 0 {
		n = c.k / c.group
	}
	return x, randScales(rng, n, 0.005, 0.02)
}

func TestDotQ4L(t *testing.T) {
	if !Available {
		t.Skip("no AVX-512 VNNI on this CPU")
	}
	rng := rand.New(rand.NewPCG(3, 4))
	var levels [16]float32
	for i := range levels {
		levels[i] = float32(rng.Float64()*2 - 1)
	}
	for _, c := range []laneCase{{128, 32}, {128, 64}, {128, 128}, {256, 32}, {512, 256}, {2048, 32}, {5632, 32}, {1024, 64}} {
		t.Run(c.String(), func(t *testing.T) {
			x, scales := laneInputs(rng, c)
			w := make([]int8, c.k/2)
			lv := make([]float64, c.k)
			for i := range w {
				b := uint8(rng.IntN(256))
				w[i] = int8(b)
				lv[2*i], lv[2*i+1] = float64(levels[b&15]), float64(levels[b>>4])
			}
			want := laneRef(x, lv, scales, c.group)
			s, ok := NewScaleWalk(scales, c.group)
			require.True(t, ok)
			LaneOrder4(x)
			got := DotQ4L(&x[0], &w[0], c.k, &s, &levels)
			assert.InDelta(t, want, float64(got), 1e-5*math.Sqrt(float64(c.k)), "got %v want %v", got, want)
		})
	}
}

func TestNewScaleWalk(t *testing.T) {
	sc := make([]float32, 8)
	for _, c := range []struct {
		group, n, per int
		ok            bool
	}{
		{0, 0, 0, false},
		{32, 4, 1, true},
		{64, 2, 1, true},
		{96, 0, 0, false},
		{128, 1, 1, true},
		{160, 0, 0, false},
		{512, 1, 4, true},
	} {
		s, ok := NewScaleWalk(sc, c.group)
		require.Equal(t, c.ok, ok, "group %d", c.group)
		if ok {
			assert.Equal(t, c.n, s.N, "group %d", c.group)
			assert.Equal(t, c.per, s.Per, "group %d", c.group)
			assert.Equal(t, int32(0), s.Idx[0])
			assert.Equal(t, int32(c.n-1), s.Idx[15])
		}
	}
}

// BenchmarkLaneDots times the lane-ordered 4-bit dot product against the
// byte-expanding one over one row of TinyLlama's width held in L1: codes
// per second, the arithmetic a decode GEMV needs from each core.
func BenchmarkLaneDots(b *testing.B) {
	const k = 2048
	x := make([]float32, k)
	var levels [16]float32
	rng := rand.New(rand.NewPCG(5, 6))
	for i := range x {
		x[i] = float32(rng.Float64() - 0.5)
	}
	w, scales := randCodes(rng, k/2), randScales(rng, k/32, 0, 1)
	for i := range levels {
		levels[i] = float32(i - 8)
	}
	report := func(b *testing.B) {
		b.ReportMetric(k*float64(b.N)/b.Elapsed().Seconds()/1e9, "Gcodes/s")
	}
	b.Run("int4/expand", func(b *testing.B) {
		for b.Loop() {
			DotQ4(&x[0], &w[0], k, &scales[0], 32, &levels)
		}
		report(b)
	})
	b.Run("int4/lanes", func(b *testing.B) {
		s, _ := NewScaleWalk(scales, 32)
		for b.Loop() {
			DotQ4L(&x[0], &w[0], k, &s, &levels)
		}
		report(b)
	})
}

// TestDotQ4LRows checks that each row's result of DotQ4LRows is DotQ4L's
// over that row and its scales, bit for bit, with every width of step
// (one, two and four scales a step, and a scale over two steps), and that
// it writes only its rows.
func TestDotQ4LRows(t *testing.T) {
	if !Available {
		t.Skip("no AVX-512 VNNI on this CPU")
	}
	rng := rand.New(rand.NewPCG(5, 6))
	var levels [16]float32
	for i := range levels {
		levels[i] = float32(i - 8)
	}
	for _, c := range []laneCase{{128, 32}, {256, 64}, {256, 128}, {512, 256}, {2048, 32}, {5632, 32}} {
		for _, rows := range []int{1, 3, 9} {
			t.Run(fmt.Sprintf("%v/rows=%d", c, rows), func(t *testing.T) {
				x, _ := laneInputs(rng, c)
				LaneOrder4(x)
				ng := c.k / c.group
				w := randCodes(rng, rows*c.k/2)
				scales := randScales(rng, rows*ng, 0.005, 0.02)
				const sentinel = -7.5
				out := make([]float32, rows+1)
				out[rows] = sentinel
				s, ok := NewScaleWalk(scales, c.group)
				require.True(t, ok)
				DotQ4LRows(&x[0], &w[0], c.k, rows, &s, &levels, &out[0])
				for r := range rows {
					one, ok := NewScaleWalk(scales[r*ng:], c.group)
					require.True(t, ok)
					want := DotQ4L(&x[0], &w[r*c.k/2], c.k, &one, &levels)
					require.Equal(t, math.Float32bits(want), math.Float32bits(out[r]), "row %d: %v, DotQ4L %v", r, out[r], want)
				}
				require.Equal(t, float32(sentinel), out[rows], "wrote past its rows")
			})
		}
	}
}
