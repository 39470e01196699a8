package kernels

import (
	"encoding/binary"
	"fmt"
	"math"

	"github.com/x448/float16"
)

// DType is the element type of a tensor's storage.
type DType uint8

// The element types. Floating-point types narrower than 32 bits are computed
// in float32 by the CPU backend and rounded to the storage type on store.
const (
	Invalid DType = iota
	F32           // IEEE 754 binary32
	F16           // IEEE 754 binary16
	BF16          // bfloat16: the upper half of a binary32
	I8            // signed 8-bit integer, saturating conversion
	E4M3          // OCP FP8 E4M3 ("e4m3fn": no infinities, max 448)
	E5M2          // OCP FP8 E5M2 (IEEE-like, max 57344)
	I32           // signed 32-bit integer: token ids, lengths, targets
)

var dtypeNames = [...]string{
	Invalid: "invalid",
	F32:     "f32",
	F16:     "f16",
	BF16:    "bf16",
	I8:      "int8",
	E4M3:    "e4m3",
	E5M2:    "e5m2",
	I32:     "i32",
}

var dtypeSizes = [...]int{F32: 4, F16: 2, BF16: 2, I8: 1, E4M3: 1, E5M2: 1, I32: 4}

// String returns the name used in benchmark names: f32, f16, bf16, int8,
// e4m3, e5m2 or i32.
func (d DType) String() string {
	if int(d) < len(dtypeNames) {
		return dtypeNames[d]
	}
	return fmt.Sprintf("dtype(%d)", uint8(d))
}

// Size is the number of bytes of one element, or 0 for an invalid DType.
func (d DType) Size() int {
	if int(d) < len(dtypeSizes) {
		return dtypeSizes[d]
	}
	return 0
}

// Valid reports whether d is one of the defined element types.
func (d DType) Valid() bool { return d > Invalid && int(d) < len(dtypeNames) }

// IsFloat reports whether d is a floating-point type.
func (d DType) IsFloat() bool {
	switch d {
	case F32, F16, BF16, E4M3, E5M2:
		return true
	}
	return false
}

// FloatTypes are the dtypes the float ops compute in: every float tensor of
// an op has one of them.
var FloatTypes = []DType{F32, F16, BF16}

// ParseDType returns the DType named s (as printed by String; "int8" and
// "i8", "fp16" and "f16", "float32" and "f32" are accepted).
func ParseDType(s string) (DType, error) {
	switch s {
	case "f32", "fp32", "float32":
		return F32, nil
	case "f16", "fp16", "float16":
		return F16, nil
	case "bf16", "bfloat16":
		return BF16, nil
	case "int8", "i8":
		return I8, nil
	case "e4m3", "float8_e4m3fn", "f8e4m3":
		return E4M3, nil
	case "e5m2", "float8_e5m2", "f8e5m2":
		return E5M2, nil
	case "i32", "int32":
		return I32, nil
	}
	return Invalid, fmt.Errorf("kernels: unknown dtype %q (want f32, f16, bf16, int8, e4m3, e5m2 or i32): %w", s, ErrDType)
}

// BF16FromFloat32 rounds f to the nearest bfloat16, ties to even. NaN stays a
// (quiet) NaN and overflow gives ±Inf, as in PyTorch.
func BF16FromFloat32(f float32) uint16 {
	u := math.Float32bits(f)
	if u&0x7fffffff > 0x7f800000 { // NaN: keep sign, force quiet bit
		return uint16(u>>16) | 0x40
	}
	u += 0x7fff + (u>>16)&1
	return uint16(u >> 16)
}

// BF16ToFloat32 widens a bfloat16 exactly.
func BF16ToFloat32(h uint16) float32 { return math.Float32frombits(uint32(h) << 16) }

// F16FromFloat32 rounds f to the nearest binary16, ties to even. Finite
// values below binary16's overflow take a branch-free fast path (zeros and
// subnormals included, so that ReLU's zeros stay fast); overflow, infinities
// and NaN go through github.com/x448/float16, against which the tests check
// the fast path.
func F16FromFloat32(f float32) uint16 {
	u := math.Float32bits(f)
	a := u & 0x7fffffff
	if a >= 0x477ff000 { // rounds to ±Inf, or is Inf or NaN
		return uint16(float16.Fromfloat32(f))
	}
	// Normal results: rebias the exponent and round the 13 dropped bits.
	n := a - (127-15)<<23
	n = (n + 0xfff + (n>>13)&1) >> 13
	// Subnormal results (|f| < 2⁻¹⁴): adding 0.5 leaves |f| rounded to a
	// multiple of 2⁻²⁴, the binary16 subnormal step, in the low bits.
	s := math.Float32bits(math.Float32frombits(a)+0.5) - 0x3f000000
	small := uint32(int32(a-0x38800000) >> 31) // all ones when subnormal
	return uint16(u>>16)&0x8000 | uint16(s&small|n&^small)
}

// f16Table holds every binary16 value widened, filled by x448/float16.
var f16Table = func() *[1 << 16]float32 {
	var t [1 << 16]float32
	for h := range t {
		t[h] = float16.Frombits(uint16(h)).Float32()
	}
	return &t
}()

// F16ToFloat32 widens a binary16 exactly.
func F16ToFloat32(h uint16) float32 { return f16Table[h] }

// fp8 describes an 8-bit float layout.
type fp8 struct {
	man      uint    // mantissa bits
	bias     int     // exponent bias
	max      float32 // largest finite value
	ieeeSpec bool    // all-ones exponent is Inf/NaN (E5M2); else only S.1111.111 is NaN (E4M3)
}

var (
	fmtE4M3 = fp8{man: 3, bias: 7, max: 448}
	fmtE5M2 = fp8{man: 2, bias: 15, max: 57344, ieeeSpec: true}
)

func (f fp8) decode(b uint8) float32 {
	sign := float32(1)
	if b&0x80 != 0 {
		sign = -1
	}
	expBits := 7 - f.man
	e := int(b>>f.man) & (1<<expBits - 1)
	m := int(b) & (1<<f.man - 1)
	if f.ieeeSpec && e == 1<<expBits-1 {
		if m == 0 {
			return sign * float32(math.Inf(1))
		}
		return float32(math.NaN())
	}
	if !f.ieeeSpec && e == 1<<expBits-1 && m == 1<<f.man-1 {
		return float32(math.NaN())
	}
	if e == 0 { // subnormal
		return sign * float32(math.Ldexp(float64(m), 1-f.bias-int(f.man)))
	}
	return sign * float32(math.Ldexp(float64(1<<f.man+m), e-f.bias-int(f.man)))
}

// encode rounds x to nearest, ties to even, saturating to ±max (the
// "satfinite" conversion of CUDA's __nv_cvt_float_to_fp8). NaN maps to NaN.
// It works on x's bits, without branches on the value (which the
// rounding of random data would mispredict): the significand, with its
// implicit bit, is shifted right to the format's precision at x's
// exponent (further in the format's subnormal range; past every bit for
// zero, float32's subnormals and anything below half the smallest
// subnormal) and rounded up when the bits shifted out are more than
// half, or half with an odd result; a carry out of the significand moves
// into the exponent field, as it should.
func (f fp8) encode(x float32) uint8 {
	bits := math.Float32bits(x)
	sign := uint8(bits>>24) & 0x80
	abs := bits &^ (1 << 31)
	exp := int32(abs >> 23) // biased by 127; 0 for zero and float32's subnormals
	sig := abs&(1<<23-1) | uint32(b2i(exp != 0))<<23
	e := exp - 127 + int32(f.bias) // the format's biased exponent; below 1 in its subnormal range
	shift := int32(23-f.man) + max(1-e, 0)
	shift = min(shift, 31)               // 25 or more leaves nothing of a 24-bit significand
	base := uint32(max(e-1, 0)) << f.man // the exponent field, less the implicit bit sig adds
	q, rest, half := sig>>shift, sig&(1<<shift-1), uint32(1)<<(shift-1)
	q += uint32(b2i(rest > half) | b2i(rest == half)&q)
	code := uint8(base + q)
	if math.Float32frombits(abs) >= f.max {
		code = f.maxCode()
	}
	if abs > 0x7f800000 {
		code = 0x7f // a NaN in both formats
	}
	return sign | code
}

// b2i is 1 for true and 0 for false.
func b2i(b bool) uint32 {
	if b {
		return 1
	}
	return 0
}

// maxCode is the code of the format's largest finite value.
func (f fp8) maxCode() uint8 {
	if f.ieeeSpec {
		return 0x7b // E5M2: exponent 30, mantissa 3
	}
	return 0x7e // E4M3: exponent 15, mantissa 6 (7 is NaN)
}

// EncodeFP8 sets dst[i] to src[i]·scale (the product rounded to float32)
// rounded into dt, E4M3 or E5M2, as E4M3FromFloat32 and E5M2FromFloat32
// round, and returns the largest |src[i]| (NaN when one is NaN): the loop
// of a scaled cast with its amax. dst has src's length. A NaN product's
// sign is defined, not left to the processor's choice between two NaN
// operands: scale's when scale is NaN, else src[i]'s when it is NaN, else
// set (∞·0), as the CUDA backend encodes it.
func EncodeFP8(dt DType, dst []uint8, src []float32, scale float32) (amax float32, err error) {
	f := fmtE4M3
	switch {
	case dt == E5M2:
		f = fmtE5M2
	case dt != E4M3:
		return 0, fmt.Errorf("kernels: encode into %v: want e4m3 or e5m2: %w", dt, ErrDType)
	case len(dst) != len(src):
		return 0, fmt.Errorf("kernels: encode %d values into %d codes: %w", len(src), len(dst), ErrShape)
	}
	dst = dst[:len(src)]
	for i, v := range src {
		amax = max(amax, math.Float32frombits(math.Float32bits(v)&^(1<<31))) // max keeps a NaN
		p := v * scale
		if p != p {
			p = nanProduct(v, scale)
		}
		dst[i] = f.encode(p)
	}
	return amax, nil
}

// nanProduct is the NaN that EncodeFP8 gives v·scale when the product is
// NaN (see EncodeFP8).
func nanProduct(v, scale float32) float32 {
	sign := uint32(1 << 31) // ∞·0
	switch {
	case scale != scale:
		sign = math.Float32bits(scale) & (1 << 31)
	case v != v:
		sign = math.Float32bits(v) & (1 << 31)
	}
	return math.Float32frombits(sign | 0x7fc00000)
}

// E4M3FromFloat32 rounds f to the nearest FP8 E4M3 value, ties to even,
// saturating to ±448.
func E4M3FromFloat32(f float32) uint8 { return fmtE4M3.encode(f) }

// E4M3ToFloat32 widens an FP8 E4M3 value exactly.
func E4M3ToFloat32(b uint8) float32 { return fmtE4M3.decode(b) }

// E5M2FromFloat32 rounds f to the nearest FP8 E5M2 value, ties to even,
// saturating to ±57344 (infinities included).
func E5M2FromFloat32(f float32) uint8 { return fmtE5M2.encode(f) }

// E5M2ToFloat32 widens an FP8 E5M2 value exactly.
func E5M2ToFloat32(b uint8) float32 { return fmtE5M2.decode(b) }

// I8FromFloat32 rounds f to the nearest integer, ties to even, saturating to
// [-128, 127]; NaN gives 0.
func I8FromFloat32(f float32) int8 {
	switch {
	case f != f:
		return 0
	case f >= 127:
		return 127
	case f <= -128:
		return -128
	}
	return int8(math.RoundToEven(float64(f)))
}

// EncodeFloat32 converts src into dst, which holds len(src) elements of dtype
// d in little-endian byte order. I32 values are rounded to nearest, ties to
// even, and saturated.
func EncodeFloat32(d DType, dst []byte, src []float32) error {
	if len(dst) != len(src)*d.Size() || d.Size() == 0 {
		return fmt.Errorf("kernels: encode %d values as %v into %d bytes: %w", len(src), d, len(dst), ErrShape)
	}
	switch d {
	case F32:
		for i, v := range src {
			binary.LittleEndian.PutUint32(dst[4*i:], math.Float32bits(v))
		}
	case F16:
		for i, v := range src {
			binary.LittleEndian.PutUint16(dst[2*i:], F16FromFloat32(v))
		}
	case BF16:
		for i, v := range src {
			binary.LittleEndian.PutUint16(dst[2*i:], BF16FromFloat32(v))
		}
	case I8:
		for i, v := range src {
			dst[i] = uint8(I8FromFloat32(v))
		}
	case E4M3:
		for i, v := range src {
			dst[i] = E4M3FromFloat32(v)
		}
	case E5M2:
		for i, v := range src {
			dst[i] = E5M2FromFloat32(v)
		}
	case I32:
		for i, v := range src {
			binary.LittleEndian.PutUint32(dst[4*i:], uint32(I32FromFloat32(v)))
		}
	}
	return nil
}

// DecodeFloat32 widens src, len(dst) elements of dtype d, into dst.
func DecodeFloat32(d DType, dst []float32, src []byte) error {
	if len(src) != len(dst)*d.Size() || d.Size() == 0 {
		return fmt.Errorf("kernels: decode %d bytes of %v into %d values: %w", len(src), d, len(dst), ErrShape)
	}
	switch d {
	case F32:
		for i := range dst {
			dst[i] = math.Float32frombits(binary.LittleEndian.Uint32(src[4*i:]))
		}
	case F16:
		for i := range dst {
			dst[i] = F16ToFloat32(binary.LittleEndian.Uint16(src[2*i:]))
		}
	case BF16:
		for i := range dst {
			dst[i] = BF16ToFloat32(binary.LittleEndian.Uint16(src[2*i:]))
		}
	case I8:
		for i := range dst {
			dst[i] = float32(int8(src[i]))
		}
	case E4M3:
		for i := range dst {
			dst[i] = E4M3ToFloat32(src[i])
		}
	case E5M2:
		for i := range dst {
			dst[i] = E5M2ToFloat32(src[i])
		}
	case I32:
		for i := range dst {
			dst[i] = float32(int32(binary.LittleEndian.Uint32(src[4*i:])))
		}
	}
	return nil
}

// Round returns f rounded to the precision of d and widened back to float32:
// what storing f in a tensor of dtype d and reading it back gives.
func Round(d DType, f float32) float32 {
	switch d {
	case F16:
		return F16ToFloat32(F16FromFloat32(f))
	case BF16:
		return BF16ToFloat32(BF16FromFloat32(f))
	case I8:
		return float32(I8FromFloat32(f))
	case E4M3:
		return E4M3ToFloat32(E4M3FromFloat32(f))
	case E5M2:
		return E5M2ToFloat32(E5M2FromFloat32(f))
	case I32:
		return float32(I32FromFloat32(f))
	}
	return f
}

// I32FromFloat32 rounds f to the nearest int32, ties to even, saturating
// at the type's limits; NaN gives 0.
func I32FromFloat32(f float32) int32 {
	if f != f {
		return 0
	}
	return int32(math.Max(math.MinInt32, math.Min(math.MaxInt32, math.RoundToEven(float64(f)))))
}
