package gguf_test

import (
	"encoding/binary"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/zbench/zbench/kernels"
	"github.com/zbench/zbench/models/gguf"
)

// packQ4K builds a Q4_K super-block from its fields as ggml-common.h lays
// them out: d, dmin (f16), the eight 6-bit scales and mins packed into 12
// bytes (sub-blocks 0-3 in the low 6 bits of bytes 0-3 and 4-7, sub-blocks
// 4-7 in the nibbles of bytes 8-11 with their top 2 bits in the top bits of
// bytes 0-3 and 4-7), and 128 bytes of codes (sub-block 2k in the low
// nibbles of bytes 32k…32k+31, 2k+1 in the high ones).
func packQ4K(d, dmin uint16, sc, m [8]uint8, q [256]uint8) []byte {
	b := make([]byte, 144)
	binary.LittleEndian.PutUint16(b, d)
	binary.LittleEndian.PutUint16(b[2:], dmin)
	s := b[4:16]
	for j := range 4 {
		s[j] = sc[j] | sc[j+4]>>4<<6
		s[j+4] = m[j] | m[j+4]>>4<<6
		s[j+8] = sc[j+4]&0xf | m[j+4]&0xf<<4
	}
	for e, v := range q {
		sub, l := e/32, e%32
		i := 16 + sub/2*32 + l
		if sub%2 == 0 {
			b[i] |= v
		} else {
			b[i] |= v << 4
		}
	}
	return b
}

// packQ6K builds a Q6_K super-block: for element e = 128n + 32g + l (half
// n, group g < 4, l < 32), its low 4 bits in ql[64n + l + 32(g&1)] (low
// nibble for g < 2, high for g ≥ 2), its high 2 bits in bits 2g, 2g+1 of
// qh[32n + l], its scale sc[8n + l/16 + 2g]; then d (f16).
func packQ6K(d uint16, sc [16]int8, q [256]uint8) []byte {
	b := make([]byte, 210)
	ql, qh := b[:128], b[128:192]
	for e, v := range q {
		n, g, l := e/128, e%128/32, e%32
		i := 64*n + l + 32*(g&1)
		if g < 2 {
			ql[i] |= v & 0xf
		} else {
			ql[i] |= (v & 0xf) << 4
		}
		qh[32*n+l] |= (v >> 4) << (2 * g)
	}
	for i, s := range sc {
		b[192+i] = byte(s)
	}
	binary.LittleEndian.PutUint16(b[208:], d)
	return b
}

// TestDequantizeKQuants checks Q4_K and Q6_K against blocks built from
// their fields, value by value: Q4_K d·sc·q − dmin·m per sub-block of 32,
// Q6_K d·sc·(q − 32) per sub-block of 16, each product rounded to float32
// as ggml computes it.
func TestDequantizeKQuants(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	cases := []struct {
		name string
		seed uint64
	}{{"random", 1}, {"extremes", 2}, {"zero scales", 3}}
	for _, c := range cases {
		t.Run("Q4_K/"+c.name, func(t *testing.T) {
			var sc, m [8]uint8
			var q [256]uint8
			for i := range sc {
				sc[i], m[i] = uint8(r.IntN(64)), uint8(r.IntN(64))
				if c.name == "extremes" {
					sc[i], m[i] = 63*uint8(i%2), 63*uint8(1-i%2)
				} else if c.name == "zero scales" {
					sc[i], m[i] = 0, 0
				}
			}
			for i := range q {
				q[i] = uint8(r.IntN(16))
			}
			d, dmin := kernels.F16FromFloat32(0.0123), kernels.F16FromFloat32(0.0045)
			// two super-blocks: the second with other fields
			blk := append(packQ4K(d, dmin, sc, m, q), packQ4K(dmin, d, m, sc, q)...)
			got := make([]float32, 512)
			require.NoError(t, gguf.Dequantize(gguf.Q4_K, got, blk))
			for e := range 512 {
				dd, mm, s, mn := d, dmin, sc, m
				if e >= 256 {
					dd, mm, s, mn = dmin, d, m, sc
				}
				sub := e % 256 / 32
				d1 := kernels.F16ToFloat32(dd) * float32(s[sub])
				m1 := kernels.F16ToFloat32(mm) * float32(mn[sub])
				want := float32(d1*float32(q[e%256])) - m1
				require.Equal(t, want, got[e], "element %d", e)
			}
		})
		t.Run("Q6_K/"+c.name, func(t *testing.T) {
			var sc [16]int8
			var q [256]uint8
			for i := range sc {
				sc[i] = int8(r.IntN(256) - 128)
				if c.name == "extremes" {
					sc[i] = [2]int8{-128, 127}[i%2]
				} else if c.name == "zero scales" {
					sc[i] = 0
				}
			}
			for i := range q {
				q[i] = uint8(r.IntN(64))
				if c.name == "extremes" {
					q[i] = 63 * uint8(i%2)
				}
			}
			d := kernels.F16FromFloat32(-0.00731)
			got := make([]float32, 256)
			require.NoError(t, gguf.Dequantize(gguf.Q6_K, got, packQ6K(d, sc, q)))
			for e := range 256 {
				n, g, l := e/128, e%128/32, e%32
				s := sc[8*n+l/16+2*g]
				want := float32(kernels.F16ToFloat32(d)*float32(s)) * float32(int(q[e])-32)
				require.Equal(t, want, got[e], "element %d", e)
			}
		})
	}
}

// TestQuantizeBlocks checks Q8_0 and Q4_0 on blocks whose codes are known:
// the largest value maps to ±127 (Q8_0) or −8 (Q4_0), halves round away
// from zero, and dequantizing gives d·q.
func TestQuantizeBlocks(t *testing.T) {
	ramp := make([]float32, 32)
	for i := range ramp {
		ramp[i] = float32(i-16) / 16 // −1 … 0.9375
	}
	tests := []struct {
		name  string
		typ   gguf.Type
		in    []float32
		d     float32
		codes []int // the stored codes: int8 for Q8_0, 0…15 for Q4_0
	}{
		{"q8_0 zeros", gguf.Q8_0, make([]float32, 32), 0, make([]int, 32)},
		{"q8_0 ramp", gguf.Q8_0, ramp, 1.0 / 127, func() []int {
			c := make([]int, 32)
			for i := range c {
				c[i] = int(math.Round(float64(ramp[i] * 127)))
			}
			return c
		}()},
		{"q4_0 ramp", gguf.Q4_0, ramp, 1.0 / 8, func() []int {
			c := make([]int, 32)
			for i := range c {
				c[i] = min(15, int(ramp[i]*8+8.5))
			}
			return c
		}()},
		{"q4_0 zeros", gguf.Q4_0, make([]float32, 32), 0, func() []int {
			c := make([]int, 32)
			for i := range c {
				c[i] = 8
			}
			return c
		}()},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			b, err := gguf.Quantize(tc.typ, tc.in)
			require.NoError(t, err)
			require.Len(t, b, tc.typ.BlockBytes())
			d := kernels.F16ToFloat32(binary.LittleEndian.Uint16(b))
			assert.Equal(t, kernels.F16ToFloat32(kernels.F16FromFloat32(tc.d)), d)
			got := make([]float32, 32)
			require.NoError(t, gguf.Dequantize(tc.typ, got, b))
			for i, c := range tc.codes {
				if tc.typ == gguf.Q8_0 {
					require.Equal(t, c, int(int8(b[2+i])), "code %d", i)
					require.Equal(t, float32(c)*d, got[i])
				} else {
					nib := b[2+i%16] >> (4 * (i / 16)) & 0xf
					require.Equal(t, c, int(nib), "code %d", i)
					require.Equal(t, float32(c-8)*d, got[i])
				}
			}
		})
	}
	_, err := gguf.Quantize(gguf.Q4_K, ramp)
	assert.ErrorIs(t, err, gguf.ErrUnsupported)
	_, err = gguf.Quantize(gguf.Q8_0, ramp[:31])
	assert.ErrorIs(t, err, gguf.ErrInvalid)
	assert.ErrorIs(t, gguf.Dequantize(gguf.Q5_K, make([]float32, 256), make([]byte, 176)), gguf.ErrUnsupported)
	assert.ErrorIs(t, gguf.Dequantize(gguf.Q8_0, make([]float32, 32), make([]byte, 33)), gguf.ErrInvalid)
}

// TestFloatTypes checks F16 and BF16 round to nearest even both ways.
func TestFloatTypes(t *testing.T) {
	in := []float32{0, -0, 1, -2.5, 65504, 1e-8, float32(math.Inf(-1)), 3.14159}
	for _, typ := range []gguf.Type{gguf.F32, gguf.F16, gguf.BF16} {
		b, err := gguf.Quantize(typ, in)
		require.NoError(t, err)
		got := make([]float32, len(in))
		require.NoError(t, gguf.Dequantize(typ, got, b))
		for i, v := range in {
			want := v
			switch typ {
			case gguf.F16:
				want = kernels.F16ToFloat32(kernels.F16FromFloat32(v))
			case gguf.BF16:
				want = kernels.BF16ToFloat32(kernels.BF16FromFloat32(v))
			}
			assert.Equal(t, want, got[i], "%s %v", typ, v)
		}
	}
}
