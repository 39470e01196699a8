package cpu

import "github.com/zbench/zbench/kernels"

func (b *Backend) Softmax(out, x *kernels.Tensor, p kernels.AttentionParams) error { return kernels.ErrUnsupported }
func (b *Backend) SoftmaxBackward(dx, dy, y *kernels.Tensor) error { return kernels.ErrUnsupported }
func (b *Backend) Attention(out, q, k, v *kernels.Tensor, p kernels.AttentionParams) error { return kernels.ErrUnsupported }
func (b *Backend) AttentionBackward(dq, dk, dv, dout, q, k, v *kernels.Tensor, p kernels.AttentionParams) error { return kernels.ErrUnsupported }
