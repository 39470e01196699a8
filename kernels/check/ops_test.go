package check

import (
	"errors"
	"math"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/zbench/zbench/kernels"
)

// fakeBackend owns tensors without storage: the checks must not read
// data. Only Name is implemented; any other method would panic.
type fakeBackend struct {
	kernels.Backend
	name string
}

func (f *fakeBackend) Name() string { return f.name }

var (
	fakeDev   = &fakeBackend{name: "fake"}
	fakeOther = &fakeBackend{name: "other"}
)

// tn returns a storage-less tensor of fakeDev.
func tn(dt kernels.DType, shape ...int) *kernels.Tensor {
	return kernels.NewTensor(fakeDev, dt, shape, nil)
}

func TestCheckDims(t *testing.T) {
	f32, i32 := kernels.F32, kernels.I32

	mm := func(a, b, out []int, p kernels.MatMulParams) MatMulDims {
		t.Helper()
		g, err := MatMul("fake: matmul", fakeDev, tn(f32, out...), tn(f32, a...), tn(f32, b...), p)
		require.NoError(t, err)
		return g
	}
	assert.Equal(t, MatMulDims{Batch: 1, M: 2, N: 4, K: 3}, mm([]int{2, 3}, []int{3, 4}, []int{2, 4}, kernels.MatMulParams{}))
	assert.Equal(t, MatMulDims{Batch: 1, M: 2, N: 4, K: 3},
		mm([]int{3, 2}, []int{4, 3}, []int{2, 4}, kernels.MatMulParams{TransA: true, TransB: true}))
	assert.Equal(t, MatMulDims{Batch: 6, M: 2, N: 4, K: 3, SharedB: true},
		mm([]int{2, 3, 2, 3}, []int{3, 4}, []int{2, 3, 2, 4}, kernels.MatMulParams{}))
	assert.Equal(t, MatMulDims{Batch: 1, M: 2, N: 4, K: 3, SharedB: true},
		mm([]int{1, 2, 3}, []int{3, 4}, []int{1, 2, 4}, kernels.MatMulParams{}))
	assert.Equal(t, MatMulDims{Batch: 5, M: 2, N: 4, K: 3},
		mm([]int{5, 3, 2}, []int{5, 3, 4}, []int{5, 2, 4}, kernels.MatMulParams{TransA: true, Act: kernels.ActSiLU, Bias: tn(f32, 4)}))

	n, nb, err := Add("fake: add", fakeDev, tn(f32, 2, 3, 4), tn(f32, 2, 3, 4), tn(f32, 3, 4))
	require.NoError(t, err)
	assert.Equal(t, [2]int{24, 12}, [2]int{n, nb})

	n, err = Scale("fake: scale", fakeDev, tn(kernels.BF16, 5, 2), tn(kernels.BF16, 5, 2), 3)
	require.NoError(t, err)
	assert.Equal(t, 10, n)
	n, err = Fill("fake: fill", fakeDev, tn(kernels.E4M3, 7), 1)
	require.NoError(t, err)
	assert.Equal(t, 7, n)
	n, err = Cast("fake: cast", fakeDev, tn(kernels.I8, 3, 3), tn(kernels.F16, 3, 3))
	require.NoError(t, err)
	assert.Equal(t, 9, n)
	n, err = Act("fake: act", fakeDev, tn(f32, 4), tn(f32, 4), kernels.ActGELUTanh)
	require.NoError(t, err)
	assert.Equal(t, 4, n)
	n, err = ActBackward("fake: actbackward", fakeDev, tn(f32), tn(f32), tn(f32), kernels.ActReLU)
	require.NoError(t, err)
	assert.Equal(t, 1, n)
	rows, n, err := SumRows("fake: sumrows", fakeDev, tn(f32, 5), tn(f32, 2, 3, 5))
	require.NoError(t, err)
	assert.Equal(t, [2]int{6, 5}, [2]int{rows, n})

	rd, err := LayerNorm("fake: LayerNorm", fakeDev, tn(f32, 2, 3, 8), tn(f32, 6), tn(f32, 2, 3), tn(f32, 2, 3, 8), tn(f32, 8), nil, 1e-5)
	require.NoError(t, err)
	assert.Equal(t, RowDims{Rows: 6, D: 8}, rd)
	rd, err = LayerNormBackward("fake: LayerNormBackward", fakeDev,
		tn(kernels.F16, 4, 8), nil, tn(kernels.F16, 8), tn(kernels.F16, 4, 8), tn(kernels.F16, 4, 8), tn(kernels.F16, 8), tn(f32, 4), tn(f32, 4))
	require.NoError(t, err)
	assert.Equal(t, RowDims{Rows: 4, D: 8}, rd)
	rd, err = RMSNorm("fake: RMSNorm", fakeDev, tn(f32, 16), tn(f32, 16), tn(f32, 16), 0)
	require.NoError(t, err)
	assert.Equal(t, RowDims{Rows: 1, D: 16}, rd)
	rd, err = SoftmaxBackward("fake: SoftmaxBackward", fakeDev, tn(f32, 3, 7), tn(f32, 3, 7), tn(f32, 3, 7))
	require.NoError(t, err)
	assert.Equal(t, RowDims{Rows: 3, D: 7}, rd)

	sm := func(p kernels.AttentionParams, shape ...int) SoftmaxDims {
		t.Helper()
		g, err := Softmax("fake: Softmax", fakeDev, tn(f32, shape...), tn(f32, shape...), p)
		require.NoError(t, err)
		return g
	}
	assert.Equal(t, SoftmaxDims{Rows: 1, Sq: 1, Sk: 9, RowsPerBatch: 1}, sm(kernels.AttentionParams{}, 9))
	assert.Equal(t, SoftmaxDims{Rows: 4, Sq: 4, Sk: 9, RowsPerBatch: 1}, sm(kernels.AttentionParams{Causal: true}, 4, 9))
	assert.Equal(t, SoftmaxDims{Rows: 2 * 3 * 4, Sq: 4, Sk: 5, RowsPerBatch: 12},
		sm(kernels.AttentionParams{KeyLens: tn(i32, 2)}, 2, 3, 4, 5))

	ad, err := Attention("fake: Attention", fakeDev, tn(f32, 2, 6, 3, 8), tn(f32, 2, 6, 3, 8), tn(f32, 2, 2, 5, 8), tn(f32, 2, 2, 5, 8),
		kernels.AttentionParams{Causal: true, KeyLens: tn(i32, 2)})
	require.NoError(t, err)
	assert.Equal(t, kernels.AttentionDims{B: 2, Hq: 6, Hkv: 2, Sq: 3, Sk: 5, D: 8}, ad)
	q, kv := tn(f32, 1, 4, 3, 2), tn(f32, 1, 4, 7, 2)
	ad, err = AttentionBackward("fake: AttentionBackward", fakeDev, q, kv, kv, q, q, kv, kv, kernels.AttentionParams{})
	require.NoError(t, err)
	assert.Equal(t, kernels.AttentionDims{B: 1, Hq: 4, Hkv: 4, Sq: 3, Sk: 7, D: 2}, ad)

	ed, err := Embedding("fake: Embedding", fakeDev, tn(f32, 2, 5, 4), tn(f32, 11, 4), tn(i32, 2, 5))
	require.NoError(t, err)
	assert.Equal(t, EmbeddingDims{N: 10, V: 11, D: 4}, ed)
	ed, err = EmbeddingBackward("fake: EmbeddingBackward", fakeDev, tn(f32, 11, 4), tn(f32, 4), tn(i32))
	require.NoError(t, err)
	assert.Equal(t, EmbeddingDims{N: 1, V: 11, D: 4}, ed)

	sd, err := SwapAxes("fake: SwapAxes", fakeDev, tn(f32, 2, 4, 3, 5), tn(f32, 2, 3, 4, 5))
	require.NoError(t, err)
	assert.Equal(t, SwapAxesDims{A: 2, B: 3, C: 4, D: 5}, sd)
	sd, err = SwapAxes("fake: SwapAxes", fakeDev, tn(i32, 1, 1, 7, 1), tn(i32, 1, 7, 1, 1))
	require.NoError(t, err)
	assert.Equal(t, SwapAxesDims{A: 1, B: 7, C: 1, D: 1}, sd)

	n, err = AdamW("fake: AdamW", fakeDev, tn(f32, 3, 4), tn(f32, 3, 4), tn(f32, 3, 4), tn(f32, 3, 4), adamw)
	require.NoError(t, err)
	assert.Equal(t, 12, n)
	n, err = AdamW("fake: AdamW", fakeDev, tn(f32), tn(f32), tn(f32), tn(f32),
		kernels.AdamWParams{Beta1: 0, Beta2: 0, Eps: 1e-30, Step: 1 << 40})
	require.NoError(t, err, "LR 0, betas 0 and a huge step are valid")
	assert.Equal(t, 1, n)

	n, v, err := CrossEntropy("fake: CrossEntropy", fakeDev, tn(f32, 3), tn(kernels.BF16, 3, 10), tn(i32, 3))
	require.NoError(t, err)
	assert.Equal(t, [2]int{3, 10}, [2]int{n, v})
	n, v, err = CrossEntropyBackward("fake: CrossEntropyBackward", fakeDev, tn(kernels.BF16, 3, 10), tn(kernels.BF16, 3, 10), tn(i32, 3), 0.5)
	require.NoError(t, err)
	assert.Equal(t, [2]int{3, 10}, [2]int{n, v})
}

// adamw are valid AdamW hyper-parameters (PyTorch's defaults, with a
// weight decay).
var adamw = kernels.AdamWParams{LR: 1e-3, Beta1: 0.9, Beta2: 0.999, Eps: 1e-8, WeightDecay: 0.01, Step: 1}

// withAdamW returns adamw changed by f.
func withAdamW(f func(*kernels.AdamWParams)) kernels.AdamWParams {
	p := adamw
	f(&p)
	return p
}

func TestCheckErrors(t *testing.T) {
	f32, i32 := kernels.F32, kernels.I32
	freed := tn(f32, 2, 3)
	freed.MarkFreed()
	foreign := kernels.NewTensor(fakeOther, f32, kernels.Shape{2, 3}, nil)
	x23, o23 := tn(f32, 2, 3), tn(f32, 2, 3)
	q, kv := tn(f32, 2, 4, 3, 8), tn(f32, 2, 2, 5, 8)
	// Tensors with storage, for the aliasing check of SwapAxes.
	x4 := kernels.NewTensor(fakeDev, f32, kernels.Shape{2, 3, 3, 4}, new(int))
	x4view, err := x4.Reshape(2, 3, 3, 4)
	require.NoError(t, err)
	st := tn(f32, 5, 2)
	adam := func(p kernels.AdamWParams) error { return pick(AdamW("cuda: AdamW", fakeDev, st, st, st, st, p)) }
	inf, nan := float32(math.Inf(1)), float32(math.NaN())

	for _, tc := range []struct {
		name     string
		err      error
		sentinel error
		want     string
	}{
		{"nil", pick2(Add("cuda: add", fakeDev, o23, nil, x23)), kernels.ErrShape, "cuda: add: a is nil: shape mismatch"},
		{"freed", pick(Scale("cuda: scale", fakeDev, o23, freed, 2)), kernels.ErrFreed, "cuda: scale: x: tensor already freed"},
		{"foreign", pick(Fill("cuda: fill", fakeDev, foreign, 2)), kernels.ErrBackend, "cuda: fill: out is on other: tensor belongs to another backend"},
		{"bias of another backend", err2(MatMul("cuda: matmul", fakeDev, tn(f32, 2, 4), tn(f32, 2, 3), tn(f32, 3, 4), kernels.MatMulParams{Bias: foreign})),
			kernels.ErrBackend, "cuda: matmul: bias is on other: tensor belongs to another backend"},
		{"matmul inner", err2(MatMul("cuda: matmul", fakeDev, tn(f32, 2, 4), tn(f32, 2, 3), tn(f32, 4, 4), kernels.MatMulParams{TransB: true})),
			kernels.ErrShape, "cuda: matmul: inner dimensions differ: a [2 3] (TransA=false) has K=3, b [4 4] (TransB=true) has K=4: shape mismatch"},
		{"matmul batch", err2(MatMul("cuda: matmul", fakeDev, tn(f32, 2, 2, 4), tn(f32, 2, 2, 3), tn(f32, 3, 3, 4), kernels.MatMulParams{})),
			kernels.ErrShape, "cuda: matmul: b has shape [3 3 4], want 2 dimensions or the batch dimensions [2] of a [2 2 3]: shape mismatch"},
		{"matmul activation", err2(MatMul("cuda: matmul", fakeDev, tn(f32, 2, 4), tn(f32, 2, 3), tn(f32, 3, 4), kernels.MatMulParams{Act: 42})),
			kernels.ErrValue, "cuda: matmul: unknown activation 42: invalid value"},
		{"matmul integer", err2(MatMul("cuda: matmul", fakeDev, tn(i32, 2, 4), tn(i32, 2, 3), tn(i32, 3, 4), kernels.MatMulParams{})),
			kernels.ErrDType, "cuda: matmul: a is i32, want one of [f32 f16 bf16]: dtype mismatch"},
		{"add suffix", pick2(Add("cuda: add", fakeDev, o23, x23, tn(f32, 2))),
			kernels.ErrShape, "cuda: add: b has shape [2], want a suffix of a's shape [2 3]: shape mismatch"},
		{"cast shape", pick(Cast("cuda: cast", fakeDev, tn(kernels.I8, 3, 2), x23)),
			kernels.ErrShape, "cuda: cast: out has shape [3 2], want [2 3]: shape mismatch"},
		{"act", pick(Act("cuda: act", fakeDev, o23, x23, 42)), kernels.ErrValue, "cuda: act: unknown activation 42: invalid value"},
		{"actbackward dtype", pick(ActBackward("cuda: actbackward", fakeDev, o23, tn(kernels.F16, 2, 3), x23, kernels.ActGELU)),
			kernels.ErrDType, "cuda: actbackward: x is f32 but dy is f16: dtype mismatch"},
		{"sumrows scalar", pick2(SumRows("cuda: sumrows", fakeDev, tn(f32, 1), tn(f32))),
			kernels.ErrShape, "cuda: sumrows: x has shape [], want at least 1 dimensions: shape mismatch"},
		{"layernorm eps", err2(LayerNorm("cuda: LayerNorm", fakeDev, o23, nil, nil, x23, tn(f32, 3), nil, -1)),
			kernels.ErrValue, "cuda: LayerNorm: eps is -1, want ≥ 0: invalid value"},
		{"layernorm rstd", err2(LayerNorm("cuda: LayerNorm", fakeDev, o23, nil, tn(f32, 3), x23, tn(f32, 3), nil, 0)),
			kernels.ErrShape, "cuda: LayerNorm: rstd has 3 elements (shape [3]), want 2: shape mismatch"},
		{"layernormbackward mean", err2(LayerNormBackward("cuda: LayerNormBackward", fakeDev, o23, nil, nil, x23, x23, tn(f32, 3), tn(kernels.F16, 2), tn(f32, 2))),
			kernels.ErrDType, "cuda: LayerNormBackward: mean is f16, want one of [f32]: dtype mismatch"},
		{"rmsnorm gamma", err2(RMSNorm("cuda: RMSNorm", fakeDev, o23, x23, tn(f32, 2), 0)),
			kernels.ErrShape, "cuda: RMSNorm: gamma has shape [2], want [3]: shape mismatch"},
		{"softmax causal 1-D", err2(Softmax("cuda: Softmax", fakeDev, tn(f32, 4), tn(f32, 4), kernels.AttentionParams{Causal: true})),
			kernels.ErrShape, "cuda: Softmax: x has shape [4], want at least 2 dimensions: shape mismatch"},
		{"softmax KeyLens dtype", err2(Softmax("cuda: Softmax", fakeDev, o23, x23, kernels.AttentionParams{KeyLens: tn(f32, 2)})),
			kernels.ErrDType, "cuda: Softmax: KeyLens is f32, want one of [i32]: dtype mismatch"},
		{"softmax KeyLens shape", err2(Softmax("cuda: Softmax", fakeDev, o23, x23, kernels.AttentionParams{KeyLens: tn(i32, 3)})),
			kernels.ErrShape, "cuda: Softmax: KeyLens has shape [3], want [2]: shape mismatch"},
		{"softmaxbackward", err2(SoftmaxBackward("cuda: SoftmaxBackward", fakeDev, o23, nil, x23)),
			kernels.ErrShape, "cuda: SoftmaxBackward: dy is nil: shape mismatch"},
		{"attention heads", err2(Attention("cuda: Attention", fakeDev, q, q, tn(f32, 2, 3, 5, 8), tn(f32, 2, 3, 5, 8), kernels.AttentionParams{})),
			kernels.ErrShape, "cuda: Attention: q has 4 heads, not a multiple of the 3 KV heads of k: shape mismatch"},
		{"attention k", err2(Attention("cuda: Attention", fakeDev, q, q, tn(f32, 2, 2, 5, 7), kv, kernels.AttentionParams{})),
			kernels.ErrShape, "cuda: Attention: k has shape [2 2 5 7], want [2 Hkv Sk 8] to match q [2 4 3 8]: shape mismatch"},
		{"attention q rank", err2(Attention("cuda: Attention", fakeDev, x23, x23, kv, kv, kernels.AttentionParams{})),
			kernels.ErrShape, "cuda: Attention: q has shape [2 3], want [B Hq Sq D]: shape mismatch"},
		{"attention KeyLens before out", err2(Attention("cuda: Attention", fakeDev, nil, q, kv, kv, kernels.AttentionParams{KeyLens: freed})),
			kernels.ErrFreed, "cuda: Attention: KeyLens: tensor already freed"},
		{"attention out", err2(Attention("cuda: Attention", fakeDev, tn(f32, 2, 4, 3, 9), q, kv, kv, kernels.AttentionParams{})),
			kernels.ErrShape, "cuda: Attention: out has shape [2 4 3 9], want [2 4 3 8]: shape mismatch"},
		{"attentionbackward dk", err2(AttentionBackward("cuda: AttentionBackward", fakeDev, q, q, kv, q, q, kv, kv, kernels.AttentionParams{})),
			kernels.ErrShape, "cuda: AttentionBackward: dk has shape [2 4 3 8], want [2 2 5 8]: shape mismatch"},
		{"embedding table", err2(Embedding("cuda: Embedding", fakeDev, o23, tn(f32, 6), tn(i32, 2))),
			kernels.ErrShape, "cuda: Embedding: table has shape [6], want [V D]: shape mismatch"},
		{"embedding out", err2(Embedding("cuda: Embedding", fakeDev, o23, tn(f32, 9, 3), tn(i32, 3))),
			kernels.ErrShape, "cuda: Embedding: out has shape [2 3], want [3 3]: shape mismatch"},
		{"embeddingbackward ids", err2(EmbeddingBackward("cuda: EmbeddingBackward", fakeDev, tn(f32, 9, 3), o23, tn(f32, 2))),
			kernels.ErrDType, "cuda: EmbeddingBackward: ids is f32, want one of [i32]: dtype mismatch"},
		{"crossentropy loss", pick2(CrossEntropy("cuda: CrossEntropy", fakeDev, tn(kernels.F16, 2), x23, tn(i32, 2))),
			kernels.ErrDType, "cuda: CrossEntropy: loss is f16, want one of [f32]: dtype mismatch"},
		{"crossentropybackward dlogits", pick2(CrossEntropyBackward("cuda: CrossEntropyBackward", fakeDev, tn(f32, 3, 2), x23, tn(i32, 2), 1)),
			kernels.ErrShape, "cuda: CrossEntropyBackward: dlogits has shape [3 2], want [2 3]: shape mismatch"},
		{"crossentropy targets", pick2(CrossEntropy("cuda: CrossEntropy", fakeDev, tn(f32, 2), x23, tn(i32, 2, 1))),
			kernels.ErrShape, "cuda: CrossEntropy: targets has shape [2 1], want [2]: shape mismatch"},
		{"swapaxes rank", err2(SwapAxes("cuda: SwapAxes", fakeDev, tn(f32, 3, 2), x23)),
			kernels.ErrShape, "cuda: SwapAxes: x has shape [2 3], want [A B C D]: shape mismatch"},
		{"swapaxes dtype", err2(SwapAxes("cuda: SwapAxes", fakeDev, tn(kernels.I8, 2, 1, 3, 4), tn(kernels.I8, 2, 3, 1, 4))),
			kernels.ErrDType, "cuda: SwapAxes: x is int8, want one of [f32 f16 bf16 i32]: dtype mismatch"},
		{"swapaxes out dtype", err2(SwapAxes("cuda: SwapAxes", fakeDev, tn(kernels.F16, 2, 1, 3, 4), tn(f32, 2, 3, 1, 4))),
			kernels.ErrDType, "cuda: SwapAxes: out is f16 but x is f32: dtype mismatch"},
		{"swapaxes out shape", err2(SwapAxes("cuda: SwapAxes", fakeDev, tn(f32, 2, 3, 1, 4), tn(f32, 2, 3, 1, 4))),
			kernels.ErrShape, "cuda: SwapAxes: out has shape [2 3 1 4], want [2 1 3 4]: shape mismatch"},
		{"swapaxes in place", err2(SwapAxes("cuda: SwapAxes", fakeDev, x4view, x4)),
			kernels.ErrValue, "cuda: SwapAxes: out is x's storage, want a separate tensor (SwapAxes does not work in place): invalid value"},
		{"adamw dtype", pick(AdamW("cuda: AdamW", fakeDev, st, st, tn(kernels.BF16, 5, 2), st, adamw)),
			kernels.ErrDType, "cuda: AdamW: m is bf16, want one of [f32]: dtype mismatch"},
		{"adamw grad shape", pick(AdamW("cuda: AdamW", fakeDev, st, tn(f32, 2, 5), st, st, adamw)),
			kernels.ErrShape, "cuda: AdamW: grad has shape [2 5], want [5 2]: shape mismatch"},
		{"adamw nil v", pick(AdamW("cuda: AdamW", fakeDev, st, st, st, nil, adamw)),
			kernels.ErrShape, "cuda: AdamW: v is nil: shape mismatch"},
		{"adamw step", adam(withAdamW(func(p *kernels.AdamWParams) { p.Step = 0 })),
			kernels.ErrValue, "cuda: AdamW: Step is 0, want ≥ 1 (the 1-based number of the update): invalid value"},
		{"adamw lr", adam(withAdamW(func(p *kernels.AdamWParams) { p.LR = -1e-3 })),
			kernels.ErrValue, "cuda: AdamW: LR is -0.001, want a finite value ≥ 0: invalid value"},
		{"adamw lr inf", adam(withAdamW(func(p *kernels.AdamWParams) { p.LR = inf })),
			kernels.ErrValue, "cuda: AdamW: LR is +Inf, want a finite value ≥ 0: invalid value"},
		{"adamw beta1", adam(withAdamW(func(p *kernels.AdamWParams) { p.Beta1 = 1 })),
			kernels.ErrValue, "cuda: AdamW: Beta1 is 1, want it in [0, 1): invalid value"},
		{"adamw beta2", adam(withAdamW(func(p *kernels.AdamWParams) { p.Beta2 = -0.5 })),
			kernels.ErrValue, "cuda: AdamW: Beta2 is -0.5, want it in [0, 1): invalid value"},
		{"adamw beta2 NaN", adam(withAdamW(func(p *kernels.AdamWParams) { p.Beta2 = nan })),
			kernels.ErrValue, "cuda: AdamW: Beta2 is NaN, want it in [0, 1): invalid value"},
		{"adamw eps", adam(withAdamW(func(p *kernels.AdamWParams) { p.Eps = 0 })),
			kernels.ErrValue, "cuda: AdamW: Eps is 0, want a finite value > 0: invalid value"},
		{"adamw weight decay", adam(withAdamW(func(p *kernels.AdamWParams) { p.WeightDecay = nan })),
			kernels.ErrValue, "cuda: AdamW: WeightDecay is NaN, want a finite value ≥ 0: invalid value"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			require.Error(t, tc.err)
			assert.True(t, errors.Is(tc.err, tc.sentinel), "%v should wrap %v", tc.err, tc.sentinel)
			assert.Equal(t, tc.want, tc.err.Error())
		})
	}
}

// TestCheckDataLeftToBackend shows what the checks do not check: the
// values of ids, targets and KeyLens, which only the backend can read.
func TestCheckDataLeftToBackend(t *testing.T) {
	lens := tn(kernels.I32, 2) // no storage at all: its values cannot be read
	_, err := Softmax("fake: Softmax", fakeDev, tn(kernels.F32, 2, 3), tn(kernels.F32, 2, 3), kernels.AttentionParams{KeyLens: lens})
	require.NoError(t, err)
	_, err = Embedding("fake: Embedding", fakeDev, tn(kernels.F32, 4, 2), tn(kernels.F32, 3, 2), tn(kernels.I32, 4))
	require.NoError(t, err)
	_, _, err = CrossEntropy("fake: CrossEntropy", fakeDev, tn(kernels.F32, 4), tn(kernels.F32, 4, 3), tn(kernels.I32, 4))
	require.NoError(t, err)
	// Distinct allocations pass the aliasing check of SwapAxes, whatever
	// they hold; so do views of one allocation that is not x's.
	x, out := kernels.NewTensor(fakeDev, kernels.F32, kernels.Shape{1, 2, 3, 1}, new(int)), kernels.NewTensor(fakeDev, kernels.F32, kernels.Shape{1, 3, 2, 1}, new(int))
	_, err = SwapAxes("fake: SwapAxes", fakeDev, out, x)
	require.NoError(t, err)
}

// pick, pick2 and err2 keep the error of a validator's results.
func pick(_ int, err error) error     { return err }
func pick2(_, _ int, err error) error { return err }
func err2[T any](_ T, err error) error {
	return err
}
