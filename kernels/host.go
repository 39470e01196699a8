package kernels

import (
	"encoding/binary"
	"fmt"
	"unsafe"
)

// FromFloat32 allocates a tensor of dtype dt on b and fills it with data,
// rounded to dt.
func FromFloat32(b Backend, dt DType, data []float32, shape ...int) (*Tensor, error) {
	if n := Shape(shape).Len(); n != len(data) {
		return nil, fmt.Errorf("kernels: %d values for shape %v (%d elements): %w", len(data), Shape(shape), n, ErrShape)
	}
	t, err := b.Alloc(dt, shape...)
	if err != nil {
		return nil, err
	}
	if err := UploadFloat32(t, data); err != nil {
		return nil, withCleanup(b.Free(t), err)
	}
	return t, nil
}

// UploadFloat32 copies data, rounded to t's dtype, into t, which has
// len(data) elements.
func UploadFloat32(t *Tensor, data []float32) error {
	if t.Len() != len(data) {
		return fmt.Errorf("kernels: %d values into %v: %w", len(data), t, ErrShape)
	}
	if t.DType() == F32 && littleEndian && len(data) > 0 {
		// The values' own bytes are the encoding.
		return t.Backend().Upload(t, unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(data))), 4*len(data)))
	}
	buf := make([]byte, t.Bytes())
	if err := EncodeFloat32(t.DType(), buf, data); err != nil {
		return err
	}
	return t.Backend().Upload(t, buf)
}

// littleEndian reports whether this machine stores values as tensors'
// bytes hold them, least significant byte first.
var littleEndian = binary.NativeEndian.Uint16([]byte{1, 0}) == 1

// FromInt32 allocates an I32 tensor on b holding data.
func FromInt32(b Backend, data []int32, shape ...int) (*Tensor, error) {
	if n := Shape(shape).Len(); n != len(data) {
		return nil, fmt.Errorf("kernels: %d values for shape %v (%d elements): %w", len(data), Shape(shape), n, ErrShape)
	}
	t, err := b.Alloc(I32, shape...)
	if err != nil {
		return nil, err
	}
	if err := UploadInt32(t, data); err != nil {
		return nil, withCleanup(b.Free(t), err)
	}
	return t, nil
}

// UploadInt32 copies data into the I32 tensor t, which has len(data)
// elements.
func UploadInt32(t *Tensor, data []int32) error {
	if t.DType() != I32 || t.Len() != len(data) {
		return fmt.Errorf("kernels: %d int32 values into %v: %w", len(data), t, ErrShape)
	}
	buf := make([]byte, 4*len(data))
	for i, v := range data {
		binary.LittleEndian.PutUint32(buf[4*i:], uint32(v))
	}
	return t.Backend().Upload(t, buf)
}

// ToFloat32 downloads t and widens it to float32.
func ToFloat32(t *Tensor) ([]float32, error) {
	buf := make([]byte, t.Bytes())
	if err := t.Backend().Download(buf, t); err != nil {
		return nil, err
	}
	out := make([]float32, t.Len())
	if err := DecodeFloat32(t.DType(), out, buf); err != nil {
		return nil, err
	}
	return out, nil
}

// withCleanup returns primary, mentioning the error of the clean-up that
// followed it, if any.
func withCleanup(cleanup, primary error) error {
	if cleanup != nil {
		return fmt.Errorf("%w (and on clean-up: %v)", primary, cleanup)
	}
	return primary
}

// ToInt32 downloads the I32 tensor t.
func ToInt32(t *Tensor) ([]int32, error) {
	if t.DType() != I32 {
		return nil, fmt.Errorf("kernels: int32 values of %v: %w", t, ErrDType)
	}
	buf := make([]byte, t.Bytes())
	if err := t.Backend().Download(buf, t); err != nil {
		return nil, err
	}
	out := make([]int32, t.Len())
	for i := range out {
		out[i] = int32(binary.LittleEndian.Uint32(buf[4*i:]))
	}
	return out, nil
}
