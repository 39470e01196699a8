package nn

import (
	"errors"
	"fmt"
	"maps"
	"slices"

	"github.com/zbench/zbench/kernels"
	"github.com/zbench/zbench/models/safetensors"
)

// TensorSet is a set of device tensors freed together, the named ones
// found by name: a model's parameters, or the activation buffers of a
// pass.
type TensorSet struct {
	be     kernels.Backend
	byName map[string]*kernels.Tensor
	all    []*kernels.Tensor
}

// NewTensorSet returns an empty set of tensors on be.
func NewTensorSet(be kernels.Backend) *TensorSet {
	return &TensorSet{be: be, byName: map[string]*kernels.Tensor{}}
}

// add remembers t, by name if name is not "". err, from making t, is
// returned prefixed with name.
func (s *TensorSet) add(name string, t *kernels.Tensor, err error) (*kernels.Tensor, error) {
	if err != nil {
		if name != "" {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
		return nil, err
	}
	s.all = append(s.all, t)
	if name != "" {
		s.byName[name] = t
	}
	return t, nil
}

// Alloc allocates an uninitialised tensor, remembered by name if name is
// not "". An error names the tensor.
func (s *TensorSet) Alloc(name string, dt kernels.DType, shape ...int) (*kernels.Tensor, error) {
	t, err := s.be.Alloc(dt, shape...)
	return s.add(name, t, err)
}

// Upload allocates a tensor of dtype dt holding vals, remembered by name
// if name is not "".
func (s *TensorSet) Upload(name string, dt kernels.DType, vals []float32, shape ...int) (*kernels.Tensor, error) {
	t, err := kernels.FromFloat32(s.be, dt, vals, shape...)
	return s.add(name, t, err)
}

// UploadBytes allocates a tensor of dtype dt holding data: its elements'
// little-endian bytes as the device stores them (a checkpoint's int8 codes
// as they are), remembered by name if name is not "".
func (s *TensorSet) UploadBytes(name string, dt kernels.DType, data []byte, shape ...int) (*kernels.Tensor, error) {
	t, err := s.Alloc(name, dt, shape...)
	if err != nil {
		return nil, err
	}
	if err := s.be.Upload(t, data); err != nil {
		return nil, errors.Join(fmt.Errorf("%s: %w", name, err), s.Release(t))
	}
	return t, nil
}

// Ints allocates an I32 tensor holding vals, remembered by name if name is
// not "".
func (s *TensorSet) Ints(name string, vals []int32, shape ...int) (*kernels.Tensor, error) {
	t, err := kernels.FromInt32(s.be, vals, shape...)
	return s.add(name, t, err)
}

// Get returns the tensor last remembered as name, or nil.
func (s *TensorSet) Get(name string) *kernels.Tensor { return s.byName[name] }

// Bytes is the size of the set's tensors (views are not in a set).
func (s *TensorSet) Bytes() int64 {
	var n int64
	for _, t := range s.all {
		n += t.Bytes()
	}
	return n
}

// Release frees t, one of the set's tensors, and forgets it (and its
// name); nil is nothing to release. A tensor not in the set is an error
// wrapping kernels.ErrValue.
func (s *TensorSet) Release(t *kernels.Tensor) error {
	if t == nil {
		return nil
	}
	i := slices.Index(s.all, t)
	if i < 0 {
		return fmt.Errorf("release %v: not in the set: %w", t, kernels.ErrValue)
	}
	s.all = slices.Delete(s.all, i, i+1)
	maps.DeleteFunc(s.byName, func(_ string, v *kernels.Tensor) bool { return v == t })
	return s.be.Free(t)
}

// Free releases every tensor of the set, which is empty afterwards.
func (s *TensorSet) Free() error {
	var errs []error
	for _, t := range s.all {
		errs = append(errs, s.be.Free(t))
	}
	s.all, s.byName = nil, map[string]*kernels.Tensor{}
	return errors.Join(errs...)
}

// Allocator allocates buffers into Set, keeping the first error: after
// one, every call does nothing and returns nil, so that a pass's buffers
// are allocated in a row and the error checked once, with Err.
type Allocator struct {
	Set *TensorSet
	err error
}

// Tensor allocates an unnamed tensor.
func (a *Allocator) Tensor(dt kernels.DType, shape ...int) *kernels.Tensor {
	if a.err != nil {
		return nil
	}
	var t *kernels.Tensor
	t, a.err = a.Set.Alloc("", dt, shape...)
	return t
}

// Ints allocates an I32 tensor named name holding vals, or left
// uninitialised when vals is nil.
func (a *Allocator) Ints(name string, vals []int32, shape ...int) *kernels.Tensor {
	if a.err != nil {
		return nil
	}
	var t *kernels.Tensor
	if vals == nil {
		t, a.err = a.Set.Alloc(name, kernels.I32, shape...)
	} else {
		t, a.err = a.Set.Ints(name, vals, shape...)
	}
	return t
}

// View returns x reshaped, sharing its memory.
func (a *Allocator) View(x *kernels.Tensor, shape ...int) *kernels.Tensor {
	if a.err != nil {
		return nil
	}
	var v *kernels.Tensor
	v, a.err = x.Reshape(shape...)
	return v
}

// Err is the first error of the calls so far.
func (a *Allocator) Err() error { return a.err }

// LoadParams uploads every parameter of ps from src into s in dtype dt,
// each remembered by its name. When src is a Checkpoint, a tensor of it
// that no parameter read is then an error (see Checkpoint.CheckUnused).
func LoadParams(s *TensorSet, src Source, ps []Param, dt kernels.DType) error {
	for _, p := range ps {
		if err := LoadParam(s, src, p, dt); err != nil {
			return err
		}
	}
	if c, ok := src.(*Checkpoint); ok {
		return c.CheckUnused()
	}
	return nil
}

// LoadParam uploads parameter p from src into s in dtype dt, remembered by
// its name: a checkpoint's tensor stored in dt as its bytes are, any other
// through float32.
func LoadParam(s *TensorSet, src Source, p Param, dt kernels.DType) error {
	if c, ok := src.(*Checkpoint); ok {
		if name, err := safetensors.DTypeName(dt); err == nil {
			if stored, err := c.DType(p.Name); err == nil && stored == name {
				t, err := c.Tensor(p, name)
				if err != nil {
					return err
				}
				_, err = s.UploadBytes(p.Name, dt, t.Data, p.Shape...)
				return err
			}
		}
	}
	v, err := src.Values(p)
	if err != nil {
		return err
	}
	_, err = s.Upload(p.Name, dt, v, p.Shape...)
	return err
}
