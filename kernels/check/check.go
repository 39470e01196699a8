// Package check validates the arguments of the ops of package kernels, for
// the backends that implement them: one function per op, named after it
// (check.MatMul for Ops.MatMul, check.Conv2D for Vision.Conv2D, …), in one
// file per op group, so that every backend accepts the same calls and
// fails with the same messages.
//
// Each function validates the arguments of its op in the order the method
// takes them: tensors are non-nil, live and owned by be, dtypes and shapes
// agree, and parameters such as the activation code and eps are in range.
// It needs none of the tensors' data, so a device backend can call it
// before queuing work. The first failure is returned as an error that
// starts with op (by convention "<backend>: <op name>", e.g. "cpu: matmul")
// and wraps one of the sentinel errors of package kernels; on success the
// sizes the kernel needs are returned. Checks of values (ids, targets and
// KeyLens in range) read the data and are left to the backends, which
// report them through a Checker too.
package check

import (
	"fmt"
	"math"
	"reflect"

	"github.com/zbench/zbench/kernels"
)

// Checker collects the first failure of a series of argument checks for one
// operation, so that ops read as a list of requirements.
type Checker struct {
	op  string
	err error
}

// Op starts argument checks for the named operation.
func Op(op string) *Checker { return &Checker{op: op} }

// Err returns the first failure, naming the operation, or nil.
func (c *Checker) Err() error { return c.err }

func (c *Checker) fail(err error, format string, args ...any) *Checker {
	if c.err == nil {
		c.err = fmt.Errorf("%s: %s: %w", c.op, fmt.Sprintf(format, args...), err)
	}
	return c
}

// Tensor requires t to be non-nil, live and owned by b.
func (c *Checker) Tensor(name string, t *kernels.Tensor, b kernels.Backend) *Checker {
	switch {
	case t == nil:
		return c.fail(kernels.ErrShape, "%s is nil", name)
	case t.Freed():
		return c.fail(kernels.ErrFreed, "%s", name)
	case b != nil && t.Backend() != b:
		return c.fail(kernels.ErrBackend, "%s is on %s", name, t.Backend().Name())
	}
	return c
}

// DType requires t's dtype to be one of want.
func (c *Checker) DType(name string, t *kernels.Tensor, want ...kernels.DType) *Checker {
	if c.err != nil {
		return c
	}
	for _, d := range want {
		if t.DType() == d {
			return c
		}
	}
	return c.fail(kernels.ErrDType, "%s is %v, want one of %v", name, t.DType(), want)
}

// SameDType requires a and b to have the same dtype.
func (c *Checker) SameDType(an string, a *kernels.Tensor, bn string, b *kernels.Tensor) *Checker {
	if c.err == nil && a.DType() != b.DType() {
		c.fail(kernels.ErrDType, "%s is %v but %s is %v", an, a.DType(), bn, b.DType())
	}
	return c
}

// Shape requires t to have exactly the shape want.
func (c *Checker) Shape(name string, t *kernels.Tensor, want ...int) *Checker {
	if c.err == nil && !t.Shape().Equal(want) {
		c.fail(kernels.ErrShape, "%s has shape %v, want %v", name, t.Shape(), kernels.Shape(want))
	}
	return c
}

// Rank requires t to have at least min dimensions.
func (c *Checker) Rank(name string, t *kernels.Tensor, min int) *Checker {
	if c.err == nil && len(t.Shape()) < min {
		c.fail(kernels.ErrShape, "%s has shape %v, want at least %d dimensions", name, t.Shape(), min)
	}
	return c
}

// Len requires t to hold n elements.
func (c *Checker) Len(name string, t *kernels.Tensor, n int) *Checker {
	if c.err == nil && t.Len() != n {
		c.fail(kernels.ErrShape, "%s has %d elements (shape %v), want %d", name, t.Len(), t.Shape(), n)
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

// validAct reports whether a is one of the defined activations.
func validAct(a kernels.Activation) bool { return a <= kernels.ActTanh }

// finite reports whether v is neither infinite nor NaN.
func finite(v float32) bool { return !math.IsInf(float64(v), 0) && !math.IsNaN(float64(v)) }

// sameStorage reports whether a and b are the same allocation: a tensor and
// its Reshape views share the backend's handle. Handles of a type that
// cannot be compared count as distinct.
func sameStorage(a, b *kernels.Tensor) bool {
	sa, sb := a.Storage(), b.Storage()
	if sa == nil || sb == nil || !reflect.TypeOf(sa).Comparable() {
		return false
	}
	return sa == sb
}
