//go:build cuda

package cuda

import (
	"github.com/zbench/zbench/kernels"
	"github.com/zbench/zbench/kernels/check"
)

// The row kernels (norms, softmax, embedding, cross entropy) run one block
// or one warp per row in grid-stride loops; rowGrid caps their grids.
func rowGrid(rows int) dim3 { return dim3{x: min(rows, 1<<20)} }

// LayerNorm normalises rows of x, optionally saving mean and rstd.
func (b *Backend) LayerNorm(out, mean, rstd, x, gamma, beta *kernels.Tensor, eps float32) error {
	d, err := check.LayerNorm("cuda: LayerNorm", b, out, mean, rstd, x, gamma, beta, eps)
	if err != nil {
		return err
	}
	return wrap("LayerNorm", b.launch("layernorm_"+out.DType().String(), rowGrid(d.Rows), dim3{x: block}, 0,
		ptrOf(out), ptrOf(mean), ptrOf(rstd), ptrOf(x), ptrOf(gamma), ptrOf(beta), int32(d.Rows), int32(d.D), eps))
}

// LayerNormBackward computes dx, and dgamma and dbeta when asked, from
// per-block partial sums in the workspace added up in a second kernel.
func (b *Backend) LayerNormBackward(dx, dgamma, dbeta, dy, x, gamma, mean, rstd *kernels.Tensor) error {
	d, err := check.LayerNormBackward("cuda: LayerNormBackward", b, dx, dgamma, dbeta, dy, x, gamma, mean, rstd)
	if err != nil {
		return err
	}
	sfx := dx.DType().String()
	parts := min(d.Rows, 2*b.info.Cores)
	var partG, partB devptr
	if dgamma != nil || dbeta != nil {
		size := (int64(parts*d.D)*4 + 255) &^ 255
		base, err := b.workspace(2 * size)
		if err != nil {
			return wrap("LayerNormBackward", err)
		}
		if dgamma != nil {
			partG = base
		}
		if dbeta != nil {
			partB = base + devptr(size)
		}
	}
	if err := b.launch("layernorm_backward_"+sfx, dim3{x: parts}, dim3{x: block}, 0,
		ptrOf(dx), partG, partB, ptrOf(dy), ptrOf(x), ptrOf(gamma), ptrOf(mean), ptrOf(rstd), int32(d.Rows), int32(d.D)); err != nil {
		return wrap("LayerNormBackward", err)
	}
	if partG == 0 && partB == 0 {
		return nil
	}
	return wrap("LayerNormBackward", b.launch("layernorm_param_grads_"+sfx, dim3{x: (d.D + block - 1) / block}, dim3{x: block}, 0,
		ptrOf(dgamma), ptrOf(dbeta), partG, partB, int32(parts), int32(d.D)))
}

// RMSNorm sets out = x / sqrt(mean(x²) + eps) · gamma per row.
func (b *Backend) RMSNorm(out, x, gamma *kernels.Tensor, eps float32) error {
	d, err := check.RMSNorm("cuda: RMSNorm", b, out, x, gamma, eps)
	if err != nil {
		return err
	}
	return wrap("RMSNorm", b.launch("rmsnorm_"+out.DType().String(), rowGrid(d.Rows), dim3{x: block}, 0,
		ptrOf(out), ptrOf(x), ptrOf(gamma), int32(d.Rows), int32(d.D), eps))
}

// Softmax normalises rows of x with the masks of p; a warp per row.
func (b *Backend) Softmax(out, x *kernels.Tensor, p kernels.AttentionParams) error {
	d, err := check.Softmax("cuda: Softmax", b, out, x, p)
	if err != nil {
		return err
	}
	if err := b.checkKeyLens(checkSoftmaxLens, p, d.Sk); err != nil {
		return wrap("Softmax", err)
	}
	return wrap("Softmax", b.launch("softmax_"+out.DType().String(), rowGrid((d.Rows+7)/8), dim3{x: block}, 0,
		ptrOf(out), ptrOf(x), int32(d.Rows), int32(d.Sk), int32(d.Sq), int32(d.RowsPerBatch),
		p.Scale, int32(boolInt(p.Causal)), ptrOf(p.KeyLens)))
}

// SoftmaxBackward sets dx = y ⊙ (dy − Σ dy⊙y) per row.
func (b *Backend) SoftmaxBackward(dx, dy, y *kernels.Tensor) error {
	d, err := check.SoftmaxBackward("cuda: SoftmaxBackward", b, dx, dy, y)
	if err != nil {
		return err
	}
	return wrap("SoftmaxBackward", b.launch("softmax_backward_"+dx.DType().String(), rowGrid((d.Rows+7)/8), dim3{x: block}, 0,
		ptrOf(dx), ptrOf(dy), ptrOf(y), int32(d.Rows), int32(d.D)))
}

// Embedding gathers rows of table; ids out of range are reported by the
// next Sync.
func (b *Backend) Embedding(out, table, ids *kernels.Tensor) error {
	d, err := check.Embedding("cuda: Embedding", b, out, table, ids)
	if err != nil {
		return err
	}
	return wrap("Embedding", b.launch("embedding_"+out.DType().String(), dim3{x: min(d.N, 65535)}, dim3{x: 128}, 0,
		ptrOf(out), ptrOf(table), ptrOf(ids), int64(d.N), int32(d.V), int32(d.D),
		b.errorSlot(checkEmbedding, d.V)))
}

// EmbeddingBackward scatter-adds dout rows into dtable by ids with float32
// atomics (in the workspace for 16-bit tables, then cast).
func (b *Backend) EmbeddingBackward(dtable, dout, ids *kernels.Tensor) error {
	d, err := check.EmbeddingBackward("cuda: EmbeddingBackward", b, dtable, dout, ids)
	if err != nil {
		return err
	}
	if err := b.checkRange(checkEmbeddingBackward, ids, 0, int32(d.V), -1, d.V); err != nil {
		return wrap("EmbeddingBackward", err)
	}
	acc := ptrOf(dtable)
	bytes := int64(d.V) * int64(d.D) * 4
	if dtable.DType() != kernels.F32 {
		if acc, err = b.workspace(bytes); err != nil {
			return wrap("EmbeddingBackward", err)
		}
	}
	if err := b.memsetZero(acc, bytes); err != nil {
		return err
	}
	if err := b.launch("embedding_backward_"+dtable.DType().String(), dim3{x: min(d.N, 65535)}, dim3{x: 128}, 0,
		acc, ptrOf(dout), ptrOf(ids), int64(d.N), int32(d.V), int32(d.D)); err != nil {
		return wrap("EmbeddingBackward", err)
	}
	if dtable.DType() == kernels.F32 {
		return nil
	}
	n := int64(d.V) * int64(d.D)
	return wrap("EmbeddingBackward", b.launch("cast", b.gridFor(n), dim3{x: block}, 0,
		ptrOf(dtable), int32(dtable.DType()), acc, int32(kernels.F32), n))
}

// CrossEntropy sets loss[i] = logsumexp(logits[i]) − logits[i, t[i]].
func (b *Backend) CrossEntropy(loss, logits, targets *kernels.Tensor) error {
	n, v, err := check.CrossEntropy("cuda: CrossEntropy", b, loss, logits, targets)
	if err != nil {
		return err
	}
	return wrap("CrossEntropy", b.launch("cross_entropy_"+logits.DType().String(), rowGrid(n), dim3{x: block}, 0,
		ptrOf(loss), ptrOf(logits), ptrOf(targets), int32(n), int32(v),
		b.errorSlot(checkCrossEntropy, v)))
}

// CrossEntropyBackward sets dlogits = scale·(softmax(logits) − onehot).
func (b *Backend) CrossEntropyBackward(dlogits, logits, targets *kernels.Tensor, scale float32) error {
	n, v, err := check.CrossEntropyBackward("cuda: CrossEntropyBackward", b, dlogits, logits, targets, scale)
	if err != nil {
		return err
	}
	return wrap("CrossEntropyBackward", b.launch("cross_entropy_backward_"+dlogits.DType().String(), rowGrid(n), dim3{x: block}, 0,
		ptrOf(dlogits), ptrOf(logits), ptrOf(targets), int32(n), int32(v), scale,
		b.errorSlot(checkCrossEntropyBackward, v)))
}
