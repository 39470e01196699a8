package cpu

import "github.com/zbench/zbench/kernels"

func (b *Backend) Add(out, a, x *kernels.Tensor) error { return kernels.ErrUnsupported }
func (b *Backend) Scale(out, x *kernels.Tensor, s float32) error { return kernels.ErrUnsupported }
func (b *Backend) Fill(out *kernels.Tensor, v float32) error { return kernels.ErrUnsupported }
func (b *Backend) Cast(out, x *kernels.Tensor) error { return kernels.ErrUnsupported }
func (b *Backend) Act(out, x *kernels.Tensor, a kernels.Activation) error { return kernels.ErrUnsupported }
func (b *Backend) ActBackward(dx, dy, x *kernels.Tensor, a kernels.Activation) error { return kernels.ErrUnsupported }
func (b *Backend) SumRows(out, x *kernels.Tensor) error { return kernels.ErrUnsupported }
