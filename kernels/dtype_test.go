package kernels

import (
	"encoding/binary"
	"math"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/x448/float16"
)

func TestBF16Rounding(t *testing.T) {
	for _, tc := range []struct {
		in   uint32 // float32 bits
		want uint16
	}{
		{0x3f800000, 0x3f80}, // 1
		{0x3f808000, 0x3f80}, // 1 + 2^-8: a tie, to even (down)
		{0x3f818000, 0x3f82}, // 1 + 3·2^-8: a tie, to even (up)
		{0x3f808001, 0x3f81}, // just above the tie
		{0x7f7fffff, 0x7f80}, // max float32 overflows to +Inf
		{0xff800000, 0xff80}, // -Inf
		{0x00000001, 0x0000}, // the smallest subnormal rounds to 0
		{0x80000000, 0x8000}, // -0
	} {
		assert.Equal(t, tc.want, BF16FromFloat32(math.Float32frombits(tc.in)), "%#08x", tc.in)
	}
	nan := BF16ToFloat32(BF16FromFloat32(float32(math.NaN())))
	assert.True(t, nan != nan, "NaN must stay NaN")
}

func TestF16Rounding(t *testing.T) {
	assert.Equal(t, uint16(0x3c00), F16FromFloat32(1+1.0/2048), "a tie rounds to even")
	assert.Equal(t, uint16(0x3c02), F16FromFloat32(1+3.0/2048), "a tie rounds to even")
	assert.Equal(t, uint16(0x7c00), F16FromFloat32(65520), "overflow to +Inf")
	assert.Equal(t, float32(65504), F16ToFloat32(0x7bff))
}

// fp8Case describes one 8-bit float format for the table-driven tests.
type fp8Case struct {
	name   string
	enc    func(float32) uint8
	dec    func(uint8) float32
	max    float32
	maxBit uint8
	known  map[uint8]float32
	isNaN  func(uint8) bool
}

var fp8Cases = []fp8Case{
	{"e4m3", E4M3FromFloat32, E4M3ToFloat32, 448, 0x7e,
		map[uint8]float32{0x01: 1.0 / 512, 0x08: 1.0 / 64, 0x38: 1, 0x7e: 448, 0xb8: -1},
		func(b uint8) bool { return b&0x7f == 0x7f }},
	{"e5m2", E5M2FromFloat32, E5M2ToFloat32, 57344, 0x7b,
		map[uint8]float32{0x01: 1.0 / 65536, 0x3c: 1, 0x7b: 57344, 0x7c: float32(math.Inf(1)), 0xfc: float32(math.Inf(-1))},
		func(b uint8) bool { return b&0x7f > 0x7c }},
}

func TestFP8(t *testing.T) {
	for _, f := range fp8Cases {
		t.Run(f.name, func(t *testing.T) {
			for code, want := range f.known {
				assert.Equal(t, want, f.dec(code), "decode %#02x", code)
			}
			// Every finite code round-trips exactly.
			for c := range 256 {
				code := uint8(c)
				v := f.dec(code)
				switch {
				case f.isNaN(code):
					assert.True(t, v != v, "%#02x decodes to NaN", code)
					assert.True(t, f.isNaN(f.enc(v)), "NaN encodes to NaN")
				case math.IsInf(float64(v), 0):
					assert.Equal(t, f.maxBit|code&0x80, f.enc(v), "infinity saturates to max")
				case code == 0x80:
					assert.Equal(t, uint8(0x80), f.enc(v), "-0 keeps its sign")
				default:
					assert.Equal(t, code, f.enc(v), "%#02x (%g) round-trips", code, v)
				}
			}
			// Between neighbours: the midpoint goes to the even code,
			// anything nearer one goes to that one.
			for c := range 0x7f {
				lo, hi := uint8(c), uint8(c+1)
				vlo, vhi := f.dec(lo), f.dec(hi)
				if f.isNaN(hi) || math.IsInf(float64(vhi), 0) {
					continue
				}
				mid := (float64(vlo) + float64(vhi)) / 2
				even := lo
				if lo&1 == 1 {
					even = hi
				}
				assert.Equal(t, even, f.enc(float32(mid)), "tie between %#02x and %#02x", lo, hi)
				assert.Equal(t, lo, f.enc(float32(mid-(mid-float64(vlo))/4)), "below the tie %#02x", lo)
				assert.Equal(t, hi, f.enc(float32(mid+(float64(vhi)-mid)/4)), "above the tie %#02x", hi)
			}
			assert.Equal(t, f.maxBit, f.enc(2*f.max), "overflow saturates")
			assert.Equal(t, 0x80|f.maxBit, f.enc(-2*f.max), "negative overflow saturates")
		})
	}
}

func TestI8(t *testing.T) {
	for in, want := range map[float32]int8{0.5: 0, 1.5: 2, 2.5: 2, -2.5: -2, 127.4: 127, 300: 127, -300: -128} {
		assert.Equal(t, want, I8FromFloat32(in), "%g", in)
	}
	assert.Equal(t, int8(0), I8FromFloat32(float32(math.NaN())))
}

func TestEncodeDecode(t *testing.T) {
	vals := []float32{0, 1, -2.5, 0.1, 100, -0.001}
	for _, d := range []DType{F32, F16, BF16, I8, E4M3, E5M2, I32} {
		t.Run(d.String(), func(t *testing.T) {
			buf := make([]byte, len(vals)*d.Size())
			require.NoError(t, EncodeFloat32(d, buf, vals))
			out := make([]float32, len(vals))
			require.NoError(t, DecodeFloat32(d, out, buf))
			for i, v := range vals {
				assert.Equal(t, Round(d, v), out[i], "%v(%g)", d, v)
			}
			require.ErrorIs(t, EncodeFloat32(d, buf[:1], vals), ErrShape)
		})
	}
}

func TestParseDType(t *testing.T) {
	for _, d := range []DType{F32, F16, BF16, I8, E4M3, E5M2, I32} {
		got, err := ParseDType(d.String())
		require.NoError(t, err)
		assert.Equal(t, d, got)
	}
	_, err := ParseDType("f64")
	require.ErrorIs(t, err, ErrDType)
	assert.Contains(t, err.Error(), `"f64"`)
}

func FuzzParseDType(f *testing.F) {
	for _, s := range []string{"f32", "bf16", "int8", "e4m3", "", "F32", "float8_e5m2"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		d, err := ParseDType(s)
		if err != nil {
			require.ErrorIs(t, err, ErrDType)
			return
		}
		require.True(t, d.Valid())
		again, err := ParseDType(d.String())
		require.NoError(t, err)
		require.Equal(t, d, again)
	})
}

func FuzzFP8RoundTrip(f *testing.F) {
	for _, v := range []float32{0, 1, 448, 449, 1e-9, -3.75, 57344} {
		f.Add(v)
	}
	f.Fuzz(func(t *testing.T, v float32) {
		for _, c := range fp8Cases {
			code := c.enc(v)
			back := c.dec(code)
			if v != v {
				require.True(t, c.isNaN(code))
				continue
			}
			// Nearest: no other finite code is strictly closer.
			if math.Abs(float64(v)) <= float64(c.max) {
				for o := range 256 {
					ov := c.dec(uint8(o))
					if ov == ov && !math.IsInf(float64(ov), 0) {
						require.LessOrEqual(t, math.Abs(float64(back)-float64(v)), math.Abs(float64(ov)-float64(v)), "%s(%g) gave %g but %g is closer", c.name, v, back, ov)
					}
				}
			}
		}
	})
}

// TestF16FastPath compares F16FromFloat32 with x448/float16 on a stride
// through all float32 bit patterns and on the neighbourhood of every
// boundary of the fast path.
func TestF16FastPath(t *testing.T) {
	check := func(u uint32) {
		f := math.Float32frombits(u)
		want := uint16(float16.Fromfloat32(f))
		if got := F16FromFloat32(f); got != want && !(f != f && got&0x7c00 == 0x7c00 && got&0x3ff != 0) {
			t.Fatalf("F16FromFloat32(%#08x = %g) = %#04x, want %#04x", u, f, got, want)
		}
	}
	for u := uint64(0); u < 1<<32; u += 251 {
		check(uint32(u))
	}
	for _, edge := range []uint32{0x38800000, 0x477ff000, 0x7f800000, 0x33000000} {
		for d := uint32(0); d < 1<<14; d++ {
			check(edge + d - 1<<13)
			check(0x80000000 | (edge + d - 1<<13))
		}
	}
	for h := range 1 << 16 {
		want := float16.Frombits(uint16(h)).Float32()
		got := F16ToFloat32(uint16(h))
		if got != want && (got == got || want == want) {
			t.Fatalf("F16ToFloat32(%#04x) = %g, want %g", h, got, want)
		}
	}
}

func TestI32FromFloat32Saturates(t *testing.T) {
	for _, c := range []struct {
		in   float32
		want int32
	}{
		{0, 0}, {2.5, 2}, {3.5, 4}, {-2.5, -2}, {float32(math.NaN()), 0},
		{1 << 31, math.MaxInt32}, {float32(math.Inf(1)), math.MaxInt32},
		{-1 << 31, math.MinInt32}, {float32(math.Inf(-1)), math.MinInt32}, {-1e20, math.MinInt32},
	} {
		assert.Equal(t, c.want, I32FromFloat32(c.in), "%g", c.in)
		buf := make([]byte, 4)
		require.NoError(t, EncodeFloat32(I32, buf, []float32{c.in}))
		assert.Equal(t, c.want, int32(binary.LittleEndian.Uint32(buf)), "encode %g", c.in)
	}
}
