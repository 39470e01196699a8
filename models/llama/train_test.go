package llama

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/zbench/zbench/kernels"
	"github.com/zbench/zbench/models/lora"
	"github.com/zbench/zbench/models/nn"
)

// trainBatch returns a random right-padded micro-batch: rows of random
// length, a random prompt prefix and the padding labelled −100.
func trainBatch(seed uint64, batch, seq, vocab int) TrainBatch {
	r := rand.New(rand.NewPCG(seed, 2))
	b := TrainBatch{IDs: make([]int32, batch*seq), Labels: make([]int32, batch*seq)}
	for row := range batch {
		n := seq/2 + r.IntN(seq/2+1)
		prompt := 1 + r.IntN(n/2)
		for s := range seq {
			i := row*seq + s
			b.Labels[i] = kernels.IgnoreIndex
			if s < n {
				b.IDs[i] = int32(3 + r.IntN(vocab-3))
				if s >= prompt {
					b.Labels[i] = b.IDs[i]
				}
			}
		}
	}
	return b
}

// trainOptions are small options with every module adapted, dropout and
// a non-zero B (from a first update), so that every gradient is exercised.
func trainOptions(batch, seq int, dropout float64) TrainOptions {
	return TrainOptions{
		Batch: batch, Seq: seq, Seed: 7,
		LoRA:     lora.Config{R: 4, Alpha: 8, Dropout: dropout, Targets: lora.Modules},
		AdamW:    nn.AdamW{LR: 1e-2, Beta1: 0.9, Beta2: 0.999, Eps: 1e-8},
		Schedule: nn.Schedule{Kind: "constant"},
	}
}

func newTrainer(t *testing.T, m *Model, o TrainOptions) *Trainer {
	t.Helper()
	tr, err := NewTrainer(m, o)
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, tr.Close()) })
	return tr
}

// grads downloads every adapter gradient, by name.
func grads(t *testing.T, tr *Trainer) map[string][]float32 {
	t.Helper()
	out := map[string][]float32{}
	for _, p := range tr.state.Params {
		g, err := tr.Grad(p.Name)
		require.NoError(t, err)
		out[p.Name] = g
	}
	return out
}

// TestTrainFirstLossIsTheModels checks that with PEFT's initialisation (B
// zero) the first loss is the frozen model's: the cross entropy of
// Model.Forward's logits over the learned tokens.
func TestTrainFirstLossIsTheModels(t *testing.T) {
	cfg := testConfig()
	m := loadTest(t, cfg, nn.F32)
	const B, S = 2, 12
	b := trainBatch(1, B, S, cfg.VocabSize)
	tr := newTrainer(t, m, trainOptions(B, S, 0))
	res, err := tr.Step(b)
	require.NoError(t, err)

	logits, err := m.Forward(Inputs{IDs: b.IDs}, B, S)
	require.NoError(t, err)
	V := cfg.VocabSize
	var sum float64
	n := 0
	for i := range B * S {
		if i%S == S-1 || b.Labels[i+1] == kernels.IgnoreIndex {
			continue
		}
		row := logits[i*V : (i+1)*V]
		mx := math.Inf(-1)
		for _, v := range row {
			mx = math.Max(mx, float64(v))
		}
		var z float64
		for _, v := range row {
			z += math.Exp(float64(v) - mx)
		}
		sum += mx + math.Log(z) - float64(row[b.Labels[i+1]])
		n++
	}
	assert.Equal(t, n, res.Tokens)
	assert.InEpsilon(t, sum/float64(n), res.Loss, 1e-5)
	assert.InDelta(t, 1e-2, res.LR, 1e-9, "constant schedule without warm-up")
	assert.Positive(t, res.GradNorm)
}

// TestTrainCheckpointing checks that recomputing each layer in the
// backward pass gives the very same losses and gradients, dropout
// included (the masks are drawn again from the same streams).
func TestTrainCheckpointing(t *testing.T) {
	cfg := testConfig()
	m := loadTest(t, cfg, nn.F32)
	const B, S = 2, 10
	o := trainOptions(B, S, 0.1)
	plain := newTrainer(t, m, o)
	o.Checkpoint = true
	ckpt := newTrainer(t, m, o)
	for step := range 3 {
		b := trainBatch(uint64(step), B, S, cfg.VocabSize)
		r1, err := plain.Step(b)
		require.NoError(t, err)
		r2, err := ckpt.Step(b)
		require.NoError(t, err)
		assert.Equal(t, r1, r2, "step %d", step)
	}
	assert.Equal(t, grads(t, plain), grads(t, ckpt))
	assert.Less(t, ckpt.bufs.Bytes(), plain.bufs.Bytes(), "checkpointing keeps fewer activations")
}

// TestTrainAccumulation checks that two micro-batches of one sequence
// make the update one batch of both makes: the loss is the mean over the
// learned tokens of both, and so are the gradients.
func TestTrainAccumulation(t *testing.T) {
	cfg := testConfig()
	m := loadTest(t, cfg, nn.F32)
	const S = 10
	both := trainBatch(3, 2, S, cfg.VocabSize)
	half := func(i int) TrainBatch {
		return TrainBatch{IDs: both.IDs[i*S : (i+1)*S], Labels: both.Labels[i*S : (i+1)*S]}
	}
	one := newTrainer(t, m, trainOptions(2, S, 0))
	acc := newTrainer(t, m, trainOptions(1, S, 0))
	for range 2 {
		r1, err := one.Step(both)
		require.NoError(t, err)
		r2, err := acc.Step(half(0), half(1))
		require.NoError(t, err)
		assert.Equal(t, r1.Tokens, r2.Tokens)
		assert.InEpsilon(t, r1.Loss, r2.Loss, 1e-6)
		assert.InEpsilon(t, r1.GradNorm, r2.GradNorm, 1e-5)
	}
	g1, g2 := grads(t, one), grads(t, acc)
	for name, g := range g1 {
		assert.Less(t, rel(t, g2[name], g), 1e-5, name)
	}
}

// TestTrainLearns checks that repeated updates on one batch lower its
// loss, in each precision, and that the adapter comes back with PEFT's
// names and the trained values.
func TestTrainLearns(t *testing.T) {
	cfg := testConfig()
	for _, p := range []nn.Precision{nn.F32, nn.BF16} {
		t.Run(p.String(), func(t *testing.T) {
			m := loadTest(t, cfg, p)
			o := trainOptions(2, 12, 0.05)
			o.LoRA.Targets = []string{"q_proj", "v_proj", "down_proj"}
			tr := newTrainer(t, m, o)
			b := trainBatch(4, 2, 12, cfg.VocabSize)
			first, err := tr.Step(b)
			require.NoError(t, err)
			var last StepResult
			for range 20 {
				last, err = tr.Step(b)
				require.NoError(t, err)
			}
			assert.Less(t, last.Loss, first.Loss-0.5, "20 updates at lr 1e-2 on one batch")
			assert.Equal(t, 21, tr.Updates())
			ad, err := tr.Adapter()
			require.NoError(t, err)
			assert.Len(t, ad.Targets, 2*3)
			assert.Len(t, ad.Tensors, 2*2*3)
			b1 := ad.Tensors["base_model.model.model.layers.1.mlp.down_proj.lora_B.weight"]
			require.Len(t, b1, cfg.HiddenSize*4)
			assert.NotZero(t, b1[0], "B moved from zero")
		})
	}
}

func TestTrainErrors(t *testing.T) {
	cfg := testConfig()
	m := loadTest(t, cfg, nn.F32)
	_, err := NewTrainer(m, trainOptions(1, 1, 0))
	assert.ErrorIs(t, err, ErrInput)
	o := trainOptions(1, 8, 0)
	o.LoRA.R = 0
	_, err = NewTrainer(m, o)
	assert.ErrorIs(t, err, lora.ErrConfig)
	o = trainOptions(1, 8, 0)
	o.Schedule.Kind = "exponential"
	_, err = NewTrainer(m, o)
	assert.ErrorContains(t, err, "exponential")

	tr := newTrainer(t, m, trainOptions(1, 8, 0))
	b := trainBatch(5, 1, 8, cfg.VocabSize)
	for _, tc := range []struct {
		name string
		edit func(b *TrainBatch)
		want string
	}{
		{"short", func(b *TrainBatch) { b.IDs = b.IDs[:7] }, "7 ids and 8 labels"},
		{"id", func(b *TrainBatch) { b.IDs[2] = int32(cfg.VocabSize) }, "input id 97 at [0, 2]"},
		{"label", func(b *TrainBatch) { b.Labels[3] = -1 }, "label -1 at [0, 3]"},
		{"nothing to learn", func(b *TrainBatch) {
			for i := range b.Labels {
				b.Labels[i] = kernels.IgnoreIndex
			}
		}, "no label to learn"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			bad := TrainBatch{IDs: append([]int32(nil), b.IDs...), Labels: append([]int32(nil), b.Labels...)}
			tc.edit(&bad)
			_, err := tr.Step(bad)
			require.ErrorIs(t, err, ErrInput)
			assert.ErrorContains(t, err, tc.want)
		})
	}
	_, err = tr.Step()
	assert.ErrorIs(t, err, ErrInput)
	assert.Zero(t, tr.Updates())
}
