//go:build cuda

package cuda

import (
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/zbench/zbench/models/bert"
	"github.com/zbench/zbench/models/llama"
	"github.com/zbench/zbench/models/nn"
)

// TestBERTLaunches counts the kernels of one BERT-base forward pass on
// dry-run GPUs: at batch 1 a pass is a string of small launches whose
// fixed costs add up, so their number is held. A 16-bit layer is 11
// launches on the flash kernels: the stacked query, key and value product,
// attention over it in place (checking the key lengths itself), the output
// projection, the two feed-forward products (each product with its split-K
// reduction at this size) and two LayerNorms; no heads are split or
// merged. The pass adds at most 9: the embeddings (four gathers, two
// additions), their LayerNorm and the pooler's product (and its split-K
// reduction).
func TestBERTLaunches(t *testing.T) {
	cfg := bert.Base()
	for _, c := range []struct {
		cc         [2]int
		flash      string
		p          nn.Precision
		batch, seq int
		perLayer   int
	}{
		{[2]int{9, 0}, "", nn.F16, 1, 128, 11},
		{[2]int{9, 0}, "wgmma", nn.BF16, 1, 128, 11},
		{[2]int{8, 0}, "", nn.F16, 1, 128, 11},
		{[2]int{9, 0}, "", nn.F16, 32, 384, 7}, // products of enough tiles need no split-K
	} {
		t.Run(fmt.Sprintf("cc=%d.%d/flash=%s/dtype=%v/batch=%d/seq=%d", c.cc[0], c.cc[1], c.flash, c.p, c.batch, c.seq), func(t *testing.T) {
			var recs []launchRec
			b := dryRun(c.cc[0], c.cc[1], &recs)
			b.info.Attention = flashKind(c.cc[0], c.cc[1], c.flash)
			m, err := bert.Load(b, cfg, bert.Synthetic(1), c.p)
			require.NoError(t, err)
			f, err := m.NewForward(c.batch, c.seq)
			require.NoError(t, err)
			recs = recs[:0]
			require.NoError(t, f.Run())
			byName := launchCounts(t, recs)
			for name := range byName {
				for _, moved := range []string{"swap_axes", "split_heads", "check_range"} {
					assert.False(t, strings.HasPrefix(name, moved), "%s: heads moved or lengths checked around the fused attention", name)
				}
			}
			assert.LessOrEqual(t, len(recs), c.perLayer*cfg.NumHiddenLayers+9, "launches of a forward pass")
		})
	}
}

// TestBERTTrainLaunches counts the kernels of one training step of the
// 6-layer BERT of BenchmarkBERTTrain (batch 32, seq 128) on a dry-run H100:
// the optimiser's update of every parameter, with the float32 masters'
// 16-bit copies in bf16, is one launch (Ops.AdamWAll) where it was one
// AdamW per parameter (106) and, in bf16, two casts per parameter.
func TestBERTTrainLaunches(t *testing.T) {
	cfg := bert.Train6()
	for _, p := range []nn.Precision{nn.F32, nn.BF16} {
		t.Run(p.String(), func(t *testing.T) {
			var recs []launchRec
			b := dryRun(9, 0, &recs)
			tr, err := bert.NewTrainer(b, cfg, bert.Synthetic(1), bert.TrainOptions{Batch: 32, Seq: 128, Opt: bert.DefaultAdamW(), Precision: p})
			require.NoError(t, err)
			ids, labels := make([]int32, 32*128), make([]int32, 32*128)
			for i := range ids {
				ids[i], labels[i] = int32(1000+i%500), -100
				if i%7 == 0 {
					labels[i] = int32(2000 + i%300)
				}
			}
			recs = recs[:0]
			_, err = tr.Step(bert.Batch{IDs: ids, Labels: labels})
			require.NoError(t, err)
			byName := launchCounts(t, recs)
			assert.Equal(t, 1, byName["adamw_all"], "one launch updates every parameter")
			assert.Zero(t, byName["adamw_f32"], "no update of a parameter on its own")
			assert.LessOrEqual(t, byName["cast"], 4, "casts of parameters (the masked-LM head's four are the step's own)")
		})
	}
}

// TestLlamaDecodeLaunches counts the kernels of one bf16 decode step of
// TinyLlama's layers at batch 1 on a dry-run H100, which a graph replays: a
// layer is 13 launches (two RMSNorms; the query, key and value products in
// one, the gate and up ones in one, the output and down ones; RoPE of the
// query and of the key; the key's and the value's cache writes; the two
// passes of the cached attention; SwiGLU), and the kernels check the start
// positions and lengths they read themselves, with no check_range before
// them.
func TestLlamaDecodeLaunches(t *testing.T) {
	var recs []launchRec
	b := dryRun(9, 0, &recs)
	cfg := llama.TinyLlama()
	cfg.NumHiddenLayers = 2 // the count is per layer; TinyLlama's 22 only take longer to make
	m, err := llama.Load(b, cfg, llama.Synthetic(1), nn.BF16)
	require.NoError(t, err)
	s, err := m.NewSession(1, 600)
	require.NoError(t, err)
	prompt := make([]int, 512)
	for i := range prompt {
		prompt[i] = 100 + i
	}
	require.NoError(t, s.Prefill([][]int{prompt}))
	recs = recs[:0]
	require.NoError(t, s.Decode([]int{5}))
	byName := launchCounts(t, recs)
	assert.Zero(t, byName["check_range"], "lengths and starts checked apart")
	assert.LessOrEqual(t, len(recs), 13*cfg.NumHiddenLayers+4, "launches of a decode step: the layers', the embedding's, the last RMSNorm and the logits'")
}

// launchCounts returns the launches of recs by kernel, and logs them with
// their total (the lines baselines/cuda-dry-run keeps).
func launchCounts(t *testing.T, recs []launchRec) map[string]int {
	t.Helper()
	byName := map[string]int{}
	for _, r := range recs {
		byName[r.name]++
	}
	t.Logf("%d launches: %v", len(recs), byName)
	return byName
}
