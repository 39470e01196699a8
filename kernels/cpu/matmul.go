package cpu

import "github.com/zbench/zbench/kernels"

// MatMul is not yet implemented.
func (b *Backend) MatMul(out, a, x *kernels.Tensor, p kernels.MatMulParams) error { return kernels.ErrUnsupported }
