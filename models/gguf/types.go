package gguf

import (
	"encoding/binary"
	"fmt"
	"math"

	"github.com/zbench/zbench/internal/ranges"
	"github.com/zbench/zbench/kernels"
)

// Type is a ggml tensor type (ggml_type).
type Type uint32

// The ggml types whose layout this package knows. Dequantize reads F32,
// F16, BF16, Q8_0, Q4_0, Q4_K and Q6_K; the others are parsed (their sizes
// checked) but not converted.
const (
	F32  Type = 0
	F16  Type = 1
	Q4_0 Type = 2
	Q4_1 Type = 3
	Q5_0 Type = 6
	Q5_1 Type = 7
	Q8_0 Type = 8
	Q8_1 Type = 9
	Q2_K Type = 10
	Q3_K Type = 11
	Q4_K Type = 12
	Q5_K Type = 13
	Q6_K Type = 14
	Q8_K Type = 15
	I8   Type = 24
	I16  Type = 25
	I32  Type = 26
	I64  Type = 27
	F64  Type = 28
	BF16 Type = 30
)

// typeInfo is a type's block: values per block and bytes per block.
type typeInfo struct {
	name         string
	block, bytes int
}

// qk is the values in a block of the legacy types (QK4_0, QK8_0); qkK
// those in a K-quant super-block (QK_K).
const (
	qk  = 32
	qkK = 256
)

var typeInfos = map[Type]typeInfo{
	F32: {"F32", 1, 4}, F16: {"F16", 1, 2}, BF16: {"BF16", 1, 2}, F64: {"F64", 1, 8},
	I8: {"I8", 1, 1}, I16: {"I16", 1, 2}, I32: {"I32", 1, 4}, I64: {"I64", 1, 8},
	// d f16, qs[16]
	Q4_0: {"Q4_0", qk, 2 + qk/2},
	// d, m f16, qs[16]
	Q4_1: {"Q4_1", qk, 4 + qk/2},
	// d f16, qh[4], qs[16]
	Q5_0: {"Q5_0", qk, 2 + 4 + qk/2},
	// d, m f16, qh[4], qs[16]
	Q5_1: {"Q5_1", qk, 4 + 4 + qk/2},
	// d f16, qs[32] int8
	Q8_0: {"Q8_0", qk, 2 + qk},
	// d, s f16, qs[32]
	Q8_1: {"Q8_1", qk, 4 + qk},
	// scales[16], qs[64], d, dmin f16
	Q2_K: {"Q2_K", qkK, qkK/16 + qkK/4 + 4},
	// hmask[32], qs[64], scales[12], d f16
	Q3_K: {"Q3_K", qkK, qkK/8 + qkK/4 + 12 + 2},
	// d, dmin f16, scales[12], qs[128]
	Q4_K: {"Q4_K", qkK, 4 + 12 + qkK/2},
	// d, dmin f16, scales[12], qh[32], qs[128]
	Q5_K: {"Q5_K", qkK, 4 + 12 + qkK/8 + qkK/2},
	// ql[128], qh[64], scales[16] int8, d f16
	Q6_K: {"Q6_K", qkK, qkK/2 + qkK/4 + qkK/16 + 2},
	// d f32, qs[256] int8, bsums[16] int16
	Q8_K: {"Q8_K", qkK, 4 + qkK + qkK/16*2},
}

func (t Type) info() (typeInfo, bool) {
	i, ok := typeInfos[t]
	return i, ok
}

func (t Type) String() string {
	if i, ok := t.info(); ok {
		return i.name
	}
	return fmt.Sprintf("ggml_type(%d)", uint32(t))
}

// ParseType returns the type of a name ("Q8_0", "F16", ...).
func ParseType(name string) (Type, error) {
	for t, i := range typeInfos {
		if i.name == name {
			return t, nil
		}
	}
	return 0, fmt.Errorf("gguf: unknown tensor type %q: %w", name, ErrUnsupported)
}

// BlockSize is the number of values in one block of t (1 for the plain
// types), and BlockBytes its size; both 0 for an unknown type.
func (t Type) BlockSize() int  { i, _ := t.info(); return i.block }
func (t Type) BlockBytes() int { i, _ := t.info(); return i.bytes }

// dequantizers convert whole blocks of a type to float32.
var dequantizers = map[Type]func(dst []float32, src []byte){
	F32:  dequantF32,
	F16:  dequantF16,
	BF16: dequantBF16,
	Q8_0: dequantQ8_0,
	Q4_0: dequantQ4_0,
	Q4_K: dequantQ4_K,
	Q6_K: dequantQ6_K,
}

// Dequantize converts src, whole blocks of type t holding len(dst) values,
// to float32 in dst, by the definition of ggml's dequantize_row_* (each
// product rounded to float32 as C computes it).
func Dequantize(t Type, dst []float32, src []byte) error {
	fn, ok := dequantizers[t]
	if !ok {
		return fmt.Errorf("gguf: tensor type %s cannot be converted to float32 (this package reads F32, F16, BF16, Q8_0, Q4_0, Q4_K and Q6_K): %w", t, ErrUnsupported)
	}
	i := t.info0()
	if len(dst)%i.block != 0 || len(src) != len(dst)/i.block*i.bytes {
		return fmt.Errorf("gguf: %d values of %s need %d bytes, got %d: %w", len(dst), t, len(dst)/i.block*i.bytes, len(src), ErrInvalid)
	}
	ranges.Parallel(len(dst)/i.block, parallelBlocks, func(lo, hi int) {
		fn(dst[lo*i.block:hi*i.block], src[lo*i.bytes:hi*i.bytes])
	})
	return nil
}

// info0 is info for a type known to be in the table.
func (t Type) info0() typeInfo { i, _ := t.info(); return i }

func f16(b []byte) float32 { return kernels.F16ToFloat32(binary.LittleEndian.Uint16(b)) }

func dequantF32(dst []float32, src []byte) {
	for i := range dst {
		dst[i] = math.Float32frombits(binary.LittleEndian.Uint32(src[4*i:]))
	}
}

func dequantF16(dst []float32, src []byte) {
	for i := range dst {
		dst[i] = f16(src[2*i:])
	}
}

func dequantBF16(dst []float32, src []byte) {
	for i := range dst {
		dst[i] = kernels.BF16ToFloat32(binary.LittleEndian.Uint16(src[2*i:]))
	}
}

// dequantQ8_0: value = d·q.
func dequantQ8_0(dst []float32, src []byte) {
	for b := 0; b < len(dst)/qk; b++ {
		blk := src[b*34 : b*34+34]
		d := f16(blk)
		y := dst[b*qk : b*qk+qk]
		for j := range y {
			y[j] = float32(int8(blk[2+j])) * d
		}
	}
}

// dequantQ4_0: value = d·(q − 8), byte j holding element j (low nibble)
// and j+16 (high).
func dequantQ4_0(dst []float32, src []byte) {
	for b := 0; b < len(dst)/qk; b++ {
		blk := src[b*18 : b*18+18]
		d := f16(blk)
		y := dst[b*qk : b*qk+qk]
		for j := range qk / 2 {
			q := blk[2+j]
			y[j] = float32(int(q&0xf)-8) * d
			y[j+qk/2] = float32(int(q>>4)-8) * d
		}
	}
}

// scaleMinK4 is ggml's get_scale_min_k4: the 6-bit scale and min of
// sub-block j of a Q4_K (or Q5_K) super-block's 12 packed bytes.
func scaleMinK4(j int, q []byte) (sc, m uint8) {
	if j < 4 {
		return q[j] & 63, q[j+4] & 63
	}
	return q[j+4]&0xf | (q[j-4]>>6)<<4, q[j+4]>>4 | (q[j]>>6)<<4
}

// dequantQ4_K: super-blocks of 256 in eight sub-blocks of 32, value =
// d·sc·q − dmin·m with 6-bit sc and m per sub-block; each 32 bytes of qs
// hold two sub-blocks (low nibbles, then high).
func dequantQ4_K(dst []float32, src []byte) {
	const size = 144
	for b := 0; b < len(dst)/qkK; b++ {
		blk := src[b*size : b*size+size]
		d, dmin := f16(blk), f16(blk[2:])
		scales, q := blk[4:16], blk[16:]
		y := dst[b*qkK : b*qkK+qkK]
		for j, is := 0, 0; j < qkK; j, is = j+64, is+2 {
			sc, m := scaleMinK4(is, scales)
			d1, m1 := d*float32(sc), dmin*float32(m)
			sc, m = scaleMinK4(is+1, scales)
			d2, m2 := d*float32(sc), dmin*float32(m)
			for l := range 32 {
				y[j+l] = float32(d1*float32(q[l]&0xf)) - m1
				y[j+32+l] = float32(d2*float32(q[l]>>4)) - m2
			}
			q = q[32:]
		}
	}
}

// dequantQ6_K: super-blocks of 256 in sixteen sub-blocks of 16 with int8
// scales, value = d·sc·(q − 32), q's low 4 bits in ql and high 2 in qh.
func dequantQ6_K(dst []float32, src []byte) {
	const size = 210
	for b := 0; b < len(dst)/qkK; b++ {
		blk := src[b*size : b*size+size]
		ql, qh, sc := blk[:128], blk[128:192], blk[192:208]
		d := f16(blk[208:])
		y := dst[b*qkK : b*qkK+qkK]
		for n := 0; n < qkK; n += 128 {
			for l := range 32 {
				is := l / 16
				q1 := int(ql[l]&0xf|(qh[l]>>0&3)<<4) - 32
				q2 := int(ql[l+32]&0xf|(qh[l]>>2&3)<<4) - 32
				q3 := int(ql[l]>>4|(qh[l]>>4&3)<<4) - 32
				q4 := int(ql[l+32]>>4|(qh[l]>>6&3)<<4) - 32
				y[n+l] = float32(d*float32(int8(sc[is]))) * float32(q1)
				y[n+l+32] = float32(d*float32(int8(sc[is+2]))) * float32(q2)
				y[n+l+64] = float32(d*float32(int8(sc[is+4]))) * float32(q3)
				y[n+l+96] = float32(d*float32(int8(sc[is+6]))) * float32(q4)
			}
			ql, qh, sc = ql[64:], qh[32:], sc[8:]
		}
	}
}
