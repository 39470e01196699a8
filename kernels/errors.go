package kernels

import (
	"errors"
	"fmt"
)

// Sentinel errors; every error a backend returns wraps one of them, so
// callers can test with errors.Is.
var (
	ErrShape       = errors.New("shape mismatch")
	ErrDType       = errors.New("dtype mismatch")
	ErrUnsupported = errors.New("not supported by this backend")
	ErrOutOfMemory = errors.New("out of memory")
	ErrNoDevice    = errors.New("no such device")
	ErrBackend     = errors.New("tensor belongs to another backend")
	ErrFreed       = errors.New("tensor already freed")
	ErrValue       = errors.New("invalid value")
)

// Checker collects the first failure of a series of argument checks for one
// operation, so that ops read as a list of requirements.
type Checker struct {
	op  string
	err error
}

// Check starts argument checks for the named operation.
func Check(op string) *Checker { return &Checker{op: op} }

// Err returns the first failure, naming the operation, or nil.
func (c *Checker) Err() error { return c.err }

func (c *Checker) fail(err error, format string, args ...any) *Checker {
	if c.err == nil {
		c.err = fmt.Errorf("%s: %s: %w", c.op, fmt.Sprintf(format, args...), err)
	}
	return c
}

// Tensor requires t to be non-nil, live and owned by b.
func (c *Checker) Tensor(name string, t *Tensor, b Backend) *Checker {
	switch {
	case t == nil:
		return c.fail(ErrShape, "%s is nil", name)
	case t.freed:
		return c.fail(ErrFreed, "%s", name)
	case b != nil && t.backend != b:
		return c.fail(ErrBackend, "%s is on %s", name, t.backend.Name())
	}
	return c
}

// DType requires t's dtype to be one of want.
func (c *Checker) DType(name string, t *Tensor, want ...DType) *Checker {
	if c.err != nil {
		return c
	}
	for _, d := range want {
		if t.dtype == d {
			return c
		}
	}
	return c.fail(ErrDType, "%s is %v, want one of %v", name, t.dtype, want)
}

// SameDType requires a and b to have the same dtype.
func (c *Checker) SameDType(an string, a *Tensor, bn string, b *Tensor) *Checker {
	if c.err == nil && a.dtype != b.dtype {
		c.fail(ErrDType, "%s is %v but %s is %v", an, a.dtype, bn, b.dtype)
	}
	return c
}

// Shape requires t to have exactly the shape want.
func (c *Checker) Shape(name string, t *Tensor, want ...int) *Checker {
	if c.err == nil && !t.shape.Equal(want) {
		c.fail(ErrShape, "%s has shape %v, want %v", name, t.shape, Shape(want))
	}
	return c
}

// Rank requires t to have at least min dimensions.
func (c *Checker) Rank(name string, t *Tensor, min int) *Checker {
	if c.err == nil && len(t.shape) < min {
		c.fail(ErrShape, "%s has shape %v, want at least %d dimensions", name, t.shape, min)
	}
	return c
}

// Len requires t to hold n elements.
func (c *Checker) Len(name string, t *Tensor, n int) *Checker {
	if c.err == nil && t.Len() != n {
		c.fail(ErrShape, "%s has %d elements (shape %v), want %d", name, t.Len(), t.shape, n)
	}
	return c
}

// That fails with err and the message unless ok holds.
func (c *Checker) That(ok bool, err error, format string, args ...any) *Checker {
	if c.err == nil && !ok {
		c.fail(err, format, args...)
	}
	return c
}
