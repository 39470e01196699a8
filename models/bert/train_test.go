package bert_test

import (
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/zbench/zbench/kernels"
	"github.com/zbench/zbench/kernels/cpu"
	"github.com/zbench/zbench/models/bert"
	"github.com/zbench/zbench/models/fp8"
	"github.com/zbench/zbench/models/nn"
	"github.com/zbench/zbench/models/safetensors"
)

const ign = kernels.IgnoreIndex

// smallBatch is a [2, 8] masked-LM batch with 4 labelled positions.
func smallBatch() bert.Batch {
	return bert.Batch{
		IDs:     []int32{2, 3, 45, 17, 88, 3, 9, 61, 3, 71, 12, 98, 0, 33, 5, 3},
		TypeIDs: []int32{0, 0, 0, 0, 1, 1, 1, 1, 0, 0, 0, 1, 1, 1, 1, 1},
		Labels:  []int32{ign, 14, ign, ign, ign, 77, ign, ign, 40, ign, 12, ign, ign, ign, ign, 98},
	}
}

// noStep is AdamW with a zero learning rate and no weight decay: Step
// leaves the parameters as they are, so it evaluates loss and gradient.
func noStep() nn.AdamW {
	o := bert.DefaultAdamW()
	o.LR, o.WeightDecay = 0, 0
	return o
}

func newTrainer(t testing.TB, src nn.Source, o bert.TrainOptions) *bert.Trainer {
	t.Helper()
	tr, err := bert.NewTrainer(cpu.New(), tinyCfg(), src, o)
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, tr.Close()) })
	return tr
}

func tinyCheckpoint(t testing.TB) *nn.Checkpoint {
	t.Helper()
	ck, err := bert.OpenCheckpoint(tinyModel)
	require.NoError(t, err)
	return ck
}

func TestDefaultAdamW(t *testing.T) {
	assert.Equal(t, nn.AdamW{LR: 1e-4, Beta1: 0.9, Beta2: 0.999, Eps: 1e-8, WeightDecay: 0.01}, bert.DefaultAdamW())
}

func TestTrainerBatchErrors(t *testing.T) {
	tr := newTrainer(t, tinyCheckpoint(t), bert.TrainOptions{Batch: 2, Seq: 8, Opt: bert.DefaultAdamW()})
	with := func(fn func(*bert.Batch)) bert.Batch {
		b := smallBatch()
		b.IDs, b.TypeIDs, b.Labels = slices.Clone(b.IDs), slices.Clone(b.TypeIDs), slices.Clone(b.Labels)
		fn(&b)
		return b
	}
	tests := []struct {
		name  string
		batch bert.Batch
		want  string
	}{
		{"no masked tokens", with(func(b *bert.Batch) {
			for i := range b.Labels {
				b.Labels[i] = ign
			}
		}), "no masked tokens"},
		{"label past the vocabulary", with(func(b *bert.Batch) { b.Labels[10] = 99 }), "labels[1, 2] = 99"},
		{"negative label", with(func(b *bert.Batch) { b.Labels[3] = -1 }), "labels[0, 3] = -1"},
		{"labels of wrong length", with(func(b *bert.Batch) { b.Labels = b.Labels[:15] }), "labels has 15 values"},
		{"id past the vocabulary", with(func(b *bert.Batch) { b.IDs[15] = 99 }), "input_ids[1, 7] = 99"},
		{"ids of wrong length", with(func(b *bert.Batch) { b.IDs = b.IDs[:8] }), "input_ids has 8 values"},
		{"token type out of range", with(func(b *bert.Batch) { b.TypeIDs[0] = 2 }), "token_type_ids[0, 0] = 2"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := tr.Step(tc.batch)
			require.Error(t, err)
			assert.ErrorIs(t, err, bert.ErrInput)
			assert.Contains(t, err.Error(), tc.want)
		})
	}
	assert.Equal(t, 0, tr.StepCount(), "a rejected batch is not a step")
	loss, err := tr.Step(smallBatch())
	require.NoError(t, err)
	assert.InDelta(t, math.Log(99), loss, 1, "loss of near-uniform logits")
	assert.Equal(t, 1, tr.StepCount())
}

func TestNewTrainerErrors(t *testing.T) {
	for _, tc := range []struct{ batch, seq int }{{2, 65}, {0, 8}, {2, 0}} {
		be := cpu.New()
		_, err := bert.NewTrainer(be, tinyCfg(), bert.Synthetic(1), bert.TrainOptions{Batch: tc.batch, Seq: tc.seq, Opt: bert.DefaultAdamW()})
		assert.ErrorIs(t, err, bert.ErrInput, "batch %d seq %d", tc.batch, tc.seq)
		assert.Zero(t, be.MemStats().CurrentBytes)
	}
	bad := tinyCfg()
	bad.HiddenAct = "swish"
	_, err := bert.NewTrainer(cpu.New(), bad, bert.Synthetic(1), bert.TrainOptions{Batch: 2, Seq: 8, Opt: bert.DefaultAdamW()})
	assert.ErrorIs(t, err, bert.ErrConfig)

	// A checkpoint without the masked-LM head cannot be trained.
	noHead := mapTensors(tinyTensors(t), func(x *safetensors.Tensor) bool { return !strings.HasPrefix(x.Name, "cls.predictions") })
	ck, err := bert.OpenCheckpoint(writeCheckpoint(t, noHead))
	require.NoError(t, err)
	be := cpu.New()
	_, err = bert.NewTrainer(be, tinyCfg(), ck, bert.TrainOptions{Batch: 2, Seq: 8, Opt: bert.DefaultAdamW()})
	assert.ErrorIs(t, err, nn.ErrWeights)
	assert.Contains(t, err.Error(), "cls.predictions")
	assert.Zero(t, be.MemStats().CurrentBytes, "a failed NewTrainer frees what it allocated")
}

func TestTrainerParamsAndClose(t *testing.T) {
	be := cpu.New()
	tr, err := bert.NewTrainer(be, tinyCfg(), tinyCheckpoint(t), bert.TrainOptions{Batch: 2, Seq: 8, Opt: bert.DefaultAdamW()})
	require.NoError(t, err)
	assert.Equal(t, tinyCfg().Params(false, true), tr.Params())
	v, err := tr.Param("cls.predictions.bias")
	require.NoError(t, err)
	assert.Len(t, v, 99)
	_, err = tr.Param("pooler.dense.weight")
	assert.ErrorContains(t, err, "pooler.dense.weight")
	_, err = tr.Grad("nope")
	assert.Error(t, err)
	_, err = tr.Step(smallBatch())
	require.NoError(t, err)
	// The masked count changes the head's buffers; they are freed too.
	b := smallBatch()
	b.Labels = slices.Clone(b.Labels)
	b.Labels[0] = 7
	_, err = tr.Step(b)
	require.NoError(t, err)
	require.NoError(t, tr.Close())
	assert.Zero(t, be.MemStats().CurrentBytes)
}

// perturbed is a Source that adds delta to one element of one parameter,
// or delta·dir[i] to each element i when dir is not nil.
type perturbed struct {
	src   nn.Source
	name  string
	index int
	delta float32
	dir   []float32
}

func (p perturbed) Values(q nn.Param) ([]float32, error) {
	v, err := p.src.Values(q)
	if err != nil || q.Name != p.name {
		return v, err
	}
	v = slices.Clone(v)
	if p.dir != nil {
		for i, d := range p.dir {
			v[i] += p.delta * d
		}
		return v, nil
	}
	v[p.index] += p.delta
	return v, nil
}

// lossAt is the trainer's loss on b with src's weights, without an update.
func lossAt(t *testing.T, src nn.Source, b bert.Batch) float64 {
	t.Helper()
	tr, err := bert.NewTrainer(cpu.New(), tinyCfg(), src, bert.TrainOptions{Batch: 2, Seq: 8, Opt: noStep()})
	require.NoError(t, err)
	defer func() { require.NoError(t, tr.Close()) }()
	loss, err := tr.Step(b)
	require.NoError(t, err)
	return float64(loss)
}

// TestTrainerGradientFiniteDifferences compares Grad with central
// differences of the loss, at the element of largest gradient of each
// parameter and at a second element of sizeable gradient.
func TestTrainerGradientFiniteDifferences(t *testing.T) {
	ck := tinyCheckpoint(t)
	batch := smallBatch()
	tr := newTrainer(t, ck, bert.TrainOptions{Batch: 2, Seq: 8, Opt: noStep()})
	before, err := tr.Param("encoder.layer.0.attention.self.query.weight")
	require.NoError(t, err)
	_, err = tr.Step(batch)
	require.NoError(t, err)
	after, err := tr.Param("encoder.layer.0.attention.self.query.weight")
	require.NoError(t, err)
	require.Equal(t, before, after, "LR 0 and no weight decay leave the parameters alone")

	names := []string{
		"cls.predictions.bias",
		"cls.predictions.transform.dense.weight",
		"cls.predictions.transform.LayerNorm.weight",
		"cls.predictions.transform.LayerNorm.bias",
		"encoder.layer.1.output.dense.weight",
		"encoder.layer.1.output.LayerNorm.weight",
		"encoder.layer.1.intermediate.dense.bias",
		"encoder.layer.1.attention.self.value.weight",
		"encoder.layer.0.attention.self.query.weight",
		"encoder.layer.0.attention.self.key.weight",
		"encoder.layer.0.attention.output.LayerNorm.bias",
		"embeddings.LayerNorm.weight",
		"embeddings.word_embeddings.weight",
		"embeddings.position_embeddings.weight",
		"embeddings.token_type_embeddings.weight",
	}
	for _, name := range names {
		t.Run(name, func(t *testing.T) { checkElements(t, tr, ck, batch, name) })
	}

	// Whole tensors: the directional derivative along sign(grad), Σ|grad|,
	// against central differences, for every parameter. This catches
	// errors in gradients too small to check element by element (the
	// first layer's query and key weights).
	for _, p := range tr.Params() {
		g, err := tr.Grad(p.Name)
		require.NoError(t, err)
		dir := make([]float32, len(g))
		var want float64
		for i, x := range g {
			switch {
			case x > 0:
				dir[i] = 1
			case x < 0:
				dir[i] = -1
			}
			want += math.Abs(float64(x))
		}
		const h = 1e-3
		up := lossAt(t, perturbed{src: ck, name: p.Name, delta: h, dir: dir}, batch)
		down := lossAt(t, perturbed{src: ck, name: p.Name, delta: -h, dir: dir}, batch)
		fd := (up - down) / (2 * h)
		t.Logf("%s: Σ|grad| %.6g, central difference %.6g", p.Name, want, fd)
		assert.InDelta(t, fd, want, 1e-2*math.Abs(fd)+5e-4, "directional derivative of %s", p.Name)
	}

	// The key bias does not change the loss (softmax is shift invariant):
	// its gradient is zero up to rounding.
	for _, l := range []int{0, 1} {
		g, err := tr.Grad(fmt.Sprintf("encoder.layer.%d.attention.self.key.bias", l))
		require.NoError(t, err)
		for i, x := range g {
			assert.InDelta(t, 0, x, 1e-6, "key bias gradient [%d]", i)
		}
	}
	// Positions the batch does not reach get no gradient.
	g, err := tr.Grad("embeddings.position_embeddings.weight")
	require.NoError(t, err)
	for i := 8 * 32; i < len(g); i++ {
		require.Zero(t, g[i], "position %d", i/32)
	}
}

// checkElements compares tr's gradient of name with central differences
// of the loss (weights from src) at the element of largest gradient and at
// a second element of sizeable gradient.
func checkElements(t *testing.T, tr *bert.Trainer, src nn.Source, batch bert.Batch, name string) {
	t.Helper()
	g, err := tr.Grad(name)
	require.NoError(t, err)
	theta, err := tr.Param(name)
	require.NoError(t, err)
	first := argmaxAbs(g, -1)
	second := argmaxAbs(g, first)
	for _, i := range []int{first, second} {
		if math.Abs(float64(g[i])) < 0.1*math.Abs(float64(g[first])) {
			continue
		}
		gi := math.Abs(float64(g[i]))
		if gi < 2e-4 {
			// The float32 loss would move by a few ulps: left to the
			// directional check of TestTrainerGradientFiniteDifferences.
			t.Logf("%s[%d]: gradient %.3g too small for an element check", name, i, g[i])
			continue
		}
		// A step of 1% of the value, at least 4e-3 and enough to move the
		// loss (about 4.6, ulp 5e-7) by some 40 ulps: up to 0.05.
		h := float32(min(math.Max(math.Max(1e-2*math.Abs(float64(theta[i])), 4e-3), 1e-5/gi), 0.05))
		up := lossAt(t, perturbed{src: src, name: name, index: i, delta: h}, batch)
		down := lossAt(t, perturbed{src: src, name: name, index: i, delta: -h}, batch)
		fd := (up - down) / (2 * float64(h))
		t.Logf("%s[%d]: analytic %.6g, central difference %.6g (h %.3g)", name, i, g[i], fd, h)
		assert.InDelta(t, fd, g[i], 2e-2*math.Abs(fd)+2e-5, "%s[%d]", name, i)
	}
}

// scaled is a Source that multiplies the parameters whose names end in one
// of suffixes by factor.
type scaled struct {
	src      nn.Source
	factor   float32
	suffixes []string
}

func (s scaled) Values(p nn.Param) ([]float32, error) {
	v, err := s.src.Values(p)
	if err != nil {
		return v, err
	}
	for _, suf := range s.suffixes {
		if strings.HasSuffix(p.Name, suf) {
			v = slices.Clone(v)
			for i := range v {
				v[i] *= s.factor
			}
		}
	}
	return v, nil
}

// TestTrainerAttentionGradients checks the attention projections element by
// element at a point where attention is far from uniform: the tiny
// checkpoint's query and key weights scaled by 12, so that the scores are
// of order 1 and their gradients large enough for float32 differences.
func TestTrainerAttentionGradients(t *testing.T) {
	src := scaled{tinyCheckpoint(t), 12, []string{"attention.self.query.weight", "attention.self.key.weight"}}
	batch := smallBatch()
	tr := newTrainer(t, src, bert.TrainOptions{Batch: 2, Seq: 8, Opt: noStep()})
	_, err := tr.Step(batch)
	require.NoError(t, err)
	for _, l := range []int{0, 1} {
		for _, n := range []string{"query.weight", "query.bias", "key.weight", "value.weight", "value.bias"} {
			name := fmt.Sprintf("encoder.layer.%d.attention.self.%s", l, n)
			t.Run(name, func(t *testing.T) { checkElements(t, tr, src, batch, name) })
		}
	}
}

// argmaxAbs is the index of the largest |v[i]|, skipping skip.
func argmaxAbs(v []float32, skip int) int {
	best := -1
	for i, x := range v {
		if i != skip && (best < 0 || math.Abs(float64(x)) > math.Abs(float64(v[best]))) {
			best = i
		}
	}
	return best
}

// trainGolden is testdata/golden/bert-train.safetensors (PyTorch
// BertForMaskedLM, float64): one batch [4, 16], the optimiser, each step's
// loss, and floats for its other tensors.
type trainGolden struct {
	batch  bert.Batch
	opt    nn.AdamW
	loss   []float32
	floats func(name string) []float32
}

func loadTrainGolden(t *testing.T) trainGolden {
	gold, err := safetensors.Open("../../testdata/golden/bert-train.safetensors")
	require.NoError(t, err)
	var hp struct {
		LR          float32 `json:"lr"`
		Beta1       float32 `json:"beta1"`
		Beta2       float32 `json:"beta2"`
		Eps         float32 `json:"eps"`
		WeightDecay float32 `json:"weight_decay"`
		Steps       int     `json:"steps"`
	}
	require.NoError(t, json.Unmarshal([]byte(gold.Metadata()["train"]), &hp))
	ints := func(name string) []int32 {
		x, err := gold.Tensor(name)
		require.NoError(t, err)
		require.Equal(t, []int{4, 16}, x.Shape)
		v, err := x.Int32()
		require.NoError(t, err)
		return v
	}
	floats := func(name string) []float32 {
		x, err := gold.Tensor(name)
		require.NoError(t, err)
		v, err := x.Float32()
		require.NoError(t, err)
		return v
	}
	g := trainGolden{
		batch:  bert.Batch{IDs: ints("input_ids"), TypeIDs: ints("token_type_ids"), Labels: ints("labels")},
		opt:    nn.AdamW{LR: hp.LR, Beta1: hp.Beta1, Beta2: hp.Beta2, Eps: hp.Eps, WeightDecay: hp.WeightDecay},
		loss:   floats("loss"),
		floats: floats,
	}
	require.Len(t, g.loss, hp.Steps)
	return g
}

// TestTrainerMatchesReference replays the training golden: the gradients
// of step 1, the parameters after it and the losses of 10 AdamW steps.
func TestTrainerMatchesReference(t *testing.T) {
	g := loadTrainGolden(t)
	batch, floats, wantLoss := g.batch, g.floats, g.loss
	tr := newTrainer(t, tinyCheckpoint(t), bert.TrainOptions{Batch: 4, Seq: 16, Opt: g.opt})

	fileName := func(p string) string {
		if strings.HasPrefix(p, "cls.") {
			return p
		}
		return "bert." + p
	}
	for step := range wantLoss {
		loss, err := tr.Step(batch)
		require.NoError(t, err)
		assert.InDelta(t, wantLoss[step], loss, 2e-5*float64(wantLoss[step]), "loss of step %d", step+1)
		if step > 0 {
			continue
		}
		for _, p := range tr.Params() {
			grad, err := tr.Grad(p.Name)
			require.NoError(t, err)
			want := floats("grad/" + fileName(p.Name))
			if strings.HasSuffix(p.Name, "attention.self.key.bias") {
				// Zero in exact arithmetic (softmax is shift invariant).
				for i := range want {
					assert.InDelta(t, want[i], grad[i], 1e-6, "gradient of %s[%d]", p.Name, i)
				}
			} else {
				assert.Less(t, relErr(grad, want), 1e-4, "gradient of %s", p.Name)
			}

			v, err := tr.Param(p.Name)
			require.NoError(t, err)
			want = floats("step1/" + fileName(p.Name))
			worst, at := 0.0, 0
			for i := range want {
				if d := math.Abs(float64(v[i]) - float64(want[i])); d > worst {
					worst, at = d, i
				}
			}
			// One AdamW step moves each value by about LR; an element
			// whose tiny gradient changes sign may differ by up to 2·LR.
			assert.Less(t, worst, 2e-6, "%s after step 1: |Δ| %.3g at %d (want %v, got %v)", p.Name, worst, at, want[at], v[at])
		}
	}
}

// TestTrainerPrecisions replays the training golden in bfloat16 mixed
// precision and with FP8 linears: the losses of its 10 steps follow the
// float64 reference's closely; the gradients, taken at step 2 without an
// update (so that FP8's delayed scales come from step 1's amaxes), are
// bfloat16's and, in the FP8 linears, E5M2's rounding away from it.
func TestTrainerPrecisions(t *testing.T) {
	g := loadTrainGolden(t)
	for _, tc := range []struct {
		name     string
		o        bert.TrainOptions
		linGrads float64 // the encoder linears' gradients' relative error
	}{
		{"bf16", bert.TrainOptions{Precision: nn.BF16}, 2.5e-2},
		{"fp8", bert.TrainOptions{Precision: nn.BF16, FP8: &fp8.DelayedScaling{}}, 0.2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := tc.o
			o.Batch, o.Seq = 4, 16
			o.Opt = g.opt
			tr := newTrainer(t, tinyCheckpoint(t), o)
			for step, want := range g.loss {
				loss, err := tr.Step(g.batch)
				require.NoError(t, err)
				assert.InDelta(t, want, loss, 1.5e-3*float64(want), "loss of step %d", step+1)
			}

			o.Opt = noStep()
			tr = newTrainer(t, tinyCheckpoint(t), o)
			for range 2 {
				_, err := tr.Step(g.batch)
				require.NoError(t, err)
			}
			for _, p := range tr.Params() {
				if strings.HasSuffix(p.Name, "attention.self.key.bias") {
					continue // zero in exact arithmetic
				}
				grad, err := tr.Grad(p.Name)
				require.NoError(t, err)
				name := p.Name
				if !strings.HasPrefix(name, "cls.") {
					name = "bert." + name
				}
				tol := 2.5e-2
				if strings.HasPrefix(p.Name, "encoder.") && !strings.Contains(p.Name, "LayerNorm") {
					tol = tc.linGrads
				}
				assert.Less(t, relErr(grad, g.floats("grad/"+name)), tol, "gradient of %s", p.Name)
			}
		})
	}
}

func TestTrainerPrecisionErrors(t *testing.T) {
	for _, o := range []bert.TrainOptions{
		{Precision: nn.F16},
		{Precision: nn.Mixed},
		{Precision: nn.F32, FP8: &fp8.DelayedScaling{}},
		{FP8: &fp8.DelayedScaling{}},
		{Precision: nn.BF16, FP8: &fp8.DelayedScaling{AmaxHistoryLen: -1}},
	} {
		be := cpu.New()
		o.Batch, o.Seq, o.Opt = 2, 8, bert.DefaultAdamW()
		_, err := bert.NewTrainer(be, tinyCfg(), bert.Synthetic(1), o)
		assert.Error(t, err, "%+v", o)
		assert.Zero(t, be.MemStats().CurrentBytes, "%+v: a failed NewTrainer frees what it allocated", o)
	}
}
