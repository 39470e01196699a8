package kerneltest

import (
	"github.com/stretchr/testify/require"

	"github.com/zbench/zbench/kernels"
)

func init() { suites = append(suites, packedLinearTests()) }

// packedLinearCase is one product of MatMul by a linear weight packed with
// PackLinearWeight: a [batch, rows, k] (batch 0: a 2-D a [rows, k]) by
// w [n, k] read transposed, with beta 1 on a random out, a bias, an
// activation.
type packedLinearCase struct {
	batch, rows, n, k int
	beta              bool
	bias              bool
	act               kernels.Activation
}

// packedLinearTests check MatMul against the float64 reference where the
// weight is packed (kernels.LinearPacker): shapes with tails in every
// dimension, more than one k-block, a shared weight under a batch, the
// epilogue, decode's few rows, and a packed weight uploaded over.
func packedLinearTests() []test {
	var ts []test
	for _, c := range []packedLinearCase{
		{rows: 1, n: 1, k: 1},
		{rows: 3, n: 40, k: 17},
		{rows: 128, n: 96, k: 768, bias: true},
		{rows: 131, n: 77, k: 300, bias: true, act: kernels.ActGELU},
		{rows: 250, n: 33, k: 513, beta: true, bias: true},
		{batch: 3, rows: 5, n: 64, k: 40, act: kernels.ActReLU},
		{rows: 7, n: 4100, k: 9, beta: true},
	} {
		ts = append(ts, test{name("MatMul/packed-linear", "batch", c.batch, "rows", c.rows, "n", c.n, "k", c.k,
			"beta", c.beta, "bias", c.bias, "act", c.act), func(e *env) { e.packedLinear(c) }})
	}
	return append(ts, test{"MatMul/packed-linear/uploaded-over", packedLinearUpload}, test{"PackLinearWeight/errors", packLinearErrors})
}

// packedLinear runs c with the weight packed and checks it against the
// float64 reference.
func (e *env) packedLinear(c packedLinearCase) {
	f32 := kernels.F32
	shape := []int{c.rows, c.k}
	rows := c.rows
	if c.batch > 0 {
		shape, rows = []int{c.batch, c.rows, c.k}, c.batch*c.rows
	}
	a, av := e.Input("a", f32, shape...)
	w, wv := e.Input("w", f32, c.n, c.k)
	require.NoError(e, optionalGroup[kernels.LinearPacker](e).PackLinearWeight(w))
	outShape := append(append([]int{}, shape[:len(shape)-1]...), c.n)
	p := kernels.MatMulParams{TransB: true, Act: c.act}
	want := make([]float64, rows*c.n)
	var out *kernels.Tensor
	if c.beta {
		var ov []float64
		out, ov = e.mutable(f32, outShape...)
		copy(want, ov)
		p.Beta = 1
	} else {
		out = e.Output(f32, outShape...)
	}
	var bv []float64
	if c.bias {
		p.Bias, bv = e.Input("bias", f32, c.n)
	}
	for r := range rows {
		for j := range c.n {
			s := want[r*c.n+j]
			for q := range c.k {
				s += av[r*c.k+q] * wv[j*c.k+q]
			}
			if bv != nil {
				s += bv[j]
			}
			want[r*c.n+j] = RefAct(c.act, s)
		}
	}
	require.NoError(e, e.b.MatMul(out, a, w, p))
	e.Check("out", out, want, 0)
}

// packedLinearUpload packs a weight, uploads new values over it and checks
// that MatMul multiplies the new ones.
func packedLinearUpload(e *env) {
	const rows, n, k = 64, 48, 300
	a, av := e.Input("a", kernels.F32, rows, k)
	w, _ := e.mutable(kernels.F32, n, k)
	require.NoError(e, optionalGroup[kernels.LinearPacker](e).PackLinearWeight(w))
	w32 := make([]float32, n*k)
	for i := range w32 {
		w32[i] = float32(e.rng.Float64() - 0.5)
	}
	require.NoError(e, kernels.UploadFloat32(w, w32))
	want := make([]float64, rows*n)
	for r := range rows {
		for j := range n {
			for q := range k {
				want[r*n+j] += av[r*k+q] * float64(w32[j*k+q])
			}
		}
	}
	out := e.Output(kernels.F32, rows, n)
	require.NoError(e, e.b.MatMul(out, a, w, kernels.MatMulParams{TransB: true}))
	e.Check("out", out, want, 0)
}

// packLinearErrors checks that PackLinearWeight names the shape it rejects.
func packLinearErrors(e *env) {
	lp := optionalGroup[kernels.LinearPacker](e)
	for _, shape := range [][]int{{6}, {2, 3, 4}} {
		w, _ := e.Input("w", kernels.F32, shape...)
		err := lp.PackLinearWeight(w)
		require.ErrorIs(e, err, kernels.ErrShape, "%v", shape)
		require.ErrorContains(e, err, "PackLinearWeight")
	}
}
