package cpu

import "github.com/zbench/zbench/kernels"

func (b *Backend) Embedding(out, table, ids *kernels.Tensor) error { return kernels.ErrUnsupported }
func (b *Backend) EmbeddingBackward(dtable, dout, ids *kernels.Tensor) error { return kernels.ErrUnsupported }
func (b *Backend) CrossEntropy(loss, logits, targets *kernels.Tensor) error { return kernels.ErrUnsupported }
func (b *Backend) CrossEntropyBackward(dlogits, logits, targets *kernels.Tensor, scale float32) error { return kernels.ErrUnsupported }
