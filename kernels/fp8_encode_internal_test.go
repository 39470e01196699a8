package kernels

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// encodeByScaling is the straightforward float64 encoder that encode's
// bit arithmetic must agree with: scale so that one unit in the last
// place of the code is 1, round to an integer with ties to even, rebuild
// the code; saturating to max, NaN to NaN.
func (f fp8) encodeByScaling(x float32) uint8 {
	var sign uint8
	if math.Signbit(float64(x)) {
		sign, x = 0x80, -x
	}
	switch {
	case x != x:
		return 0x7f | sign
	case x >= f.max:
		x = f.max
	case x == 0:
		return sign
	}
	_, e := math.Frexp(float64(x))
	exp := max(e-1, 1-f.bias)
	q := math.RoundToEven(float64(x) / math.Ldexp(1, exp-int(f.man)))
	if q >= float64(int(1)<<(f.man+1)) {
		q /= 2
		exp++
	}
	if q < float64(int(1)<<f.man) {
		return sign | uint8(q)
	}
	return sign | uint8(exp+f.bias)<<f.man | uint8(int(q)-1<<f.man)
}

// TestFP8EncodeBits compares encode with encodeByScaling on every float32
// exponent: a stride through each binade's significands, the patterns
// around every rounding boundary of both formats, and random bits.
func TestFP8EncodeBits(t *testing.T) {
	check := func(bits uint32) {
		x := math.Float32frombits(bits)
		for _, f := range []fp8{fmtE4M3, fmtE5M2} {
			if got, want := f.encode(x), f.encodeByScaling(x); got != want {
				require.Equal(t, want, got, "%v bits %#08x (%g)", f.max, bits, x)
			}
		}
	}
	for exp := range uint32(256) {
		for m := uint32(0); m < 1<<23; m += 4099 {
			check(exp<<23 | m)
			check(1<<31 | exp<<23 | m)
		}
		for shift := range uint32(25) { // around each half of a dropped part
			for _, low := range []uint32{0, 1, 1<<shift - 1} {
				half := uint32(1) << shift >> 1
				for _, m := range []uint32{half - 1, half, half + 1, 3 * half, 3*half - 1, 3*half + 1, low} {
					check(exp<<23 | (m|5<<shift)&(1<<23-1))
					check(exp<<23 | (m|2<<shift)&(1<<23-1))
				}
			}
		}
	}
	r := rand.New(rand.NewPCG(1, 2))
	for range 1 << 20 {
		check(r.Uint32())
	}
}

// BenchmarkFP8Encode times encode against encodeByScaling, the float64
// encoder it replaced, on a million N(0, 1)·100 values.
func BenchmarkFP8Encode(b *testing.B) {
	r := rand.New(rand.NewPCG(3, 4))
	x := make([]float32, 1<<20)
	for i := range x {
		x[i] = float32(r.NormFloat64() * 100)
	}
	dst := make([]uint8, len(x))
	for _, impl := range []struct {
		name string
		f    func(fp8, float32) uint8
	}{{"bits", fp8.encode}, {"scaling", fp8.encodeByScaling}} {
		b.Run("impl="+impl.name, func(b *testing.B) {
			for b.Loop() {
				for i, v := range x {
					dst[i] = impl.f(fmtE4M3, v)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(len(x)), "ns/value")
		})
	}
}

func TestEncodeFP8(t *testing.T) {
	src := []float32{0.5, -3, 1e-9, 200, float32(math.Inf(-1)), float32(math.Copysign(0, -1))}
	for _, c := range []struct {
		dt  DType
		enc func(float32) uint8
	}{{E4M3, E4M3FromFloat32}, {E5M2, E5M2FromFloat32}} {
		dst := make([]uint8, len(src))
		amax, err := EncodeFP8(c.dt, dst, src, 4)
		require.NoError(t, err)
		require.True(t, math.IsInf(float64(amax), 1), "%v: amax %v", c.dt, amax)
		for i, v := range src {
			require.Equal(t, c.enc(v*4), dst[i], "%v: %g", c.dt, v)
		}
		amax, err = EncodeFP8(c.dt, dst[:2], []float32{1, float32(math.NaN())}, 1)
		require.NoError(t, err)
		require.True(t, math.IsNaN(float64(amax)), "%v: a NaN's amax", c.dt)
		amax, err = EncodeFP8(c.dt, dst[:3], []float32{-2, 1, 0}, 1)
		require.NoError(t, err)
		require.Equal(t, float32(2), amax)
	}
	_, err := EncodeFP8(BF16, make([]uint8, 1), []float32{1}, 1)
	require.ErrorIs(t, err, ErrDType)
	_, err = EncodeFP8(E4M3, make([]uint8, 1), []float32{1, 2}, 1)
	require.ErrorIs(t, err, ErrShape)
}

// TestEncodeFP8NaNSign checks the sign EncodeFP8 gives a NaN product: the
// scale's when it is NaN, else the value's, else set (∞·0), whatever the
// processor would pick between two NaN operands.
func TestEncodeFP8NaNSign(t *testing.T) {
	pos, neg := math.Float32frombits(0x7fc00000), math.Float32frombits(0xffc00000)
	inf := float32(math.Inf(1))
	for _, c := range []struct {
		name     string
		v, scale float32
		neg      bool
	}{
		{"+NaN·+NaN", pos, pos, false},
		{"-NaN·+NaN", neg, pos, false},
		{"+NaN·-NaN", pos, neg, true},
		{"-NaN·-NaN", neg, neg, true},
		{"1·-NaN", 1, neg, true},
		{"-1·+NaN", -1, pos, false},
		{"-NaN·2", neg, 2, true},
		{"+NaN·-2", pos, -2, false},
		{"∞·0", inf, 0, true},
		{"-∞·0", -inf, 0, true},
		{"0·∞", 0, inf, true},
	} {
		for _, dt := range []DType{E4M3, E5M2} {
			dst := make([]uint8, 1)
			_, err := EncodeFP8(dt, dst, []float32{c.v}, c.scale)
			require.NoError(t, err)
			want := uint8(0x7f)
			if c.neg {
				want = 0xff
			}
			assert.Equal(t, want, dst[0], "%s into %v", c.name, dt)
		}
	}
}
