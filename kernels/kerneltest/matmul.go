package kerneltest

import (
	"fmt"
	"slices"
	"strings"

	"github.com/stretchr/testify/require"
	"github.com/zbench/zbench/kernels"
)

func init() { suites = append(suites, matmulTests()) }

// mmCase is one MatMul configuration.
type mmCase struct {
	batch   []int // batch dimensions of a and out
	m, n, k int
	shared  bool // b is 2-D
	tA, tB  bool
	alpha   float32
	beta    float32
	bias    bool
	act     kernels.Activation
	// packed packs b (a 2-D transposed weight) with LinearPacker first.
	packed bool
	// tf32 sets MatMulParams.TF32 (f32 only): checked to float16's tolerance.
	tf32 bool
}

func (c mmCase) String() string {
	s := fmt.Sprintf("%vx%dx%dx%d", c.batch, c.m, c.n, c.k)
	if c.shared {
		s += "/shared"
	}
	if c.tA || c.tB {
		s += "/t="
		for _, t := range []bool{c.tA, c.tB} {
			if t {
				s += "T"
			} else {
				s += "N"
			}
		}
	}
	if c.alpha != 0 || c.beta != 0 {
		s += fmt.Sprintf("/alpha=%g/beta=%g", c.alpha, c.beta)
	}
	if c.bias {
		s += "/bias"
	}
	if c.act != kernels.ActNone {
		s += "/act=" + c.act.String()
	}
	if c.packed {
		s += "/packed"
	}
	if c.tf32 {
		s += "/tf32"
	}
	return s
}

func matmulCases() []mmCase {
	var cs []mmCase
	// Plain products of awkward sizes.
	for _, d := range [][3]int{{1, 1, 1}, {31, 17, 4097}, {64, 31, 1}, {4097, 3, 5}, {257, 129, 33}} {
		cs = append(cs, mmCase{m: d[0], n: d[1], k: d[2]})
	}
	// Every transpose combination: 2-D, batched, and batched with a shared b.
	for _, t := range [][2]bool{{false, false}, {true, false}, {false, true}, {true, true}} {
		cs = append(cs,
			mmCase{m: 23, n: 19, k: 31, tA: t[0], tB: t[1]},
			mmCase{batch: []int{3}, m: 31, n: 9, k: 17, tA: t[0], tB: t[1]},
			mmCase{batch: []int{2, 3}, m: 31, n: 9, k: 17, shared: true, tA: t[0], tB: t[1]},
		)
	}
	cs = append(cs,
		mmCase{batch: []int{64}, m: 8, n: 7, k: 9},                         // many small products
		mmCase{batch: []int{64}, m: 8, n: 7, k: 9, shared: true, tA: true}, // shared b, not foldable
		mmCase{m: 31, n: 17, k: 33, alpha: 0.5},
		mmCase{m: 31, n: 17, k: 33, alpha: -1.5, beta: 0.75},
		mmCase{m: 31, n: 17, k: 33, beta: 1},
		mmCase{batch: []int{3}, m: 31, n: 9, k: 17, tB: true, alpha: 2, beta: -0.5},
		mmCase{batch: []int{2, 3}, m: 31, n: 9, k: 17, shared: true, beta: 0.25, bias: true, act: kernels.ActReLU},
		mmCase{m: 33, n: 47, k: 29, bias: true},
		mmCase{m: 33, n: 47, k: 29, act: kernels.ActGELU},
		mmCase{m: 257, n: 129, k: 33, bias: true, act: kernels.ActSiLU},
	)
	for _, a := range activations[1:] {
		cs = append(cs, mmCase{m: 33, n: 47, k: 29, bias: true, act: a})
	}
	// Decode steps: a few rows against a linear layer's [N, K] weight,
	// added to the residual stream, alone or as a batch sharing b.
	cs = append(cs,
		mmCase{m: 1, n: 129, k: 4097, tB: true, beta: 1},
		mmCase{batch: []int{2}, m: 2, n: 33, k: 65, shared: true, tB: true, alpha: 0.5},
		mmCase{m: 5, n: 33, k: 65, tB: true, beta: -1},
	)
	// The row-dot-product path's edges: 1 to 4 rows against weights whose
	// depths end either side of its steps of 16 and 64 values; groups of
	// four rows and the rows left over (6, 8 and 16, a weight over more
	// than one block of the CPU's); and products of more rows against a
	// transposed weight, which 16-bit weights run a block of rows widened
	// at a time (more rows than one block).
	for _, d := range [][3]int{{1, 1, 1}, {1, 7, 31}, {2, 6, 65}, {3, 5, 17}, {4, 131, 80}, {1, 258, 1025}, {6, 70, 95}, {8, 40, 4097}, {16, 9, 2049}} {
		cs = append(cs, mmCase{m: d[0], n: d[1], k: d[2], tB: true})
	}
	cs = append(cs,
		mmCase{m: 4, n: 67, k: 95, tB: true, alpha: 2, beta: 0.5, bias: true, act: kernels.ActSiLU},
		mmCase{m: 37, n: 150, k: 65, tB: true},
		mmCase{m: 25, n: 33, k: 600, tB: true, beta: 0.5},
		mmCase{m: 24, n: 64, k: 513, tB: true, beta: 1, bias: true, act: kernels.ActGELU},
		mmCase{m: 9, n: 70, k: 33, tB: true, alpha: -0.5, beta: 1, bias: true},
		mmCase{batch: []int{3}, m: 7, n: 66, k: 31, shared: true, tB: true, beta: 0.25},
	)
	// A GPU's matrix-vector kernels (decode): 1 to 8 rows against a
	// transposed weight whose depth is a multiple of 8, column counts that
	// end a warp's pair of columns and a block's eight unevenly, the whole
	// epilogue, and a batch sharing the weight, which is one matrix of rows.
	for _, d := range [][3]int{{1, 9, 2048}, {2, 130, 520}, {3, 1, 8}, {5, 257, 1032}, {8, 64, 4096}} {
		cs = append(cs, mmCase{m: d[0], n: d[1], k: d[2], tB: true})
	}
	cs = append(cs,
		mmCase{m: 4, n: 33, k: 64, tB: true, alpha: 2, beta: 0.5, bias: true, act: kernels.ActSiLU},
		mmCase{m: 1, n: 96, k: 264, tB: true, beta: 1, bias: true, act: kernels.ActGELU},
		mmCase{batch: []int{3}, m: 2, n: 41, k: 136, shared: true, tB: true, beta: -1},
	)
	// Few output tiles over a long K, which a backend may multiply in
	// slices of K and add up: every transpose, with the whole epilogue,
	// a K whose slices end unevenly, and K not a multiple of 4.
	for _, t := range [][2]bool{{false, false}, {true, false}, {false, true}, {true, true}} {
		cs = append(cs, mmCase{m: 40, n: 72, k: 1000, tA: t[0], tB: t[1], alpha: 0.5, beta: 0.25, bias: true, act: kernels.ActGELU})
	}
	cs = append(cs, mmCase{m: 129, n: 130, k: 1027, tB: true, beta: 1})
	// BERT's pooler: dense + tanh on the first token of each sequence.
	cs = append(cs, mmCase{m: 3, n: 96, k: 96, tB: true, bias: true, act: kernels.ActTanh})
	// Weights packed once (LinearPacker): rows split across workers (a
	// partial last column panel, K over two kc-deep blocks), columns split
	// (wider than tall), a batch sharing the weight with an epilogue, and
	// the row-dot-product path, which reads the weight as stored.
	cs = append(cs,
		mmCase{m: 130, n: 70, k: 300, tB: true, packed: true},
		mmCase{m: 13, n: 300, k: 257, tB: true, alpha: 0.5, beta: 1, packed: true},
		mmCase{batch: []int{2}, m: 65, n: 33, k: 64, shared: true, tB: true, beta: 0.5, bias: true, act: kernels.ActGELU, packed: true},
		mmCase{m: 3, n: 40, k: 70, tB: true, packed: true},
	)
	return cs
}

func matmulTests() []test {
	var ts []test
	for _, dt := range kernels.FloatTypes {
		for _, c := range matmulCases() {
			ts = append(ts, test{name("matmul", "dt", dt, "case", c), func(e *env) { e.matmul(dt, c) }})
		}
	}
	// TF32 (MatMulParams.TF32): every transpose on a size the tensor-core
	// kernels take, edges of their tiles, the epilogue, one product of few
	// tiles over a long K, and sizes only the SIMT kernel takes.
	for _, c := range []mmCase{
		{m: 256, n: 256, k: 256}, {m: 256, n: 256, k: 256, tA: true}, {m: 256, n: 256, k: 256, tB: true},
		{m: 256, n: 256, k: 256, tA: true, tB: true},
		{m: 130, n: 264, k: 136, tB: true, alpha: 0.5, beta: 0.25, bias: true, act: kernels.ActGELU},
		{batch: []int{2}, m: 72, n: 40, k: 96, shared: true, tB: true, bias: true},
		{m: 64, n: 72, k: 1000, tB: true, beta: 1},
		{m: 33, n: 47, k: 29, tB: true},
	} {
		c.tf32 = true
		ts = append(ts, test{name("matmul", "dt", kernels.F32, "case", c), func(e *env) { e.matmul(kernels.F32, c) }})
	}
	// One input by several weights (MatMulShared): a decode step's query,
	// key and value (the GPU's one launch: K a multiple of 8, at most 8
	// rows, two or three weights), a batch of rows, and the cases that fall
	// back to one product at a time (more rows, an odd K, four weights).
	for _, dt := range kernels.FloatTypes {
		for _, c := range []sharedCase{
			{rows: []int{1}, k: 256, ns: []int{256, 64, 64}},
			{rows: []int{3}, k: 520, ns: []int{130, 9}},
			{rows: []int{2, 4}, k: 4096, ns: []int{33, 257, 64}},
			{rows: []int{9}, k: 64, ns: []int{8, 8, 8}},
			{rows: []int{2}, k: 37, ns: []int{16, 5}},
			{rows: []int{1}, k: 64, ns: []int{7, 9, 11, 13}},
		} {
			ts = append(ts, test{name("MatMulShared", "dt", dt, "case", c), func(e *env) { e.matmulShared(dt, c) }})
		}
	}
	ts = append(ts, test{"matmul/errors", matmulErrors}, test{"matmul/packed-upload", matmulPackedUpload}, test{"PackLinear/errors", packLinearErrors},
		test{"MatMulShared/errors", matmulSharedErrors})
	return ts
}

// sharedCase is one MatMulShared call: a [rows…, k] by weights [ns[i], k].
type sharedCase struct {
	rows, ns []int
	k        int
}

func (c sharedCase) String() string { return fmt.Sprintf("rows%v_k%d_n%v", c.rows, c.k, c.ns) }

// matmulShared checks each product against the float64 reference and,
// bit for bit, against MatMul with TransB on the same weight.
func (e *env) matmulShared(dt kernels.DType, c sharedCase) {
	e.Helper()
	a, av := e.Input("a", dt, append(slices.Clone(c.rows), c.k)...)
	rows := kernels.Shape(c.rows).Len()
	outs, bs, alone := make([]*kernels.Tensor, len(c.ns)), make([]*kernels.Tensor, len(c.ns)), make([]*kernels.Tensor, len(c.ns))
	wants := make([][]float64, len(c.ns))
	for i, n := range c.ns {
		var bv []float64
		bs[i], bv = e.Input(fmt.Sprint("b", i), dt, n, c.k)
		outs[i] = e.Output(dt, append(slices.Clone(c.rows), n)...)
		alone[i] = e.Output(dt, append(slices.Clone(c.rows), n)...)
		wants[i] = make([]float64, rows*n)
		for r := range rows {
			for j := range n {
				var s float64
				for l := range c.k {
					s += av[r*c.k+l] * bv[j*c.k+l]
				}
				wants[i][r*n+j] = s
			}
		}
	}
	require.NoError(e, e.b.MatMulShared(outs, a, bs))
	for i := range c.ns {
		e.Check(fmt.Sprint("out", i), outs[i], wants[i], 0)
		require.NoError(e, e.b.MatMul(alone[i], a, bs[i], kernels.MatMulParams{TransB: true}))
		got, err := kernels.ToFloat32(outs[i])
		require.NoError(e, err)
		want, err := kernels.ToFloat32(alone[i])
		require.NoError(e, err)
		require.Equal(e, want, got, "product %d differs from MatMul's", i)
	}
}

func matmulSharedErrors(e *env) {
	f32 := kernels.F32
	a, _ := e.Input("a", f32, 2, 8)
	b0, _ := e.Input("b0", f32, 4, 8)
	b1, _ := e.Input("b1", f32, 3, 8)
	bk, _ := e.Input("bk", f32, 3, 7)
	b3, _ := e.Input("b3", f32, 2, 3, 8)
	o0, o1 := e.Output(f32, 2, 4), e.Output(f32, 2, 3)
	require.NoError(e, e.b.MatMulShared([]*kernels.Tensor{o0, o1}, a, []*kernels.Tensor{b0, b1}))
	e.requireOpErr(e.b.MatMulShared([]*kernels.Tensor{o0}, a, []*kernels.Tensor{b0, b1}), kernels.ErrShape, "MatMulShared", "outputs")
	e.requireOpErr(e.b.MatMulShared(nil, a, nil), kernels.ErrShape, "MatMulShared", "at least one")
	e.requireOpErr(e.b.MatMulShared([]*kernels.Tensor{o0, o1}, a, []*kernels.Tensor{b0, bk}), kernels.ErrShape, "MatMulShared (product 1)", "inner dimensions")
	e.requireOpErr(e.b.MatMulShared([]*kernels.Tensor{o0, o1}, a, []*kernels.Tensor{b1, b0}), kernels.ErrShape, "MatMulShared (product 0)", "out")
	e.requireOpErr(e.b.MatMulShared([]*kernels.Tensor{e.Output(f32, 2, 2, 3)}, e.Output(f32, 2, 2, 8), []*kernels.Tensor{b3}), kernels.ErrShape, "MatMulShared", "weight 0")
}

func (e *env) matmul(dt kernels.DType, c mmCase) {
	e.Helper()
	withBatch := func(batch []int, r, c int) []int {
		return append(append([]int(nil), batch...), r, c)
	}
	aShape := withBatch(c.batch, c.m, c.k)
	if c.tA {
		aShape = withBatch(c.batch, c.k, c.m)
	}
	bBatch := c.batch
	if c.shared {
		bBatch = nil
	}
	bShape := withBatch(bBatch, c.k, c.n)
	if c.tB {
		bShape = withBatch(bBatch, c.n, c.k)
	}
	outShape := withBatch(c.batch, c.m, c.n)

	a, av := e.Input("a", dt, aShape...)
	b, bv := e.Input("b", dt, bShape...)
	if c.packed {
		require.NoError(e, optionalGroup[kernels.LinearPacker](e).PackLinear(b))
	}
	var out *kernels.Tensor
	var c0 []float64
	if c.beta != 0 {
		out, c0 = e.initialOutput("out", dt, outShape...)
	} else {
		out = e.Output(dt, outShape...)
	}
	p := kernels.MatMulParams{TransA: c.tA, TransB: c.tB, Alpha: c.alpha, Beta: c.beta, Act: c.act, TF32: c.tf32}
	var biasv []float64
	if c.bias {
		p.Bias, biasv = e.Input("bias", dt, c.n)
	}
	require.NoError(e, e.b.MatMul(out, a, b, p))

	alpha := float64(c.alpha)
	if alpha == 0 {
		alpha = 1
	}
	batch := kernels.Shape(c.batch).Len()
	m, n, k := c.m, c.n, c.k
	want := make([]float64, batch*m*n)
	for bi := range batch {
		as := av[bi*m*k:]
		bs := bv
		if !c.shared {
			bs = bv[bi*k*n:]
		}
		for i := range m {
			for j := range n {
				var s float64
				for l := range k {
					x := as[i*k+l]
					if c.tA {
						x = as[l*m+i]
					}
					y := bs[l*n+j]
					if c.tB {
						y = bs[j*k+l]
					}
					s += x * y
				}
				v := alpha * s
				o := bi*m*n + i*n + j
				if c.beta != 0 {
					v += float64(c.beta) * c0[o]
				}
				if c.bias {
					v += biasv[j]
				}
				want[o] = RefAct(c.act, v)
			}
		}
	}
	tol := 0.0
	if c.tf32 {
		tol = kernels.Tolerance(kernels.F16) // TF32 keeps float16's 10 bits of mantissa
	}
	e.Check("out", out, want, tol)
}

// initialOutput returns an output tensor holding uniform values in [-1, 1)
// and those values, for ops that read their output (MatMul with beta ≠ 0).
// Unlike Input, the tensor is not checked to be unchanged.
func (e *env) initialOutput(name string, dt kernels.DType, shape ...int) (*kernels.Tensor, []float64) {
	e.Helper()
	t, vals := e.Uniform(name, dt, -1, 1, shape...)
	e.inputs = e.inputs[:len(e.inputs)-1] // an output: drop the unchanged check
	return t, vals
}

// errCase is a call that must fail with an error wrapping err.
type errCase struct {
	name string
	err  error
	call func() error
}

// checkErrors requires each call to fail with its sentinel and a message
// that names op.
func (e *env) checkErrors(op string, cases []errCase) {
	e.Helper()
	for _, c := range cases {
		err := c.call()
		require.Error(e, err, "%s: %s", op, c.name)
		require.ErrorIs(e, err, c.err, "%s: %s: got %v", op, c.name, err)
		require.Contains(e, strings.ToLower(err.Error()), op, "%s: %s: message does not name the op", op, c.name)
	}
}

func matmulErrors(e *env) {
	f32 := kernels.F32
	a, _ := e.Input("a", f32, 4, 5)
	b, _ := e.Input("b", f32, 5, 6)
	bT, _ := e.Input("bT", f32, 6, 5)
	b16, _ := e.Input("b16", kernels.F16, 5, 6)
	a1, _ := e.Input("a1", f32, 20)
	a3, _ := e.Input("a3", f32, 2, 4, 5)
	b3, _ := e.Input("b3", f32, 3, 5, 6)
	bias, _ := e.Input("bias", f32, 6)
	bias5, _ := e.Input("bias5", f32, 5)
	bias16, _ := e.Input("bias16", kernels.F16, 6)
	ai := e.Ints("ai", make([]int32, 20), 4, 5)
	bi := e.Ints("bi", make([]int32, 30), 5, 6)
	out := e.Output(f32, 4, 6)
	out7 := e.Output(f32, 4, 7)
	out16 := e.Output(kernels.F16, 4, 6)
	outi := e.Output(kernels.I32, 4, 6)
	out3 := e.Output(f32, 2, 4, 6)
	mm := func(out, a, b *kernels.Tensor, p kernels.MatMulParams) func() error {
		return func() error { return e.b.MatMul(out, a, b, p) }
	}
	none := kernels.MatMulParams{}
	e.checkErrors("matmul", []errCase{
		{"nil out", kernels.ErrShape, mm(nil, a, b, none)},
		{"nil a", kernels.ErrShape, mm(out, nil, b, none)},
		{"nil b", kernels.ErrShape, mm(out, a, nil, none)},
		{"inner dimensions", kernels.ErrShape, mm(out, a, bT, none)},
		{"inner dimensions with TransA", kernels.ErrShape, mm(out, a, b, kernels.MatMulParams{TransA: true})},
		{"out shape", kernels.ErrShape, mm(out7, a, b, none)},
		{"rank 1", kernels.ErrShape, mm(out, a1, b, none)},
		{"batch dims", kernels.ErrShape, mm(out3, a3, b3, none)},
		{"batched b, 2-D a", kernels.ErrShape, mm(out, a, b3, none)},
		{"bias shape", kernels.ErrShape, mm(out, a, b, kernels.MatMulParams{Bias: bias5})},
		{"b dtype", kernels.ErrDType, mm(out, a, b16, none)},
		{"out dtype", kernels.ErrDType, mm(out16, a, b, none)},
		{"bias dtype", kernels.ErrDType, mm(out, a, b, kernels.MatMulParams{Bias: bias16})},
		{"integer", kernels.ErrDType, mm(outi, ai, bi, none)},
		{"activation", kernels.ErrValue, mm(out, a, b, kernels.MatMulParams{Bias: bias, Act: 99})},
	})
	// The same tensors in a correct call work.
	require.NoError(e, e.b.MatMul(out, a, b, kernels.MatMulParams{Bias: bias}))
	require.NoError(e, e.b.MatMul(out3, a3, b, none), "shared 2-D b")
}

// matmulPackedUpload packs a weight, uploads new values over it and checks
// that MatMul multiplies the new ones, in float32 and bfloat16.
func matmulPackedUpload(e *env) {
	const m, n, k = 40, 50, 60
	for _, dt := range []kernels.DType{kernels.F32, kernels.BF16} {
		a, av := e.Input("a/"+dt.String(), dt, m, k)
		w, _ := e.mutable(dt, n, k)
		require.NoError(e, optionalGroup[kernels.LinearPacker](e).PackLinear(w))
		w32 := make([]float32, w.Len())
		for i := range w32 {
			w32[i] = float32(e.rng.Float64() - 0.5)
		}
		require.NoError(e, kernels.UploadFloat32(w, w32))
		stored, err := kernels.ToFloat32(w)
		require.NoError(e, err)
		out := e.Output(dt, m, n)
		require.NoError(e, e.b.MatMul(out, a, w, kernels.MatMulParams{TransB: true}))
		want := make([]float64, m*n)
		for i := range m {
			for j := range n {
				for l := range k {
					want[i*n+j] += av[i*k+l] * float64(stored[j*k+l])
				}
			}
		}
		e.Check("out/"+dt.String(), out, want, 0)
	}
}

// packLinearErrors checks that PackLinear names the shape it rejects.
func packLinearErrors(e *env) {
	lp := optionalGroup[kernels.LinearPacker](e)
	for _, shape := range [][]int{{6}, {2, 3, 4}} {
		w, _ := e.Input("w", kernels.F32, shape...)
		err := lp.PackLinear(w)
		require.ErrorIs(e, err, kernels.ErrShape, "%v", shape)
		require.ErrorContains(e, err, "PackLinear")
	}
}
