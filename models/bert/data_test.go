package bert_test

import (
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/zbench/zbench/kernels"
	"github.com/zbench/zbench/models/bert"
	"github.com/zbench/zbench/models/nn"
)

// corpus is SyntheticCorpus that must succeed.
func corpus(t *testing.T, seed uint64, vocab, first, n int) nn.Corpus {
	t.Helper()
	c, err := nn.SyntheticCorpus(seed, vocab, first, n)
	require.NoError(t, err)
	return c
}

func TestCorpusBatch(t *testing.T) {
	c := corpus(t, 1, 99, 5, 5000)
	m := bert.Masking{Rate: 0.15, MaskID: 3, Vocab: 99}
	const B, S = 64, 16
	b, err := m.Batch(c, rand.New(rand.NewPCG(1, 2)), B, S)
	require.NoError(t, err)
	require.Len(t, b.IDs, B*S)
	require.Len(t, b.Labels, B*S)
	assert.Nil(t, b.TypeIDs)
	again, err := m.Batch(c, rand.New(rand.NewPCG(1, 2)), B, S)
	require.NoError(t, err)
	assert.Equal(t, b, again, "seeded by r")

	var masked, kept, random int
	for row := range B {
		ids, labels := b.IDs[row*S:(row+1)*S], b.Labels[row*S:(row+1)*S]
		n := 0
		for i, l := range labels {
			require.True(t, ids[i] >= 0 && ids[i] < 99)
			if l == kernels.IgnoreIndex {
				require.GreaterOrEqual(t, ids[i], int32(5), "an unlabelled token is the corpus's")
				continue
			}
			n++
			require.GreaterOrEqual(t, l, int32(5), "a label is the corpus's token")
			switch {
			case ids[i] == m.MaskID:
				masked++
			case ids[i] == l:
				kept++
			default:
				random++
			}
		}
		assert.Equal(t, 2, n, "round(0.15·16) = 2 labels per row")
	}
	// 80% [MASK], 10% random, 10% kept (a random id may equal the label).
	total := float64(masked + kept + random)
	assert.InDelta(t, 0.8, float64(masked)/total, 0.1)
	assert.InDelta(t, 0.1, float64(kept)/total, 0.08)
	assert.InDelta(t, 0.1, float64(random)/total, 0.08)

	// Every sequence gets at least one label.
	b, err = bert.Masking{Rate: 0.01, MaskID: 3, Vocab: 99}.Batch(c, rand.New(rand.NewPCG(3, 4)), 4, 8)
	require.NoError(t, err)
	for row := range 4 {
		n := 0
		for _, l := range b.Labels[row*8 : (row+1)*8] {
			if l != kernels.IgnoreIndex {
				n++
			}
		}
		assert.Equal(t, 1, n)
	}

	// The batch trains.
	tr := newTrainer(t, tinyCheckpoint(t), bert.TrainOptions{Batch: 4, Seq: 8, Opt: bert.DefaultAdamW()})
	_, err = tr.Step(b)
	require.NoError(t, err)

	_, err = m.Batch(nn.Corpus{Name: "short", IDs: []int32{1, 2, 3}}, rand.New(rand.NewPCG(1, 1)), 1, 4)
	assert.ErrorIs(t, err, bert.ErrInput)
	assert.ErrorContains(t, err, "short")
	// A corpus of exactly seq tokens is enough.
	_, err = m.Batch(nn.Corpus{Name: "exact", IDs: []int32{1, 2, 3, 4}}, rand.New(rand.NewPCG(1, 1)), 2, 4)
	assert.NoError(t, err)
}

func TestCorpusBatchErrors(t *testing.T) {
	c := corpus(t, 1, 99, 5, 100)
	ok := bert.Masking{Rate: 0.15, MaskID: 3, Vocab: 99}
	for _, tc := range []struct {
		name       string
		m          bert.Masking
		batch, seq int
		want       string
	}{
		{"rate above 1", bert.Masking{Rate: 1.5, MaskID: 3, Vocab: 99}, 2, 8, "rate"},
		{"rate 0", bert.Masking{MaskID: 3, Vocab: 99}, 2, 8, "rate"},
		{"no vocabulary", bert.Masking{Rate: 0.15, MaskID: 3}, 2, 8, "vocabulary"},
		{"mask id outside", bert.Masking{Rate: 0.15, MaskID: 99, Vocab: 99}, 2, 8, "mask id"},
		{"seq 0", ok, 2, 0, "seq 0"},
		{"negative batch", ok, -1, 8, "batch -1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := tc.m.Batch(c, rand.New(rand.NewPCG(1, 1)), tc.batch, tc.seq)
			require.ErrorIs(t, err, bert.ErrInput)
			assert.ErrorContains(t, err, tc.want)
		})
	}
}
