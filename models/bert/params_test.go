package bert_test

import (
	"sort"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/zbench/zbench/models/bert"
	"github.com/zbench/zbench/models/synth"
)

// countByFormula counts BERT's parameters from the architecture, not from
// Params.
func countByFormula(c bert.Config, pooler, mlm bool) int64 {
	V, P, T := int64(c.VocabSize), int64(c.MaxPositionEmbeddings), int64(c.TypeVocabSize)
	H, I, L := int64(c.HiddenSize), int64(c.IntermediateSize), int64(c.NumHiddenLayers)
	linear := func(out, in int64) int64 { return out*in + out }
	ln := 2 * H
	n := (V+P+T)*H + ln
	n += L * (4*linear(H, H) + ln + linear(I, H) + linear(H, I) + ln)
	if pooler {
		n += linear(H, H)
	}
	if mlm {
		n += linear(H, H) + ln + V // transform, LayerNorm, decoder bias (weight tied)
	}
	return n
}

func TestCountParams(t *testing.T) {
	// bert-base-uncased's BertModel: the well-known count.
	assert.Equal(t, int64(109_482_240), bert.Base().CountParams(true, false))
	// The training encoder: the count of Train6's doc comment, from the formula.
	want := countByFormula(bert.Train6(), false, true)
	assert.Equal(t, int64(66_987_066), want)
	assert.Equal(t, want, bert.Train6().CountParams(false, true))
	assert.Equal(t, int64(23_440_896), int64(bert.Train6().VocabSize*bert.Train6().HiddenSize))

	for _, c := range []bert.Config{bert.Base(), bert.Train6(), tinyCfg()} {
		for _, pooler := range []bool{false, true} {
			for _, mlm := range []bool{false, true} {
				assert.Equal(t, countByFormula(c, pooler, mlm), c.CountParams(pooler, mlm), "%+v pooler=%v mlm=%v", c, pooler, mlm)
			}
		}
	}
}

func TestParamsMatchCheckpointNames(t *testing.T) {
	// The tiny checkpoint is BertForPreTraining-style: "bert."-prefixed
	// BertModel tensors (pooler included), cls.predictions.* without the
	// tied decoder, and the next-sentence head cls.seq_relationship.*.
	file := map[string][]int{}
	for _, x := range tinyTensors(t) {
		name := strings.TrimPrefix(x.Name, "bert.")
		file[name] = x.Shape
	}
	params := tinyCfg().Params(true, true)
	got := map[string][]int{}
	for _, p := range params {
		_, dup := got[p.Name]
		require.False(t, dup, "duplicate parameter %s", p.Name)
		got[p.Name] = p.Shape
	}
	delete(file, "cls.seq_relationship.weight")
	delete(file, "cls.seq_relationship.bias")
	assert.Equal(t, file, got)

	// Order: embeddings, layers in order, pooler, head.
	names := make([]string, len(params))
	for i, p := range params {
		names[i] = p.Name
	}
	assert.Equal(t, "embeddings.word_embeddings.weight", names[0])
	assert.Equal(t, "cls.predictions.bias", names[len(names)-1])
	assert.Less(t, index(names, "encoder.layer.0.output.LayerNorm.bias"), index(names, "encoder.layer.1.attention.self.query.weight"))
	assert.Less(t, index(names, "encoder.layer.1.output.LayerNorm.bias"), index(names, "pooler.dense.weight"))
	assert.Less(t, index(names, "pooler.dense.bias"), index(names, "cls.predictions.transform.dense.weight"))

	// Subsets.
	base := tinyCfg().Params(false, false)
	assert.Len(t, tinyCfg().Params(true, false), len(base)+2)
	assert.Len(t, tinyCfg().Params(false, true), len(base)+5)
	assert.Equal(t, 5+16*2, len(base))
}

func index(names []string, n string) int {
	for i, x := range names {
		if x == n {
			return i
		}
	}
	return -1
}

func TestSynthetic(t *testing.T) {
	for _, tc := range []struct {
		name         string
		center, half float64
	}{
		{"embeddings.LayerNorm.weight", 1, 0.1},
		{"encoder.layer.3.output.LayerNorm.bias", 0, 0.05},
		{"cls.predictions.transform.LayerNorm.weight", 1, 0.1},
		{"cls.predictions.bias", 0, 0.02},
		{"encoder.layer.0.attention.self.query.bias", 0, 0.02},
		{"pooler.dense.weight", 0, 0.05},
		{"embeddings.word_embeddings.weight", 0, 0.05},
	} {
		c, h := bert.SyntheticRange(tc.name)
		assert.Equal(t, [2]float64{tc.center, tc.half}, [2]float64{c, h}, tc.name)
	}
	// Synthetic is synth's stream of the name, with the name's range.
	src := bert.Synthetic(20261121)
	for _, p := range tinyCfg().Params(true, true) {
		v, err := src.Values(p)
		require.NoError(t, err)
		c, h := bert.SyntheticRange(p.Name)
		require.Equal(t, synth.Uniform(20261121, p.Name, p.Len(), c, h), v, p.Name)
	}
	// The tiny checkpoint is synthetic seed 7 (testdata/reference/bert.py).
	ck, err := bert.OpenCheckpoint(tinyModel)
	require.NoError(t, err)
	seven := bert.Synthetic(7)
	ps := tinyCfg().Params(true, true)
	sort.Slice(ps, func(i, j int) bool { return ps[i].Name < ps[j].Name })
	for _, p := range ps {
		want, err := seven.Values(p)
		require.NoError(t, err)
		got, err := ck.Values(p)
		require.NoError(t, err)
		require.Equal(t, want, got, p.Name)
	}
}
