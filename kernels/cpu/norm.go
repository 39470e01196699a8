package cpu

import "github.com/zbench/zbench/kernels"

func (b *Backend) LayerNorm(out, mean, rstd, x, gamma, beta *kernels.Tensor, eps float32) error { return kernels.ErrUnsupported }
func (b *Backend) LayerNormBackward(dx, dgamma, dbeta, dy, x, gamma, mean, rstd *kernels.Tensor) error { return kernels.ErrUnsupported }
func (b *Backend) RMSNorm(out, x, gamma *kernels.Tensor, eps float32) error { return kernels.ErrUnsupported }
