//go:build cuda

package cuda

import (
	"fmt"

	"github.com/zbench/zbench/kernels"
)

// suffix names a float dtype in kernel names.
func suffix(dt kernels.DType) string {
	switch dt {
	case kernels.F16:
		return "f16"
	case kernels.BF16:
		return "bf16"
	}
	return "f32"
}

// block is the thread count of the grid-stride kernels.
const block = 256

// gridFor returns the blocks of a grid-stride kernel over n elements: one
// per 256 elements up to 32 resident blocks per multiprocessor.
func (b *Backend) gridFor(n int64) dim3 {
	g := (n + block - 1) / block
	return dim3{x: int(min(g, int64(32*max(b.info.Cores, 1))))}
}

// wrap prefixes a launch error with the operation.
func wrap(op string, err error) error {
	if err != nil {
		return fmt.Errorf("cuda: %s: %w", op, err)
	}
	return nil
}

// Add sets out = a + b with b broadcast over a's leading dimensions.
func (b *Backend) Add(out, x, y *kernels.Tensor) error {
	n, nb, err := kernels.CheckAdd("cuda: add", b, out, x, y)
	if err != nil || n == 0 {
		return err
	}
	return wrap("add", b.launch("add_"+suffix(out.DType()), b.gridFor(int64(n)), dim3{x: block}, 0,
		ptrOf(out), ptrOf(x), ptrOf(y), int64(n), int64(nb)))
}

// Scale sets out = s·x.
func (b *Backend) Scale(out, x *kernels.Tensor, s float32) error {
	n, err := kernels.CheckScale("cuda: scale", b, out, x, s)
	if err != nil || n == 0 {
		return err
	}
	return wrap("scale", b.launch("scale_"+suffix(out.DType()), b.gridFor(int64(n)), dim3{x: block}, 0,
		ptrOf(out), ptrOf(x), int64(n), s))
}

// Fill sets every element of out to v.
func (b *Backend) Fill(out *kernels.Tensor, v float32) error {
	n, err := kernels.CheckFill("cuda: fill", b, out, v)
	if err != nil || n == 0 {
		return err
	}
	return wrap("fill", b.launch("fill_"+suffix(out.DType()), b.gridFor(int64(n)), dim3{x: block}, 0,
		ptrOf(out), int64(n), v))
}

// Cast converts x into out's dtype.
func (b *Backend) Cast(out, x *kernels.Tensor) error {
	n, err := kernels.CheckCast("cuda: cast", b, out, x)
	if err != nil || n == 0 {
		return err
	}
	return wrap("cast", b.launch("cast", b.gridFor(int64(n)), dim3{x: block}, 0,
		ptrOf(out), int32(out.DType()), ptrOf(x), int32(x.DType()), int64(n)))
}

// Act applies an activation elementwise.
func (b *Backend) Act(out, x *kernels.Tensor, a kernels.Activation) error {
	n, err := kernels.CheckAct("cuda: act", b, out, x, a)
	if err != nil || n == 0 {
		return err
	}
	return wrap("act", b.launch("act_"+suffix(out.DType()), b.gridFor(int64(n)), dim3{x: block}, 0,
		ptrOf(out), ptrOf(x), int64(n), int32(a)))
}

// ActBackward sets dx = dy · act'(x).
func (b *Backend) ActBackward(dx, dy, x *kernels.Tensor, a kernels.Activation) error {
	n, err := kernels.CheckActBackward("cuda: actbackward", b, dx, dy, x, a)
	if err != nil || n == 0 {
		return err
	}
	return wrap("act backward", b.launch("act_backward_"+suffix(dx.DType()), b.gridFor(int64(n)), dim3{x: block}, 0,
		ptrOf(dx), ptrOf(dy), ptrOf(x), int64(n), int32(a)))
}

// SumRows sums x over its leading dimensions.
func (b *Backend) SumRows(out, x *kernels.Tensor) error {
	rows, n, err := kernels.CheckSumRows("cuda: sumrows", b, out, x)
	if err != nil || n == 0 {
		return err
	}
	return wrap("sum rows", b.launch("sum_rows_"+suffix(out.DType()), dim3{x: (n + block - 1) / block}, dim3{x: block}, 0,
		ptrOf(out), ptrOf(x), int64(rows), int32(n)))
}
