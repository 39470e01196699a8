package cpu

import (
	"math"

	"github.com/zbench/zbench/kernels"
)

// Embedding gathers the rows of table named by ids into out.
func (b *Backend) Embedding(out, table, ids *kernels.Tensor) error {
	const op = "cpu: Embedding"
	c := kernels.Check(op).Tensor("out", out, b).Tensor("table", table, b).Tensor("ids", ids, b)
	if err := c.Err(); err != nil {
		return err
	}
	ts := table.Shape()
	c.DType("table", table, kernels.FloatTypes...).
		That(len(ts) == 2, kernels.ErrShape, "table has shape %v, want [V D]", ts).
		DType("ids", ids, kernels.I32)
	if err := c.Err(); err != nil {
		return err
	}
	d := ts[1]
	c.SameDType("out", out, "table", table).Shape("out", out, appendDim(ids.Shape(), d)...)
	if err := c.Err(); err != nil {
		return err
	}
	idv := i32(ids)[:ids.Len()]
	if err := checkIDs(op, "ids", idv, ids.Shape(), ts[0], false); err != nil {
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

// appendDim returns a copy of s with d appended.
func appendDim(s kernels.Shape, d int) kernels.Shape {
	return append(append(make(kernels.Shape, 0, len(s)+1), s...), d)
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
		return kernels.Check(op).That(false, kernels.ErrValue,
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
	c := kernels.Check(op).Tensor("dtable", dtable, b).Tensor("dout", dout, b).Tensor("ids", ids, b)
	if err := c.Err(); err != nil {
		return err
	}
	ts := dtable.Shape()
	c.DType("dtable", dtable, kernels.FloatTypes...).
		That(len(ts) == 2, kernels.ErrShape, "dtable has shape %v, want [V D]", ts).
		DType("ids", ids, kernels.I32)
	if err := c.Err(); err != nil {
		return err
	}
	vocab, d := ts[0], ts[1]
	c.SameDType("dout", dout, "dtable", dtable).Shape("dout", dout, appendDim(ids.Shape(), d)...)
	if err := c.Err(); err != nil {
		return err
	}
	idv := i32(ids)[:ids.Len()]
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

// ceCheck checks the arguments of CrossEntropy and its backward (out is
// loss or dlogits) and returns the validated targets and the vocabulary size.
func (b *Backend) ceCheck(op, outName string, out, logits, targets *kernels.Tensor) ([]int32, int, error) {
	c := kernels.Check(op).Tensor(outName, out, b).Tensor("logits", logits, b).Tensor("targets", targets, b)
	if err := c.Err(); err != nil {
		return nil, 0, err
	}
	ls := logits.Shape()
	c.DType("logits", logits, kernels.FloatTypes...).
		That(len(ls) == 2, kernels.ErrShape, "logits has shape %v, want [N V]", ls).
		DType("targets", targets, kernels.I32)
	if err := c.Err(); err != nil {
		return nil, 0, err
	}
	n, v := ls[0], ls[1]
	c.Shape("targets", targets, n)
	if outName == "loss" {
		c.DType("loss", out, kernels.F32).Shape("loss", out, n)
	} else {
		c.SameDType(outName, out, "logits", logits).Shape(outName, out, ls...)
	}
	if err := c.Err(); err != nil {
		return nil, 0, err
	}
	tv := i32(targets)[:n]
	if err := checkIDs(op, "targets", tv, targets.Shape(), v, true); err != nil {
		return nil, 0, err
	}
	return tv, v, nil
}

// CrossEntropy sets loss[i] = logsumexp(logits[i]) − logits[i, targets[i]],
// or 0 where the target is kernels.IgnoreIndex.
func (b *Backend) CrossEntropy(loss, logits, targets *kernels.Tensor) error {
	tv, v, err := b.ceCheck("cpu: CrossEntropy", "loss", loss, logits, targets)
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
	tv, v, err := b.ceCheck("cpu: CrossEntropyBackward", "dlogits", dlogits, logits, targets)
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
