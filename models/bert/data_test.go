package bert_test

import (
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/zbench/zbench/kernels"
	"github.com/zbench/zbench/models/bert"
)

// corpus is SyntheticCorpus that must succeed.
func corpus(t *testing.T, seed uint64, vocab, first, n int) bert.Corpus {
	t.Helper()
	c, err := bert.SyntheticCorpus(seed, vocab, first, n)
	require.NoError(t, err)
	return c
}

func TestSyntheticCorpus(t *testing.T) {
	c := corpus(t, 42, 99, 5, 20_000)
	require.Len(t, c.IDs, 20_000)
	assert.Contains(t, c.Name, "42")
	counts := make([]int, 99)
	for i, id := range c.IDs {
		require.True(t, id >= 5 && id < 99, "token %d is %d", i, id)
		counts[id]++
	}
	// Zipf: the first ids are the most frequent, and the tail occurs.
	assert.Greater(t, counts[5], counts[6])
	assert.Greater(t, counts[6], counts[20])
	assert.Greater(t, counts[20], counts[90])
	assert.Positive(t, counts[98])
	assert.Equal(t, c, corpus(t, 42, 99, 5, 20_000), "seeded")
	assert.NotEqual(t, c.IDs, corpus(t, 43, 99, 5, 20_000).IDs)
	// One id past the special tokens.
	for _, id := range corpus(t, 1, 6, 5, 100).IDs {
		require.Equal(t, int32(5), id)
	}
	for _, bad := range [][2]int{{99, 99}, {99, -1}, {5, 7}} {
		_, err := bert.SyntheticCorpus(1, bad[0], bad[1], 10)
		assert.ErrorIs(t, err, bert.ErrInput, "vocab %d, first %d", bad[0], bad[1])
	}
}

func TestReadCorpus(t *testing.T) {
	dir := t.TempDir()
	write := func(name, s string) string {
		p := filepath.Join(dir, name)
		require.NoError(t, os.WriteFile(p, []byte(s), 0o644))
		return p
	}
	ids := write("ids.txt", "101 2054\n 2003\t0 102\n")
	c, err := bert.ReadCorpus(ids, 30522)
	require.NoError(t, err)
	assert.Equal(t, bert.Corpus{Name: ids, IDs: []int32{101, 2054, 2003, 0, 102}}, c)

	text := write("text.txt", "héllo 1 2\n")
	c, err = bert.ReadCorpus(text, 600)
	require.NoError(t, err)
	want := make([]int32, 0, 11)
	for _, b := range []byte("héllo 1 2\n") {
		want = append(want, int32(600-256)+int32(b))
	}
	assert.Equal(t, want, c.IDs, "bytes onto the last 256 ids")

	for _, tc := range []struct {
		name, path string
		vocab      int
		want       string
	}{
		{"missing", filepath.Join(dir, "missing.txt"), 600, "missing.txt"},
		{"empty", write("empty.txt", " \n\t"), 600, "is empty"},
		{"id past the vocabulary", write("big.txt", "1 2 600 3"), 600, "token 2 is id 600"},
		{"negative id", write("neg.txt", "1 -2 3"), 600, "token 1 is id -2"},
		{"not UTF-8", write("bin.txt", "ab\xff\xfe"), 600, "neither token ids nor UTF-8"},
		{"text needs 512 ids", write("small.txt", "hello"), 511, "512"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := bert.ReadCorpus(tc.path, tc.vocab)
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.want)
			assert.Contains(t, err.Error(), tc.path)
			if tc.name != "missing" {
				assert.ErrorIs(t, err, bert.ErrInput)
			}
		})
	}
}

func TestCorpusBatch(t *testing.T) {
	c := corpus(t, 1, 99, 5, 5000)
	m := bert.Masking{Rate: 0.15, MaskID: 3, Vocab: 99}
	const B, S = 64, 16
	b, err := c.Batch(rand.New(rand.NewPCG(1, 2)), m, B, S)
	require.NoError(t, err)
	require.Len(t, b.IDs, B*S)
	require.Len(t, b.Labels, B*S)
	assert.Nil(t, b.TypeIDs)
	again, err := c.Batch(rand.New(rand.NewPCG(1, 2)), m, B, S)
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
	b, err = c.Batch(rand.New(rand.NewPCG(3, 4)), bert.Masking{Rate: 0.01, MaskID: 3, Vocab: 99}, 4, 8)
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
	tr := newTrainer(t, tinyCheckpoint(t), 4, 8, bert.DefaultAdamW())
	_, err = tr.Step(b)
	require.NoError(t, err)

	_, err = bert.Corpus{Name: "short", IDs: []int32{1, 2, 3}}.Batch(rand.New(rand.NewPCG(1, 1)), m, 1, 4)
	assert.ErrorIs(t, err, bert.ErrInput)
	assert.ErrorContains(t, err, "short")
	// A corpus of exactly seq tokens is enough.
	_, err = bert.Corpus{Name: "exact", IDs: []int32{1, 2, 3, 4}}.Batch(rand.New(rand.NewPCG(1, 1)), m, 2, 4)
	assert.NoError(t, err)
}

func TestReadCorpusTextStartingWithNumbers(t *testing.T) {
	p := filepath.Join(t.TempDir(), "beer.txt")
	require.NoError(t, os.WriteFile(p, []byte("99999 bottles of beer on the wall\n-5 degrees\n"), 0o644))
	c, err := bert.ReadCorpus(p, 30522)
	require.NoError(t, err, "text whose first word is a number")
	assert.Equal(t, int32(30522-256+'9'), c.IDs[0], "byte tokens")
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
			_, err := c.Batch(rand.New(rand.NewPCG(1, 1)), tc.m, tc.batch, tc.seq)
			require.ErrorIs(t, err, bert.ErrInput)
			assert.ErrorContains(t, err, tc.want)
		})
	}
}
