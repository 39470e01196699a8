package kernels

import "fmt"

// Tensor is a dense, row-major array on one backend. Its storage is owned by
// that backend and reachable only through it; the zero Tensor is not usable.
type Tensor struct {
	shape   Shape
	dtype   DType
	backend Backend
	storage any // the backend's handle: host bytes, a device pointer, ...
	freed   bool
}

// NewTensor wraps backend-owned storage. It is for backend implementations;
// users allocate with Backend.Alloc.
func NewTensor(b Backend, dt DType, shape Shape, storage any) *Tensor {
	return &Tensor{shape: append(Shape(nil), shape...), dtype: dt, backend: b, storage: storage}
}

// Shape returns the tensor's dimensions. The caller must not modify it.
func (t *Tensor) Shape() Shape { return t.shape }

// DType returns the element type.
func (t *Tensor) DType() DType { return t.dtype }

// Backend returns the backend that owns the storage.
func (t *Tensor) Backend() Backend { return t.backend }

// Len is the number of elements.
func (t *Tensor) Len() int { return t.shape.Len() }

// Bytes is the size of the storage in bytes.
func (t *Tensor) Bytes() int64 { return int64(t.Len()) * int64(t.dtype.Size()) }

// Storage returns the backend's handle; only the owning backend interprets it.
func (t *Tensor) Storage() any { return t.storage }

// Freed reports whether the tensor has been returned to its backend.
func (t *Tensor) Freed() bool { return t.freed }

// MarkFreed is called by the owning backend when it releases the storage.
func (t *Tensor) MarkFreed() { t.freed = true; t.storage = nil }

// Reshape returns a view of t with another shape of the same length, sharing
// the storage; the view must not be used after t is freed, and is not
// itself freed.
func (t *Tensor) Reshape(shape ...int) (*Tensor, error) {
	s := Shape(shape)
	if err := s.Validate(); err != nil {
		return nil, err
	}
	if s.Len() != t.Len() {
		return nil, fmt.Errorf("kernels: reshape %v to %v: %w", t.shape, s, ErrShape)
	}
	return &Tensor{shape: s, dtype: t.dtype, backend: t.backend, storage: t.storage}, nil
}

// String describes the tensor, e.g. "f32[2 3] on cpu".
func (t *Tensor) String() string {
	name := "?"
	if t.backend != nil {
		name = t.backend.Name()
	}
	return fmt.Sprintf("%v%v on %s", t.dtype, t.shape, name)
}
