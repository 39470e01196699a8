package safetensors

import (
	"encoding/binary"
	"fmt"
	"math"

	"github.com/zbench/zbench/kernels"
)

// dtypeInfo describes one safetensors element type.
type dtypeInfo struct {
	bits int // bits per element
	rank int // position in the reference implementation's Dtype enum (increasing alignment)
}

// dtypes lists the element types of the safetensors format, keyed by the
// name used in the header, with their ranks in the reference
// implementation's Dtype enum.
var dtypes = map[string]dtypeInfo{
	"BOOL":        {8, 0},
	"F4":          {4, 1},
	"F6_E2M3":     {6, 2},
	"F6_E3M2":     {6, 3},
	"U8":          {8, 4},
	"I8":          {8, 5},
	"F8_E5M2":     {8, 6},
	"F8_E4M3":     {8, 7},
	"F8_E8M0":     {8, 8},
	"F8_E4M3FNUZ": {8, 9},
	"F8_E5M2FNUZ": {8, 10},
	"I16":         {16, 11},
	"U16":         {16, 12},
	"F16":         {16, 13},
	"BF16":        {16, 14},
	"I32":         {32, 15},
	"U32":         {32, 16},
	"F32":         {32, 17},
	"C64":         {64, 18},
	"F64":         {64, 19},
	"I64":         {64, 20},
	"U64":         {64, 21},
}

// DTypeBits returns the number of bits of one element of the named
// safetensors dtype ("F32", "BF16", "F4", ...) and whether the name is known.
func DTypeBits(dtype string) (int, bool) {
	d, ok := dtypes[dtype]
	return d.bits, ok
}

// byteSize returns the number of bytes of a tensor of dtype and shape, or an
// error naming the problem: an unknown dtype, a negative dimension, an
// overflow, or a sub-byte element count that does not fill whole bytes.
func byteSize(dtype string, shape []int) (int64, error) {
	d, ok := dtypes[dtype]
	if !ok {
		return 0, fmt.Errorf("unknown dtype %q", dtype)
	}
	n := int64(1)
	for i, dim := range shape {
		if dim < 0 {
			return 0, fmt.Errorf("dimension %d of shape %v is negative", i, shape)
		}
		if dim != 0 && n > math.MaxInt64/int64(dim) {
			return 0, fmt.Errorf("shape %v has too many elements", shape)
		}
		n *= int64(dim)
	}
	if n > math.MaxInt64/int64(d.bits) {
		return 0, fmt.Errorf("shape %v of %s is too large", shape, dtype)
	}
	bits := n * int64(d.bits)
	if bits%8 != 0 {
		return 0, fmt.Errorf("shape %v of %s (%d bits each) does not fill whole bytes", shape, dtype, d.bits)
	}
	return bits / 8, nil
}

// kernelDTypes maps the safetensors dtypes that have a kernels dtype to it.
var kernelDTypes = map[string]kernels.DType{
	"F32":     kernels.F32,
	"F16":     kernels.F16,
	"BF16":    kernels.BF16,
	"I8":      kernels.I8,
	"F8_E4M3": kernels.E4M3,
	"F8_E5M2": kernels.E5M2,
	"I32":     kernels.I32,
}

// KernelDType maps the tensor's dtype to the kernels package's DType: F32,
// F16, BF16, I8, F8_E4M3 (E4M3), F8_E5M2 (E5M2) and I32 have one; any other
// dtype is an error wrapping ErrConvert.
func (t Tensor) KernelDType() (kernels.DType, error) {
	if d, ok := kernelDTypes[t.DType]; ok {
		return d, nil
	}
	return kernels.Invalid, fmt.Errorf("safetensors: tensor %q: dtype %s has no kernels dtype: %w", t.Name, t.DType, ErrConvert)
}

// DTypeName returns the safetensors name of a kernels dtype: "F32", "F16",
// "BF16", "I8", "F8_E4M3", "F8_E5M2" or "I32".
func DTypeName(d kernels.DType) (string, error) {
	for name, kd := range kernelDTypes {
		if kd == d {
			return name, nil
		}
	}
	return "", fmt.Errorf("safetensors: kernels dtype %v has no safetensors name: %w", d, ErrConvert)
}

// Len is the number of elements: the product of the dimensions (1 for a
// scalar).
func (t Tensor) Len() int { return kernels.Shape(t.Shape).Len() }

// checkData verifies that Data holds exactly the bytes that DType and Shape
// call for.
func (t Tensor) checkData() error {
	size, err := byteSize(t.DType, t.Shape)
	if err != nil {
		return fmt.Errorf("safetensors: tensor %q: %s: %w", t.Name, err, ErrInvalid)
	}
	if int64(len(t.Data)) != size {
		return fmt.Errorf("safetensors: tensor %q: %d bytes of data but shape %v of %s needs %d: %w",
			t.Name, len(t.Data), t.Shape, t.DType, size, ErrInvalid)
	}
	return nil
}

// Float32 decodes the tensor's elements to float32. Floating-point dtypes
// (F32, F16, BF16, F64, F8_E4M3, F8_E5M2) are converted with the kernels
// package's conversions, F64 rounded to nearest; integer and BOOL dtypes are
// converted to the nearest float32. Other dtypes give an error wrapping
// ErrConvert.
func (t Tensor) Float32() ([]float32, error) {
	if err := t.checkData(); err != nil {
		return nil, err
	}
	n := t.Len()
	out := make([]float32, n)
	le := binary.LittleEndian
	b := t.Data
	if kd, ok := kernelDTypes[t.DType]; ok {
		if err := kernels.DecodeFloat32(kd, out, b); err != nil {
			return nil, fmt.Errorf("safetensors: tensor %q: %w", t.Name, err)
		}
		return out, nil
	}
	switch t.DType {
	case "F64":
		for i := range out {
			out[i] = float32(math.Float64frombits(le.Uint64(b[8*i:])))
		}
	case "BOOL", "U8":
		for i := range out {
			out[i] = float32(b[i])
		}
	case "I16":
		for i := range out {
			out[i] = float32(int16(le.Uint16(b[2*i:])))
		}
	case "U16":
		for i := range out {
			out[i] = float32(le.Uint16(b[2*i:]))
		}
	case "U32":
		for i := range out {
			out[i] = float32(le.Uint32(b[4*i:]))
		}
	case "I64":
		for i := range out {
			out[i] = float32(int64(le.Uint64(b[8*i:])))
		}
	case "U64":
		for i := range out {
			out[i] = float32(le.Uint64(b[8*i:]))
		}
	default:
		return nil, fmt.Errorf("safetensors: tensor %q: cannot decode %s as float32: %w", t.Name, t.DType, ErrConvert)
	}
	return out, nil
}

// Int32 decodes the tensor's elements to int32. Integer and BOOL dtypes are
// accepted; a value outside the int32 range is an error wrapping ErrConvert,
// as is a floating-point dtype.
func (t Tensor) Int32() ([]int32, error) {
	if err := t.checkData(); err != nil {
		return nil, err
	}
	n := t.Len()
	out := make([]int32, n)
	le := binary.LittleEndian
	b := t.Data
	outOfRange := func(i int, v any) error {
		return fmt.Errorf("safetensors: tensor %q: element %d = %v does not fit in int32: %w", t.Name, i, v, ErrConvert)
	}
	switch t.DType {
	case "I32":
		for i := range out {
			out[i] = int32(le.Uint32(b[4*i:]))
		}
	case "BOOL", "U8":
		for i := range out {
			out[i] = int32(b[i])
		}
	case "I8":
		for i := range out {
			out[i] = int32(int8(b[i]))
		}
	case "I16":
		for i := range out {
			out[i] = int32(int16(le.Uint16(b[2*i:])))
		}
	case "U16":
		for i := range out {
			out[i] = int32(le.Uint16(b[2*i:]))
		}
	case "U32":
		for i := range out {
			v := le.Uint32(b[4*i:])
			if v > math.MaxInt32 {
				return nil, outOfRange(i, v)
			}
			out[i] = int32(v)
		}
	case "I64":
		for i := range out {
			v := int64(le.Uint64(b[8*i:]))
			if v < math.MinInt32 || v > math.MaxInt32 {
				return nil, outOfRange(i, v)
			}
			out[i] = int32(v)
		}
	case "U64":
		for i := range out {
			v := le.Uint64(b[8*i:])
			if v > math.MaxInt32 {
				return nil, outOfRange(i, v)
			}
			out[i] = int32(v)
		}
	default:
		return nil, fmt.Errorf("safetensors: tensor %q: cannot decode %s as int32: %w", t.Name, t.DType, ErrConvert)
	}
	return out, nil
}
