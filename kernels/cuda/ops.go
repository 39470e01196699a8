//go:build cuda

package cuda

import (
	"encoding/binary"
	"fmt"
	"math"

	"github.com/mumax/3/cuda/cu"

	"github.com/zbench/zbench/kernels"
	"github.com/zbench/zbench/kernels/check"
)

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
	n, nb, err := check.Add("cuda: add", b, out, x, y)
	if err != nil {
		return err
	}
	return wrap("add", b.launch("add_"+out.DType().String(), b.gridFor(int64(n)), dim3{x: block}, 0,
		ptrOf(out), ptrOf(x), ptrOf(y), int64(n), int64(nb)))
}

// Scale sets out = s·x.
func (b *Backend) Scale(out, x *kernels.Tensor, s float32) error {
	n, err := check.Scale("cuda: scale", b, out, x, s)
	if err != nil {
		return err
	}
	return wrap("scale", b.launch("scale_"+out.DType().String(), b.gridFor(int64(n)), dim3{x: block}, 0,
		ptrOf(out), ptrOf(x), int64(n), s))
}

// Fill sets every element of out to v.
func (b *Backend) Fill(out *kernels.Tensor, v float32) error {
	n, err := check.Fill("cuda: fill", b, out, v)
	if err != nil {
		return err
	}
	switch out.DType() {
	case kernels.I8, kernels.E4M3, kernels.E5M2, kernels.I32: // a memset of the encoded value
		var bits [4]byte
		size := out.DType().Size()
		if err := kernels.EncodeFloat32(out.DType(), bits[:size], []float32{v}); err != nil {
			return err
		}
		return b.call("cuda: fill", func() {
			if size == 1 {
				cu.MemsetD8Async(cu.DevicePtr(ptrOf(out)), bits[0], int64(n), b.stream)
			} else {
				cu.MemsetD32Async(cu.DevicePtr(ptrOf(out)), binary.LittleEndian.Uint32(bits[:]), int64(n), b.stream)
			}
		})
	}
	return wrap("fill", b.launch("fill_"+out.DType().String(), b.gridFor(int64(n)), dim3{x: block}, 0,
		ptrOf(out), int64(n), v))
}

// Cast converts x into out's dtype.
func (b *Backend) Cast(out, x *kernels.Tensor) error {
	n, err := check.Cast("cuda: cast", b, out, x)
	if err != nil {
		return err
	}
	return wrap("cast", b.launch("cast", b.gridFor(int64(n)), dim3{x: block}, 0,
		ptrOf(out), int32(out.DType()), ptrOf(x), int32(x.DType()), int64(n)))
}

// Act applies an activation elementwise.
func (b *Backend) Act(out, x *kernels.Tensor, a kernels.Activation) error {
	n, err := check.Act("cuda: act", b, out, x, a)
	if err != nil {
		return err
	}
	return wrap("act", b.launch("act_"+out.DType().String(), b.gridFor(int64(n)), dim3{x: block}, 0,
		ptrOf(out), ptrOf(x), int64(n), int32(a)))
}

// ActBackward sets dx = dy · act'(x).
func (b *Backend) ActBackward(dx, dy, x *kernels.Tensor, a kernels.Activation) error {
	n, err := check.ActBackward("cuda: actbackward", b, dx, dy, x, a)
	if err != nil {
		return err
	}
	return wrap("actbackward", b.launch("act_backward_"+dx.DType().String(), b.gridFor(int64(n)), dim3{x: block}, 0,
		ptrOf(dx), ptrOf(dy), ptrOf(x), int64(n), int32(a)))
}

// SumRows sums x over its leading dimensions.
func (b *Backend) SumRows(out, x *kernels.Tensor) error {
	rows, n, err := check.SumRows("cuda: sumrows", b, out, x)
	if err != nil {
		return err
	}
	return wrap("sumrows", b.launch("sum_rows_"+out.DType().String(), dim3{x: min((n+31)/32, 65535)}, dim3{x: 32, y: 32}, 0,
		ptrOf(out), ptrOf(x), int64(rows), int32(n)))
}

// SwapAxes sets out[a, c, b, d] = x[a, b, c, d], moving the widest unit of
// bytes (16 down to 2) that divides a row of D elements and to which both
// addresses are aligned.
func (b *Backend) SwapAxes(out, x *kernels.Tensor) error {
	g, err := check.SwapAxes("cuda: SwapAxes", b, out, x)
	if err != nil {
		return err
	}
	row := int64(g.D) * int64(x.DType().Size())
	unit := moveUnit(row, ptrOf(out), ptrOf(x))
	du := row / unit
	n := int64(g.A) * int64(g.B) * int64(g.C) * du
	return wrap("SwapAxes", b.launch(fmt.Sprintf("swap_axes_u%d", 8*unit), b.gridFor(n), dim3{x: block}, 0,
		ptrOf(out), ptrOf(x), int64(g.A), int64(g.B), int64(g.C), du))
}

// moveUnit is the widest unit, 16 bytes down to 2, in which the layout
// kernels (swap_axes_*, split_heads_*) move rows of row bytes between the
// addresses ptrs: one that divides row and to which every address is
// aligned.
func moveUnit(row int64, ptrs ...devptr) int64 {
	unit := int64(16)
	for unit > 2 {
		ok := row%unit == 0
		for _, p := range ptrs {
			ok = ok && int64(p)%unit == 0
		}
		if ok {
			break
		}
		unit /= 2
	}
	return unit
}

// AdamW applies one torch.optim.AdamW update to param, m and v in place;
// the scalars of the update are computed here in float64.
func (b *Backend) AdamW(param, grad, m, v *kernels.Tensor, p kernels.AdamWParams) error {
	n, err := check.AdamW("cuda: AdamW", b, param, grad, m, v, p)
	if err != nil {
		return err
	}
	bc1, bc2 := p.BiasCorrections()
	decay := float32(1 - float64(p.LR)*float64(p.WeightDecay))
	c1, c2 := float32(1-float64(p.Beta1)), float32(1-float64(p.Beta2))
	stepSize, bc2Sqrt := float32(float64(p.LR)/bc1), float32(math.Sqrt(bc2))
	return wrap("AdamW", b.launch("adamw_f32", b.gridFor(int64(n)), dim3{x: block}, 0,
		ptrOf(param), ptrOf(grad), ptrOf(m), ptrOf(v), int64(n),
		decay, p.Beta1, c1, p.Beta2, c2, stepSize, bc2Sqrt, p.Eps))
}
