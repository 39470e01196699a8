package gguf

import (
	"encoding/binary"
	"fmt"
	"math"

	"github.com/zbench/zbench/internal/ranges"
	"github.com/zbench/zbench/kernels"
)

// encoders convert float32 values to whole blocks of a type.
var encoders = map[Type]func(dst []byte, src []float32){
	F32:  encodeF32,
	F16:  encodeF16,
	BF16: encodeBF16,
	Q8_0: quantizeQ8_0,
	Q4_0: quantizeQ4_0,
}

// Quantize converts src to type t (F32, F16, BF16, Q8_0 or Q4_0), by
// ggml's reference quantizers (quantize_row_*_ref, in float32 as C
// computes them): the bytes of len(src)/BlockSize blocks. len(src) must
// be a multiple of the block size.
func Quantize(t Type, src []float32) ([]byte, error) {
	fn, ok := encoders[t]
	if !ok {
		return nil, fmt.Errorf("gguf: cannot write tensors of type %s (this package writes F32, F16, BF16, Q8_0 and Q4_0): %w", t, ErrUnsupported)
	}
	i := t.info0()
	if len(src)%i.block != 0 {
		return nil, fmt.Errorf("gguf: %d values are not a whole number of %s blocks of %d: %w", len(src), t, i.block, ErrInvalid)
	}
	dst := make([]byte, len(src)/i.block*i.bytes)
	ranges.Parallel(len(src)/i.block, parallelBlocks, func(lo, hi int) {
		fn(dst[lo*i.bytes:hi*i.bytes], src[lo*i.block:hi*i.block])
	})
	return dst, nil
}

// parallelBlocks is the fewest blocks worth a goroutine of their own when
// Quantize and Dequantize convert a tensor in ranges over the processors
// (a model's tensors are converted whole, the largest of millions of
// values).
const parallelBlocks = 1 << 14

func encodeF32(dst []byte, src []float32) {
	for i, v := range src {
		binary.LittleEndian.PutUint32(dst[4*i:], math.Float32bits(v))
	}
}

func encodeF16(dst []byte, src []float32) {
	for i, v := range src {
		binary.LittleEndian.PutUint16(dst[2*i:], kernels.F16FromFloat32(v))
	}
}

func encodeBF16(dst []byte, src []float32) {
	for i, v := range src {
		binary.LittleEndian.PutUint16(dst[2*i:], kernels.BF16FromFloat32(v))
	}
}

// inverse is 1/d, or 0 for d = 0 (an all-zero block).
func inverse(d float32) float32 {
	if d == 0 {
		return 0
	}
	return 1 / d
}

// quantizeQ8_0: per block of 32, d = amax/127 and q = round(x·(1/d)),
// halves away from zero; d stored as f16.
func quantizeQ8_0(dst []byte, src []float32) {
	for b := 0; b < len(src)/qk; b++ {
		x := src[b*qk : b*qk+qk]
		var amax float32
		for _, v := range x {
			amax = max(amax, float32(math.Abs(float64(v))))
		}
		d := amax / 127
		id := inverse(d)
		blk := dst[b*34 : b*34+34]
		binary.LittleEndian.PutUint16(blk, kernels.F16FromFloat32(d))
		for j, v := range x {
			blk[2+j] = byte(int8(math.Round(float64(v * id))))
		}
	}
}

// quantizeQ4_0: per block of 32, m the first value of largest magnitude,
// d = m/−8 and q = min(15, trunc(x·(1/d) + 8.5)); d stored as f16, byte j
// holding element j in its low nibble and j+16 in its high one.
func quantizeQ4_0(dst []byte, src []float32) {
	for b := 0; b < len(src)/qk; b++ {
		x := src[b*qk : b*qk+qk]
		var amax, m float32
		for _, v := range x {
			if a := float32(math.Abs(float64(v))); amax < a {
				amax, m = a, v
			}
		}
		d := m / -8
		id := inverse(d)
		blk := dst[b*18 : b*18+18]
		binary.LittleEndian.PutUint16(blk, kernels.F16FromFloat32(d))
		for j := range qk / 2 {
			q0 := min(15, int8(float32(x[j]*id)+8.5)) // the conversion keeps the product unfused
			q1 := min(15, int8(float32(x[j+qk/2]*id)+8.5))
			blk[2+j] = byte(q0) | byte(q1)<<4
		}
	}
}
