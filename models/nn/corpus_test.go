package nn_test

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/zbench/zbench/models/nn"
)

func TestSyntheticCorpus(t *testing.T) {
	ids := func(seed uint64, vocab, first, n int) []int32 {
		t.Helper()
		c, err := nn.SyntheticCorpus(seed, vocab, first, n)
		require.NoError(t, err)
		assert.Contains(t, c.Name, fmt.Sprint(seed))
		return c.IDs
	}
	c := ids(42, 99, 5, 20_000)
	require.Len(t, c, 20_000)
	counts := make([]int, 99)
	for i, id := range c {
		require.True(t, id >= 5 && id < 99, "token %d is %d", i, id)
		counts[id]++
	}
	// Zipf: the first ids are the most frequent, and the tail occurs.
	assert.Greater(t, counts[5], counts[6])
	assert.Greater(t, counts[6], counts[20])
	assert.Greater(t, counts[20], counts[90])
	assert.Positive(t, counts[98])
	assert.Equal(t, c, ids(42, 99, 5, 20_000), "seeded")
	assert.NotEqual(t, c, ids(43, 99, 5, 20_000))
	// One id past the special tokens.
	for _, id := range ids(1, 6, 5, 100) {
		require.Equal(t, int32(5), id)
	}
	for _, bad := range [][2]int{{99, 99}, {99, -1}, {5, 7}} {
		_, err := nn.SyntheticCorpus(1, bad[0], bad[1], 10)
		assert.ErrorIs(t, err, nn.ErrCorpus, "vocab %d, first %d", bad[0], bad[1])
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
	c, err := nn.ReadCorpus(ids, 30522)
	require.NoError(t, err)
	assert.Equal(t, nn.Corpus{Name: ids, IDs: []int32{101, 2054, 2003, 0, 102}}, c)

	text := write("text.txt", "héllo 1 2\n")
	c, err = nn.ReadCorpus(text, 600)
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
			_, err := nn.ReadCorpus(tc.path, tc.vocab)
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.want)
			assert.Contains(t, err.Error(), tc.path)
			if tc.name != "missing" {
				assert.ErrorIs(t, err, nn.ErrCorpus)
			}
		})
	}
}

func TestReadCorpusTextStartingWithNumbers(t *testing.T) {
	p := filepath.Join(t.TempDir(), "beer.txt")
	require.NoError(t, os.WriteFile(p, []byte("99999 bottles of beer on the wall\n-5 degrees\n"), 0o644))
	c, err := nn.ReadCorpus(p, 30522)
	require.NoError(t, err, "text whose first word is a number")
	assert.Equal(t, int32(30522-256+'9'), c.IDs[0], "byte tokens")
}
