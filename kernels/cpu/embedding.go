package cpu

import (
	"math"

	"github.com/zbench/zbench/kernels"
	"github.com/zbench/zbench/kernels/check"
)

// Embedding gathers the rows of table named by ids into out.
func (b *Backend) Embedding(out, table, ids *kernels.Tensor) error {
	const op = "cpu: Embedding"
	dims, err := check.Embedding(op, b, out, table, ids)
	if err != nil {
		return err
	}
	d, idv := dims.D, i32(ids)[:dims.N]
	if err := checkIDs(op, "ids", idv, ids.Shape(), dims.V, false); err != nil {
		return err
	}

	// Rows are copied as bytes: out and table share the dtype.
	rb := d * table.DType().Size()
	src, dst := bytesOf(table), bytesOf(out)
	parallelFor(len(idv), d, func(lo, hi int) {
		for i := lo; i < hi; i++ {
			id := int(idv[i])
			copy(dst[i*rb:(i+1)*rb], src[id*rb:(id+1)*rb])
		}
	})
	return nil
}

// checkIDs requires every value of ids (a tensor of the given shape) to lie
// in [0, v), or to be kernels.IgnoreIndex when ignore is set; the error names
// the first offending value and its position.
func checkIDs(op, name string, ids []int32, shape kernels.Shape, v int, ignore bool) error {
	for i, id := range ids {
		if (id >= 0 && int(id) < v) || (ignore && id == kernels.IgnoreIndex) {
			continue
		}
		pos := make(kernels.Shape, len(shape))
		for a, rest := len(shape)-1, i; a >= 0; a-- {
			pos[a], rest = rest%shape[a], rest/shape[a]
		}
		also := ""
		if ignore {
			also = " or IgnoreIndex"
		}
		return check.Op(op).That(false, kernels.ErrValue,
			"%s%v = %d, want it in [0, %d)%s", name, pos, id, v, also).Err()
	}
	return nil
}

// embedColBlock is the number of columns of dtable that one work item of
// EmbeddingBackward owns: a few cache lines, so that goroutines do not
// share them.
const embedColBlock = 32

// EmbeddingBackward sets dtable to the scatter-sum of the rows of dout by
// ids, in parallel over blocks of columns so that each goroutine owns the
// elements it sums into.
func (b *Backend) EmbeddingBackward(dtable, dout, ids *kernels.Tensor) error {
	const op = "cpu: EmbeddingBackward"
	dims, err := check.EmbeddingBackward(op, b, dtable, dout, ids)
	if err != nil {
		return err
	}
	vocab, d, idv := dims.V, dims.D, i32(ids)[:dims.N]
	if err := checkIDs(op, "ids", idv, ids.Shape(), vocab, false); err != nil {
		return err
	}

	g := in32(dout)
	dt, flush := out32(dtable, false)
	blocks := (d + embedColBlock - 1) / embedColBlock
	parallelFor(blocks, embedColBlock*(vocab+len(idv)), func(lo, hi int) {
		c0, c1 := lo*embedColBlock, min(d, hi*embedColBlock)
		for r := range vocab {
			clear(dt[r*d+c0 : r*d+c1])
		}
		for i, id := range idv {
			dst, src := dt[int(id)*d+c0:int(id)*d+c1], g[i*d+c0:i*d+c1]
			src = src[:len(dst)]
			for t, x := range src {
				dst[t] += x
			}
		}
	})
	flush()
	return nil
}

// ceTargets returns the targets of a validated CrossEntropy call, N of
// them, after checking that each lies in [0, v) or is kernels.IgnoreIndex.
func ceTargets(op string, targets *kernels.Tensor, n, v int) ([]int32, error) {
	tv := i32(targets)[:n]
	if err := checkIDs(op, "targets", tv, targets.Shape(), v, true); err != nil {
		return nil, err
	}
	return tv, nil
}

// CrossEntropy sets loss[i] = logsumexp(logits[i]) − logits[i, targets[i]],
// or 0 where the target is kernels.IgnoreIndex.
func (b *Backend) CrossEntropy(loss, logits, targets *kernels.Tensor) error {
	const op = "cpu: CrossEntropy"
	n, v, err := check.CrossEntropy(op, b, loss, logits, targets)
	if err != nil {
		return err
	}
	tv, err := ceTargets(op, targets, n, v)
	if err != nil {
		return err
	}
	xs, ls := in32(logits), f32(loss)
	parallelFor(len(tv), 4*v, func(lo, hi int) {
		for i := lo; i < hi; i++ {
			t := tv[i]
			if t == kernels.IgnoreIndex {
				ls[i] = 0
				continue
			}
			row := xs[i*v : (i+1)*v]
			m := rowMax(row)
			var sum float64
			for _, x := range row {
				sum += math.Exp(float64(x - m))
			}
			ls[i] = float32(float64(m) + math.Log(sum) - float64(row[t]))
		}
	})
	return nil
}

// rowMax returns the largest value of a non-empty row.
func rowMax(row []float32) float32 {
	m := row[0]
	for _, x := range row[1:] {
		m = max(m, x)
	}
	return m
}

// CrossEntropyBackward sets dlogits = scale·(softmax(logits) − onehot(targets)),
// with zero rows where the target is kernels.IgnoreIndex.
func (b *Backend) CrossEntropyBackward(dlogits, logits, targets *kernels.Tensor, scale float32) error {
	const op = "cpu: CrossEntropyBackward"
	n, v, err := check.CrossEntropyBackward(op, b, dlogits, logits, targets, scale)
	if err != nil {
		return err
	}
	tv, err := ceTargets(op, targets, n, v)
	if err != nil {
		return err
	}
	xs := in32(logits)
	o, flush := out32(dlogits, false)
	parallelFor(len(tv), 4*v, func(lo, hi int) {
		for i := lo; i < hi; i++ {
			t, dst := tv[i], o[i*v:(i+1)*v]
			if t == kernels.IgnoreIndex {
				clear(dst)
				continue
			}
			row := xs[i*v : (i+1)*v]
			dst = dst[:len(row)]
			m := rowMax(row)
			var sum float64
			for j, x := range row {
				e := expf(x - m)
				dst[j] = e
				sum += float64(e)
			}
			// The target's 1 − p is Σ_{j≠t} e_j / sum, free of the
			// cancellation of p − 1 when p is close to 1.
			s := float64(scale) / sum
			other := sum - float64(dst[t])
			for j, e := range dst {
				dst[j] = float32(float64(e) * s)
			}
			dst[t] = float32(-other * s)
		}
	})
	flush()
	return nil
}
