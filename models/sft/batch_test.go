package sft_test

import (
	"math/rand/v2"
	"path/filepath"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/zbench/zbench/models/sft"
	"github.com/zbench/zbench/models/tokenizer"
)

func TestPad(t *testing.T) {
	tests := []struct {
		name       string
		examples   []sft.Example
		batch, seq int
		ids        []int32
		labels     []int32
		tokens     int
	}{
		{"pad", []sft.Example{ex(1, 1, 5, 2)}, 1, 5,
			[]int32{1, 5, 2, 0, 0}, []int32{-100, 5, 2, -100, -100}, 2},
		{"exact", []sft.Example{ex(0, 1, 5, 2)}, 1, 3,
			[]int32{1, 5, 2}, []int32{1, 5, 2}, 3},
		{"truncate", []sft.Example{ex(1, 1, 5, 6, 7, 2)}, 1, 3,
			[]int32{1, 5, 6}, []int32{-100, 5, 6}, 2},
		{"truncated to nothing learned", []sft.Example{ex(3, 1, 5, 6, 7, 2)}, 1, 3,
			[]int32{1, 5, 6}, []int32{-100, -100, -100}, 0},
		{"rows", []sft.Example{ex(2, 1, 5, 6, 7, 2), ex(1, 1, 9, 2)}, 2, 4,
			[]int32{1, 5, 6, 7, 1, 9, 2, 0}, []int32{-100, -100, 6, 7, -100, 9, 2, -100}, 4},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b, err := sft.Pad(tt.examples, tt.batch, tt.seq, 0)
			require.NoError(t, err)
			assert.Equal(t, sft.Batch{IDs: tt.ids, Labels: tt.labels, Batch: tt.batch, Seq: tt.seq, Tokens: tt.tokens}, b)
		})
	}
	b, err := sft.Pad([]sft.Example{ex(0, 4)}, 1, 3, 7)
	require.NoError(t, err)
	assert.Equal(t, []int32{4, 7, 7}, b.IDs, "the pad id")
}

func TestPadErrors(t *testing.T) {
	tests := []struct {
		name       string
		examples   []sft.Example
		batch, seq int
		want       string
	}{
		{"missing rows", []sft.Example{ex(0, 1)}, 2, 4, "sft: 1 examples for a batch of 2 rows"},
		{"too many rows", []sft.Example{ex(0, 1), ex(0, 2)}, 1, 4, "sft: 2 examples for a batch of 1 rows"},
		{"no rows", nil, 1, 4, "sft: 0 examples for a batch of 1 rows"},
		{"batch 0", nil, 0, 4, "sft: batch 0, seq 4: both must be positive"},
		{"seq 0", []sft.Example{ex(0, 1)}, 1, 0, "sft: batch 1, seq 0: both must be positive"},
		{"lengths", []sft.Example{ex(0, 1), {IDs: []int32{1, 2}, Labels: []int32{2}}}, 2, 4, "sft: example 1: 2 ids and 1 labels: bad fine-tuning data"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := sft.Pad(tt.examples, tt.batch, tt.seq, 0)
			require.Error(t, err)
			assert.Equal(t, tt.want, err.Error())
		})
	}
}

func TestPack(t *testing.T) {
	a := ex(2, 1, 10, 11, 2)     // 4 tokens, 2 learned
	b := ex(1, 1, 20, 2)         // 3 tokens
	c := ex(3, 1, 30, 31, 32, 2) // 5 tokens
	tests := []struct {
		name     string
		examples []sft.Example
		seq      int
		want     []sft.Example
	}{
		{"spanning rows, partial row dropped", []sft.Example{a, b, c}, 5, []sft.Example{
			{IDs: []int32{1, 10, 11, 2, 1}, Labels: []int32{-100, -100, 11, 2, -100}},
			{IDs: []int32{20, 2, 1, 30, 31}, Labels: []int32{20, 2, -100, -100, -100}},
		}},
		{"exact", []sft.Example{a, b, c}, 12, []sft.Example{
			{IDs: []int32{1, 10, 11, 2, 1, 20, 2, 1, 30, 31, 32, 2}, Labels: []int32{-100, -100, 11, 2, -100, 20, 2, -100, -100, -100, 32, 2}},
		}},
		{"one example over rows", []sft.Example{c}, 2, []sft.Example{
			{IDs: []int32{1, 30}, Labels: []int32{-100, -100}},
			{IDs: []int32{31, 32}, Labels: []int32{-100, 32}},
		}},
		{"too few tokens", []sft.Example{a, b}, 8, nil},
		{"no examples", nil, 4, nil},
		{"seq 0", []sft.Example{a}, 0, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := sft.Pack(tt.examples, tt.seq)
			assert.Equal(t, tt.want, got)
			for _, r := range got {
				assert.Len(t, r.IDs, tt.seq)
				assert.Len(t, r.Labels, tt.seq)
			}
		})
	}
	// Rows do not share memory with the examples, or capacity with each
	// other.
	rows := sft.Pack([]sft.Example{a, b, c}, 5)
	rows[0].IDs = append(rows[0].IDs, 99)
	rows[0].Labels[0] = 77
	assert.Equal(t, int32(20), rows[1].IDs[0])
	assert.Equal(t, int32(-100), a.Labels[0])
	assert.Panics(t, func() { sft.Pack([]sft.Example{{IDs: []int32{1}}}, 1) })
}

// data returns n examples of distinct ids: example i is BOS, a prompt of
// i%3 tokens, a response of 1+i%4 tokens and EOS.
func data(n int) []sft.Example {
	out := make([]sft.Example, n)
	for i := range out {
		p, r := i%3, 1+i%4
		ids := append([]int32{1}, seq(int32(100*(i+1)), int32(p+r))...)
		out[i] = ex(1+p, append(ids, 2)...)
	}
	return out
}

// batches returns the next n batches of l.
func batches(l *sft.Loader, n int) []sft.Batch {
	out := make([]sft.Batch, n)
	for i := range out {
		out[i] = l.Next()
	}
	return out
}

// rows cuts a batch into its rows' ids.
func rows(b sft.Batch) [][]int32 {
	var out [][]int32
	for r := range b.Batch {
		out = append(out, b.IDs[r*b.Seq:(r+1)*b.Seq])
	}
	return out
}

// checkBatch checks a batch's shape, padding and token count.
func checkBatch(t *testing.T, b sft.Batch, batch, seq int, pad int32) {
	t.Helper()
	require.Equal(t, batch, b.Batch)
	require.Equal(t, seq, b.Seq)
	require.Len(t, b.IDs, batch*seq)
	require.Len(t, b.Labels, batch*seq)
	tokens := 0
	for i, l := range b.Labels {
		if l != sft.IgnoreIndex {
			tokens++
			assert.Equal(t, b.IDs[i], l, "a learned label is its id")
		}
	}
	assert.Equal(t, tokens, b.Tokens)
}

func TestLoader(t *testing.T) {
	examples := data(7)
	for _, pack := range []bool{false, true} {
		t.Run(map[bool]string{false: "pad", true: "pack"}[pack], func(t *testing.T) {
			const batch, seq = 3, 8
			l, err := sft.NewLoader(examples, batch, seq, 0, pack, 42)
			require.NoError(t, err)
			assert.Equal(t, 0, l.Dropped())
			perEpoch := l.RowsPerEpoch()
			if pack {
				total := 0
				for _, e := range examples {
					total += len(e.IDs)
				}
				assert.Equal(t, total/seq, perEpoch)
			} else {
				assert.Equal(t, len(examples), perEpoch)
			}

			// Determinism: the same seed gives the same batches; another
			// seed, another order.
			got := batches(l, 10)
			again, err := sft.NewLoader(examples, batch, seq, 0, pack, 42)
			require.NoError(t, err)
			assert.Equal(t, got, batches(again, 10))
			other, err := sft.NewLoader(examples, batch, seq, 0, pack, 43)
			require.NoError(t, err)
			assert.NotEqual(t, got, batches(other, 10))

			// Epochs wrap: 30 rows are 30/perEpoch epochs.
			assert.Equal(t, 10*batch/perEpoch, l.Epoch())
			var all [][]int32
			for _, b := range got {
				checkBatch(t, b, batch, seq, 0)
				all = append(all, rows(b)...)
			}
			// Every epoch is a permutation of the same rows (without
			// packing: the padded examples), and consecutive epochs differ.
			var epochs [][][]int32
			for e := 0; (e+1)*perEpoch <= len(all); e++ {
				epochs = append(epochs, all[e*perEpoch:(e+1)*perEpoch])
			}
			require.GreaterOrEqual(t, len(epochs), 2)
			if !pack {
				want := rows(must(sft.Pad(examples, len(examples), seq, 0)))
				for _, ep := range epochs {
					assert.ElementsMatch(t, want, ep)
				}
			} else {
				// A packed epoch holds the examples' tokens in one order:
				// all of them but the dropped tail.
				for _, ep := range epochs {
					tokens := slices.Concat(ep...)
					assert.Equal(t, perEpoch*seq, len(tokens))
				}
			}
			assert.NotEqual(t, epochs[0], epochs[1])
		})
	}
}

// TestLoaderPermutation pins the order to math/rand/v2's PCG seeded with
// (seed, 0), one Perm per epoch.
func TestLoaderPermutation(t *testing.T) {
	examples := data(5)
	l, err := sft.NewLoader(examples, 1, 16, 0, false, 7)
	require.NoError(t, err)
	rng := newPCG(7)
	for epoch := range 3 {
		for _, p := range rng.Perm(len(examples)) {
			b := l.Next()
			assert.Equal(t, examples[p].IDs, b.IDs[:len(examples[p].IDs)], "epoch %d", epoch)
		}
		assert.Equal(t, epoch+1, l.Epoch())
	}
}

func TestLoaderPacksShuffledEpoch(t *testing.T) {
	examples := data(6)
	const seq = 5
	l, err := sft.NewLoader(examples, 2, seq, 0, true, 9)
	require.NoError(t, err)
	rng := newPCG(9)
	for range 2 {
		var order []sft.Example
		for _, p := range rng.Perm(len(examples)) {
			order = append(order, examples[p])
		}
		want := sft.Pack(order, seq)
		var got []sft.Example
		for len(got) < len(want) {
			b := l.Next()
			for r := range b.Batch {
				got = append(got, sft.Example{IDs: b.IDs[r*seq : (r+1)*seq], Labels: b.Labels[r*seq : (r+1)*seq]})
			}
		}
		require.Equal(t, len(want), len(got), "the test's rows fill whole batches")
		for i := range want {
			assert.Equal(t, want[i].IDs, got[i].IDs)
			assert.Equal(t, want[i].Labels, got[i].Labels)
		}
	}
}

func TestLoaderDropped(t *testing.T) {
	examples := []sft.Example{
		ex(2, 1, 5, 6, 2),    // learned from position 2: kept at seq 3
		ex(3, 1, 5, 6, 7, 2), // nothing left at seq 3
		ex(4, 1, 5, 6, 7, 2), // nothing left at seq 3
		ex(0, 1, 2),          // all learned
		{IDs: []int32{1, 2}, Labels: []int32{-100, -100}}, // nothing to learn at all
	}
	l, err := sft.NewLoader(examples, 2, 3, 0, false, 1)
	require.NoError(t, err)
	assert.Equal(t, 3, l.Dropped())
	assert.Equal(t, 2, l.RowsPerEpoch())
	b := l.Next()
	checkBatch(t, b, 2, 3, 0)
	assert.ElementsMatch(t, [][]int32{{1, 5, 6}, {1, 2, 0}}, rows(b))
	assert.Equal(t, 1, l.Epoch())

	// Packing keeps long examples whole: only the one with no label at
	// all is dropped.
	l, err = sft.NewLoader(examples, 2, 3, 0, true, 1)
	require.NoError(t, err)
	assert.Equal(t, 1, l.Dropped())
	assert.Equal(t, 15/3, l.RowsPerEpoch())
	checkBatch(t, l.Next(), 2, 3, 0)
}

func TestLoaderPad(t *testing.T) {
	l, err := sft.NewLoader([]sft.Example{ex(1, 1, 5, 2)}, 2, 6, 0, false, 3)
	require.NoError(t, err)
	b := l.Next()
	// One example, two rows: the batch spans two epochs.
	assert.Equal(t, []int32{1, 5, 2, 0, 0, 0, 1, 5, 2, 0, 0, 0}, b.IDs)
	assert.Equal(t, 4, b.Tokens)
	assert.Equal(t, 2, l.Epoch())
	// Batches are the caller's.
	b.IDs[0] = 99
	assert.Equal(t, int32(1), l.Next().IDs[0])
}

func TestLoaderErrors(t *testing.T) {
	good := data(3)
	tests := []struct {
		name       string
		examples   []sft.Example
		batch, seq int
		pad        int32
		pack       bool
		want       string
		data       bool
	}{
		{"empty", nil, 1, 4, 0, false, "sft: no examples: bad fine-tuning data", true},
		{"batch", good, 0, 4, 0, false, "sft: batch 0, seq 4: both must be positive", false},
		{"seq", good, 1, -1, 0, true, "sft: batch 1, seq -1: both must be positive", false},
		{"pad", good, 1, 4, -1, false, "sft: pad id -1 is negative", false},
		{"lengths", []sft.Example{good[0], {IDs: []int32{1}}}, 1, 4, 0, false, "sft: example 1: 1 ids and 0 labels: bad fine-tuning data", true},
		{"negative id", []sft.Example{{IDs: []int32{1, -3}, Labels: []int32{1, 2}}}, 1, 4, 0, false, "sft: example 0: id -3 at 1 is negative: bad fine-tuning data", true},
		{"bad label", []sft.Example{{IDs: []int32{1, 3}, Labels: []int32{-1, 3}}}, 1, 4, 0, false, "sft: example 0: label -1 at 0 is neither -100 nor an id: bad fine-tuning data", true},
		{"all dropped", []sft.Example{ex(3, 1, 2, 3, 4)}, 1, 3, 0, false, "sft: none of the 1 examples has a label to learn in its first 3 tokens: bad fine-tuning data", true},
		{"nothing to learn", []sft.Example{ex(4, 1, 2, 3, 4)}, 1, 3, 0, true, "sft: none of the 1 examples has a label to learn: bad fine-tuning data", true},
		{"too short to pack", []sft.Example{ex(1, 1, 2, 3, 4)}, 1, 5, 0, true, "sft: 4 tokens in all, too few to pack a row of 5: bad fine-tuning data", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l, err := sft.NewLoader(tt.examples, tt.batch, tt.seq, tt.pad, tt.pack, 0)
			require.Error(t, err)
			assert.Nil(t, l)
			assert.Equal(t, tt.want, err.Error())
			if tt.data {
				assert.ErrorIs(t, err, sft.ErrData)
			} else {
				assert.NotErrorIs(t, err, sft.ErrData)
			}
		})
	}
}

// TestLoaderSample runs the sample through the loader as a fine-tuning run
// would: the real tokenizer, Llama's pad id (0, <unk>), short rows.
func TestLoaderSample(t *testing.T) {
	tok := loadTiny(t)
	examples, err := sft.Read(samplePath, tok)
	require.NoError(t, err)
	for _, pack := range []bool{false, true} {
		for _, seq := range []int{64, 160, 512} {
			// Without packing, an example whose prompt fills the row
			// has nothing left to learn.
			dropped := 0
			for _, e := range examples {
				if !pack && e.Labels[min(seq, len(e.Labels))-1] == sft.IgnoreIndex {
					dropped++
				}
			}
			l, err := sft.NewLoader(examples, 4, seq, 0, pack, 1)
			if dropped == len(examples) {
				// The sample's prompts are all over 100 tokens.
				require.ErrorIs(t, err, sft.ErrData)
				continue
			}
			require.NoError(t, err)
			assert.Equal(t, dropped, l.Dropped(), "seq %d", seq)
			for range 20 {
				checkBatch(t, l.Next(), 4, seq, 0)
			}
			assert.Greater(t, l.Epoch(), 0)
		}
	}
}

func loadTiny(t *testing.T) *tokenizer.Tokenizer {
	t.Helper()
	tok, err := tokenizer.Load(filepath.Join(tinyDir, "tokenizer.model"))
	require.NoError(t, err)
	return tok
}

func newPCG(seed uint64) *rand.Rand { return rand.New(rand.NewPCG(seed, 0)) }

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}
