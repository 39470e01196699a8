package kerneltest

import (
	"math"

	"github.com/stretchr/testify/require"
	"github.com/zbench/zbench/kernels"
)

func init() { suites = append(suites, embeddingTests()) }

// embedCase is a table [vocab, d] looked up by ids of the given shape.
type embedCase struct {
	vocab, d int
	ids      []int
}

var embedCases = []embedCase{
	{vocab: 1, d: 1, ids: []int{1}},
	{vocab: 31, d: 64, ids: []int{2, 31}},
	{vocab: 4097, d: 31, ids: []int{3, 7}},
	{vocab: 5, d: 33, ids: []int{4, 3, 31}}, // many repeats for the scatter-sum
	{vocab: 300, d: 200, ids: []int{2, 64}}, // wide enough to run in parallel
}

// ceCase is a cross-entropy over logits [n, vocab]; every ignore-th target
// (if ignore > 0) is IgnoreIndex.
type ceCase struct {
	n, vocab, ignore int
	scale            float32
}

var ceCases = []ceCase{
	{n: 1, vocab: 1, scale: 1},
	{n: 31, vocab: 31, ignore: 3, scale: 1.0 / 31},
	{n: 7, vocab: 4097, ignore: 2, scale: 0.5},
	{n: 4, vocab: 9, ignore: 1, scale: 1}, // every row ignored
}

func embeddingTests() []test {
	var ts []test
	for _, dt := range kernels.FloatTypes {
		for _, c := range embedCases {
			n := kernels.Shape(c.ids).Len()
			outShape := append(append([]int(nil), c.ids...), c.d)
			ts = append(ts,
				test{name("Embedding", "dtype", dt, "V", c.vocab, "D", c.d, "ids", kernels.Shape(c.ids)), func(e *env) {
					table, tv := e.Input("table", dt, c.vocab, c.d)
					idv := e.RandInts(n, c.vocab)
					ids := e.Ints("ids", idv, c.ids...)
					out := e.Output(dt, outShape...)
					require.NoError(e, e.b.Embedding(out, table, ids))
					e.Check("out", out, refEmbedding(tv, idv, c.d), 0)
				}},
				test{name("EmbeddingBackward", "dtype", dt, "V", c.vocab, "D", c.d, "ids", kernels.Shape(c.ids)), func(e *env) {
					dout, dov := e.Input("dout", dt, outShape...)
					idv := e.RandInts(n, c.vocab)
					ids := e.Ints("ids", idv, c.ids...)
					dtable := e.Output(dt, c.vocab, c.d)
					require.NoError(e, e.b.EmbeddingBackward(dtable, dout, ids))
					e.Check("dtable", dtable, refEmbeddingBackward(dov, idv, c.vocab, c.d), 0)
				}},
			)
		}
		for _, c := range ceCases {
			ts = append(ts,
				test{name("CrossEntropy", "dtype", dt, "N", c.n, "V", c.vocab, "ignore", c.ignore), func(e *env) {
					logits, lv := e.Uniform("logits", dt, -8, 8, c.n, c.vocab)
					tv := c.targets(e)
					targets := e.Ints("targets", tv, c.n)
					loss := e.Output(kernels.F32, c.n)
					require.NoError(e, e.b.CrossEntropy(loss, logits, targets))
					e.Check("loss", loss, refCrossEntropy(lv, tv, c.vocab), 0)
				}},
				test{name("CrossEntropyBackward", "dtype", dt, "N", c.n, "V", c.vocab, "ignore", c.ignore), func(e *env) {
					logits, lv := e.Uniform("logits", dt, -8, 8, c.n, c.vocab)
					tv := c.targets(e)
					targets := e.Ints("targets", tv, c.n)
					dlogits := e.Output(dt, c.n, c.vocab)
					require.NoError(e, e.b.CrossEntropyBackward(dlogits, logits, targets, c.scale))
					e.Check("dlogits", dlogits, refCrossEntropyBackward(lv, tv, c.vocab, float64(c.scale)), 0)
				}},
			)
		}
	}
	return append(ts, test{"Embedding/errors", embeddingErrors})
}

func (c ceCase) targets(e *env) []int32 {
	t := e.RandInts(c.n, c.vocab)
	for i := range t {
		if c.ignore > 0 && i%c.ignore == 0 {
			t[i] = kernels.IgnoreIndex
		}
	}
	return t
}

// refEmbedding gathers rows of table [V, d].
func refEmbedding(table []float64, ids []int32, d int) []float64 {
	out := make([]float64, 0, len(ids)*d)
	for _, id := range ids {
		out = append(out, table[int(id)*d:(int(id)+1)*d]...)
	}
	return out
}

// refEmbeddingBackward scatter-sums rows of dout into a zero [V, d] table.
func refEmbeddingBackward(dout []float64, ids []int32, vocab, d int) []float64 {
	dt := make([]float64, vocab*d)
	for i, id := range ids {
		for t := range d {
			dt[int(id)*d+t] += dout[i*d+t]
		}
	}
	return dt
}

// refLogSumExp returns logsumexp(row).
func refLogSumExp(row []float64) float64 {
	m := math.Inf(-1)
	for _, x := range row {
		m = max(m, x)
	}
	var s float64
	for _, x := range row {
		s += math.Exp(x - m)
	}
	return m + math.Log(s)
}

// refCrossEntropy is logsumexp(row) − row[t] per row, 0 for ignored rows.
func refCrossEntropy(logits []float64, targets []int32, vocab int) []float64 {
	loss := make([]float64, len(targets))
	for i, t := range targets {
		if t == kernels.IgnoreIndex {
			continue
		}
		row := logits[i*vocab : (i+1)*vocab]
		loss[i] = refLogSumExp(row) - row[t]
	}
	return loss
}

// refCrossEntropyBackward is scale·(softmax(row) − onehot(t)), 0 for
// ignored rows.
func refCrossEntropyBackward(logits []float64, targets []int32, vocab int, scale float64) []float64 {
	d := make([]float64, len(logits))
	for i, t := range targets {
		if t == kernels.IgnoreIndex {
			continue
		}
		row := logits[i*vocab : (i+1)*vocab]
		lse := refLogSumExp(row)
		for j, x := range row {
			d[i*vocab+j] = scale * math.Exp(x-lse)
		}
		d[i*vocab+int(t)] -= scale
	}
	return d
}

func embeddingErrors(e *env) {
	f32 := kernels.F32
	table, _ := e.Input("table", f32, 5, 4)
	ids := e.Ints("ids", []int32{0, 4, 2, 1, 3, 0}, 2, 3)
	idsBad := e.Ints("idsBad", []int32{0, 4, 2, 1, 3, 1234}, 2, 3)
	idsNeg := e.Ints("idsNeg", []int32{-7}, 1)
	idsF, _ := e.Input("idsF", f32, 2, 3)
	out := e.Output(f32, 2, 3, 4)

	require.NoError(e, e.b.Embedding(out, table, ids))
	e.requireDataErr(e.b.Embedding(out, table, idsBad), kernels.ErrValue, "Embedding", "1234")
	e.requireDataErr(e.b.Embedding(e.Output(f32, 1, 4), table, idsNeg), kernels.ErrValue, "Embedding", "-7")
	e.requireOpErr(e.b.Embedding(out, table, idsF), kernels.ErrDType, "Embedding", "ids")
	e.requireOpErr(e.b.Embedding(e.Output(f32, 6, 4), table, ids), kernels.ErrShape, "Embedding", "out")
	e.requireOpErr(e.b.Embedding(e.Output(kernels.F16, 2, 3, 4), table, ids), kernels.ErrDType, "Embedding", "out")

	dtable := e.Output(f32, 5, 4)
	e.requireDataErr(e.b.EmbeddingBackward(dtable, out, idsBad), kernels.ErrValue, "EmbeddingBackward", "1234")
	e.requireOpErr(e.b.EmbeddingBackward(dtable, e.Output(f32, 2, 3, 5), ids), kernels.ErrShape, "EmbeddingBackward", "dout")

	logits, _ := e.Input("logits", f32, 3, 5)
	targets := e.Ints("targets", []int32{kernels.IgnoreIndex, 4, 0}, 3)
	loss := e.Output(f32, 3)
	require.NoError(e, e.b.CrossEntropy(loss, logits, targets))
	e.requireDataErr(e.b.CrossEntropy(loss, logits, e.Ints("t5", []int32{0, 5, 1}, 3)), kernels.ErrValue, "CrossEntropy", "targets")
	e.requireDataErr(e.b.CrossEntropy(loss, logits, e.Ints("tNeg", []int32{0, 1, -1}, 3)), kernels.ErrValue, "CrossEntropy", "-1")
	e.requireOpErr(e.b.CrossEntropy(loss, logits, e.Ints("t2", []int32{0, 1}, 2)), kernels.ErrShape, "CrossEntropy", "targets")
	e.requireOpErr(e.b.CrossEntropy(e.Output(kernels.F16, 3), logits, targets), kernels.ErrDType, "CrossEntropy", "loss")
	e.requireOpErr(e.b.CrossEntropy(loss, table, targets), kernels.ErrShape, "CrossEntropy", "targets")

	dlogits := e.Output(f32, 3, 5)
	require.NoError(e, e.b.CrossEntropyBackward(dlogits, logits, targets, 1))
	e.requireOpErr(e.b.CrossEntropyBackward(e.Output(f32, 3, 4), logits, targets, 1), kernels.ErrShape, "CrossEntropyBackward", "dlogits")
	e.requireDataErr(e.b.CrossEntropyBackward(dlogits, logits, e.Ints("t9", []int32{9, 0, 0}, 3), 1), kernels.ErrValue, "CrossEntropyBackward", "9")
}
