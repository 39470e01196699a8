package llama

import (
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/zbench/zbench/kernels"
	"github.com/zbench/zbench/kernels/cpu"
	"github.com/zbench/zbench/models/nn"
)

// testConfig is a small config with grouped KV heads and llama3 rope
// scaling, so that every path of the model is exercised.
func testConfig() Config {
	return Config{
		VocabSize: 97, HiddenSize: 48, IntermediateSize: 80, NumHiddenLayers: 2,
		NumAttentionHeads: 6, NumKeyValueHeads: 2, HeadDim: 8, RMSNormEps: 1e-5, RopeTheta: 10000,
		RopeScaling:           &RopeScaling{Type: "llama3", Factor: 4, LowFreqFactor: 1, HighFreqFactor: 4, OriginalMaxPositionEmbeddings: 16},
		MaxPositionEmbeddings: 64, BOSTokenID: 1, EOSTokenIDs: []int{2},
	}
}

func loadTest(t *testing.T, cfg Config, p nn.Precision) *Model {
	t.Helper()
	m, err := Load(cpu.New(), cfg, Synthetic(5), p)
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, m.Close()) })
	return m
}

func randomIDs(seed uint64, n, vocab int) []int {
	r := rand.New(rand.NewPCG(seed, 1))
	ids := make([]int, n)
	for i := range ids {
		ids[i] = r.IntN(vocab)
	}
	return ids
}

func rel(t *testing.T, got, want []float32) float64 {
	t.Helper()
	require.Len(t, got, len(want))
	g, w := make([]float64, len(got)), make([]float64, len(want))
	for i := range got {
		g[i], w[i] = float64(got[i]), float64(want[i])
	}
	r, _ := kernels.RelErr(g, w)
	return r
}

// TestDecodeMatchesForward checks that prefill and N decode steps with
// the KV cache give, at every step, the logits the full forward gives at
// that position, for sequences of different lengths in one batch.
func TestDecodeMatchesForward(t *testing.T) {
	cfg := testConfig()
	m := loadTest(t, cfg, nn.F32)
	V := cfg.VocabSize
	seqs := [][]int{randomIDs(1, 20, V), randomIDs(2, 13, V)}
	prompts := [][]int{seqs[0][:5], seqs[1][:2]}

	// The full forward of each sequence alone.
	full := make([][]float32, len(seqs))
	for b, s := range seqs {
		ids := make([]int32, len(s))
		for i, id := range s {
			ids[i] = int32(id)
		}
		var err error
		full[b], err = m.Forward(Inputs{IDs: ids}, 1, len(s))
		require.NoError(t, err)
	}

	sess, err := m.NewSession(2, 24)
	require.NoError(t, err)
	defer sess.Close()
	require.NoError(t, sess.Prefill(prompts))
	for step := 0; ; step++ {
		logits, err := sess.Logits()
		require.NoError(t, err)
		lens := sess.Lens()
		for b := range seqs {
			pos := lens[b] - 1
			assert.Less(t, rel(t, logits[b*V:(b+1)*V], full[b][pos*V:(pos+1)*V]), 1e-5, "sequence %d position %d", b, pos)
		}
		if lens[1] == len(seqs[1]) {
			break
		}
		require.NoError(t, sess.Decode([]int{seqs[0][lens[0]], seqs[1][lens[1]]}))
	}
	assert.Equal(t, []int{16, 13}, sess.Lens())

	// Rewind, then decode again: the same logits as the first time.
	require.NoError(t, sess.Rewind(10))
	require.NoError(t, sess.Decode([]int{seqs[0][10], seqs[1][10]}))
	logits, err := sess.Logits()
	require.NoError(t, err)
	assert.Less(t, rel(t, logits[:V], full[0][10*V:11*V]), 1e-5)
	greedy, err := sess.Greedy()
	require.NoError(t, err)
	assert.Equal(t, kernels.IndexOfMax(logits[:V]), greedy[0])
	assert.Equal(t, kernels.IndexOfMax(logits[V:]), greedy[1])
}

// TestPackSameLogits checks that a model's logits over a prompt long
// enough for the prefill GEMM are the same bits before and after Pack, in
// float32, float16 and bfloat16.
func TestPackSameLogits(t *testing.T) {
	cfg := testConfig()
	for _, p := range []nn.Precision{nn.F32, nn.F16, nn.BF16} {
		m := loadTest(t, cfg, p)
		ids := make([]int32, 40)
		for i, id := range randomIDs(3, len(ids), cfg.VocabSize) {
			ids[i] = int32(id)
		}
		want, err := m.Forward(Inputs{IDs: ids}, 1, len(ids))
		require.NoError(t, err)
		require.NoError(t, m.Pack())
		got, err := m.Forward(Inputs{IDs: ids}, 1, len(ids))
		require.NoError(t, err)
		require.Equal(t, want, got, "%v", p)
	}
}

// TestPadding checks that left and right padding give every real token
// the logits it has unpadded, and padded positions zeros.
func TestPadding(t *testing.T) {
	cfg := testConfig()
	m := loadTest(t, cfg, nn.F32)
	V := cfg.VocabSize
	short := randomIDs(3, 4, V)
	alone, err := m.Forward(Inputs{IDs: toI32(short)}, 1, 4)
	require.NoError(t, err)
	long := toI32(randomIDs(4, 7, V))
	for _, side := range []string{"right", "left"} {
		t.Run(side, func(t *testing.T) {
			ids := append([]int32(nil), long...)
			mask := []int32{1, 1, 1, 1, 1, 1, 1}
			row := make([]int32, 7)
			rmask := make([]int32, 7)
			off := 0
			if side == "left" {
				off = 3
			}
			copy(row[off:], toI32(short))
			for i := range 4 {
				rmask[off+i] = 1
			}
			row[(off+5)%7] = 96 // a padding id the model must not see
			ids = append(ids, row...)
			mask = append(mask, rmask...)
			got, err := m.Forward(Inputs{IDs: ids, Mask: mask}, 2, 7)
			require.NoError(t, err)
			assert.Less(t, rel(t, got[(7+off)*V:(7+off+4)*V], alone), 1e-5)
			for i := range 7 {
				if rmask[i] == 0 {
					assert.Equal(t, make([]float32, V), got[(7+i)*V:(8+i)*V], "padded position %d", i)
				}
			}
		})
	}
}

func toI32(v []int) []int32 {
	out := make([]int32, len(v))
	for i, x := range v {
		out[i] = int32(x)
	}
	return out
}

func TestForwardErrors(t *testing.T) {
	m := loadTest(t, testConfig(), nn.F32)
	tests := []struct {
		name string
		in   Inputs
		err  string
	}{
		{"short ids", Inputs{IDs: []int32{1, 2}}, "2 input ids for [1, 3]"},
		{"id out of range", Inputs{IDs: []int32{1, 97, 3}}, "token id 97 at position 1 of sequence 0 is outside the vocabulary [0, 97)"},
		{"negative id", Inputs{IDs: []int32{-1, 2, 3}}, "token id -1"},
		{"mask values", Inputs{IDs: []int32{1, 2, 3}, Mask: []int32{1, 2, 1}}, "attention_mask[0, 1] = 2"},
		{"mask hole", Inputs{IDs: []int32{1, 2, 3}, Mask: []int32{1, 0, 1}}, "padding at 1 between tokens"},
		{"empty row", Inputs{IDs: []int32{1, 2, 3}, Mask: []int32{0, 0, 0}}, "row 0 has no token"},
		{"mask size", Inputs{IDs: []int32{1, 2, 3}, Mask: []int32{1}}, "attention_mask has 1 values"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := m.Forward(tc.in, 1, 3)
			require.ErrorIs(t, err, ErrInput)
			assert.Contains(t, err.Error(), tc.err)
		})
	}
}

func TestSessionErrors(t *testing.T) {
	m := loadTest(t, testConfig(), nn.F32)
	_, err := m.NewSession(1, 65)
	assert.ErrorContains(t, err, "exceeds max_position_embeddings 64")
	s, err := m.NewSession(2, 4)
	require.NoError(t, err)
	defer s.Close()
	assert.ErrorContains(t, s.Prefill([][]int{{1}}), "1 prompts for a session of 2 sequences")
	assert.ErrorContains(t, s.Prefill([][]int{{1}, {}}), "prompt 1 is empty")
	assert.ErrorContains(t, s.Prefill([][]int{{1, 2, 3, 4, 5}, {1}}), "prompt of 5 tokens exceeds the session's 4")
	require.NoError(t, s.Prefill([][]int{{1, 2, 3, 4}, {1}}))
	assert.ErrorContains(t, s.Decode([]int{1, 2}), "sequence 0 is full (4 tokens)")
	assert.ErrorContains(t, s.Rewind(2), "rewind sequence 1 of 1 tokens to 2")
	_, err = s.Generate([][]int{{1}, {1}}, GenerateOptions{MaxNewTokens: 5}, nil)
	assert.ErrorContains(t, err, "1 tokens and 5 new tokens exceed the session's 4")
}

// TestGenerate checks greedy generation against decoding by hand, EOS
// stopping, and that 16-bit precisions run the same path.
func TestGenerate(t *testing.T) {
	cfg := testConfig()
	m := loadTest(t, cfg, nn.F32)
	s, err := m.NewSession(1, 32)
	require.NoError(t, err)
	defer s.Close()
	prompt := randomIDs(9, 6, cfg.VocabSize)
	var emitted []int
	g, err := s.Generate([][]int{prompt}, GenerateOptions{MaxNewTokens: 8}, func(seq, id int) error {
		assert.Zero(t, seq)
		emitted = append(emitted, id)
		return nil
	})
	require.NoError(t, err)
	require.Len(t, g.Tokens[0], 8)
	assert.Equal(t, g.Tokens[0], emitted)
	assert.Len(t, g.Steps, 7)
	assert.Positive(t, g.FirstToken)

	// By hand: the argmax of the full forward, token after token.
	seq := append([]int(nil), prompt...)
	for range 8 {
		logits, err := m.Forward(Inputs{IDs: toI32(seq)}, 1, len(seq))
		require.NoError(t, err)
		V := cfg.VocabSize
		seq = append(seq, kernels.IndexOfMax(logits[(len(seq)-1)*V:]))
	}
	assert.Equal(t, seq[len(prompt):], g.Tokens[0])

	// Stop at EOS: make the first generated token the EOS id.
	cfg2 := cfg
	cfg2.EOSTokenIDs = []int{g.Tokens[0][0]}
	m2 := loadTest(t, cfg2, nn.F32)
	s2, err := m2.NewSession(1, 32)
	require.NoError(t, err)
	defer s2.Close()
	g2, err := s2.Generate([][]int{prompt}, GenerateOptions{MaxNewTokens: 8, StopAtEOS: true}, nil)
	require.NoError(t, err)
	assert.Equal(t, g.Tokens[0][:1], g2.Tokens[0])

	for _, p := range []nn.Precision{nn.F16, nn.BF16} {
		mp := loadTest(t, cfg, p)
		sp, err := mp.NewSession(1, 32)
		require.NoError(t, err)
		gp, err := sp.Generate([][]int{prompt}, GenerateOptions{MaxNewTokens: 4}, nil)
		require.NoError(t, err)
		assert.Len(t, gp.Tokens[0], 4, "%v", p)
		require.NoError(t, sp.Close())
	}
}

func TestLoadErrors(t *testing.T) {
	_, err := Load(cpu.New(), testConfig(), Synthetic(1), nn.Mixed)
	assert.ErrorContains(t, err, "precision mixed: want f32, f16 or bf16")
	bad := testConfig()
	bad.HeadDim = 7
	_, err = Load(cpu.New(), bad, Synthetic(1), nn.F32)
	assert.ErrorIs(t, err, ErrConfig)
}
