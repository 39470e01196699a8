package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/zbench/zbench/kernels/cpu"
	"github.com/zbench/zbench/models/llama"
	"github.com/zbench/zbench/models/lora"
)

const alpacaSample = "../../testdata/alpaca/sample.json"

// TestFinetuneRoundTrip fine-tunes the tiny checkpoint on the Alpaca
// sample, loads the adapter it wrote, merges it into the checkpoint and
// checks that the merged model's logits are the base's with the adapter
// (as the trainer's adapter says), then generates from the merged
// directory.
func TestFinetuneRoundTrip(t *testing.T) {
	dir := t.TempDir()
	adapter := filepath.Join(dir, "adapter")
	var stdout, stderr bytes.Buffer
	require.NoError(t, run([]string{"finetune", "--model", llamaTiny, "--data", alpacaSample, "--out", adapter,
		"--steps", "6", "--batch", "2", "--grad-accum", "2", "--seq", "160", "--lr", "5e-3", "--lora-targets", "q_proj,v_proj,down_proj",
		"--warmup", "2", "--lr-scheduler", "cosine", "--save-every", "3"}, &stdout, &stderr), stderr.String())
	for _, s := range []string{"fine-tuning", "loss", "tok/s", "peak memory", "adapter"} {
		assert.Contains(t, stdout.String(), s)
	}
	assert.Contains(t, stderr.String(), "step 6/6", "the last step's progress line")

	// The log: one line per step, the warm-up's first rate 0, then the peak.
	f, err := os.Open(filepath.Join(adapter, "train_log.jsonl"))
	require.NoError(t, err)
	defer f.Close()
	var recs []finetuneLog
	for sc := bufio.NewScanner(f); sc.Scan(); {
		var r finetuneLog
		require.NoError(t, json.Unmarshal(sc.Bytes(), &r))
		recs = append(recs, r)
	}
	require.Len(t, recs, 6)
	assert.Zero(t, recs[0].LR)
	assert.InDelta(t, 5e-3, recs[2].LR, 1e-9)
	for _, r := range recs {
		assert.Positive(t, r.Loss)
		assert.Positive(t, r.Tokens)
		assert.Positive(t, r.TokS)
	}

	cfg, err := llama.LoadConfig(filepath.Join(llamaTiny, "config.json"))
	require.NoError(t, err)
	ad, err := lora.Load(adapter, cfg.NumHiddenLayers, cfg.ModuleDims)
	require.NoError(t, err)
	assert.Equal(t, []string{"q_proj", "v_proj", "down_proj"}, ad.Config.Targets)
	assert.Len(t, ad.Targets, 3*cfg.NumHiddenLayers)

	merged := filepath.Join(dir, "merged")
	stdout.Reset()
	require.NoError(t, run([]string{"merge", "--model", llamaTiny, "--adapter", adapter, "--out", merged}, &stdout, &stderr))
	assert.Contains(t, stdout.String(), "merged 6 weights")
	for _, name := range []string{"config.json", "model.safetensors", "tokenizer.json", "tokenizer.model"} {
		assert.FileExists(t, filepath.Join(merged, name))
	}

	// The merged checkpoint computes what the base with the adapter does.
	be := cpu.New()
	ck, err := llama.OpenCheckpoint(filepath.Join(llamaTiny, "model.safetensors"))
	require.NoError(t, err)
	withAdapter, err := llama.Load(be, cfg, ad.Merged(ck), 1)
	require.NoError(t, err)
	defer withAdapter.Close()
	mck, err := llama.OpenCheckpoint(filepath.Join(merged, "model.safetensors"))
	require.NoError(t, err)
	m, err := llama.Load(be, cfg, mck, 1)
	require.NoError(t, err)
	defer m.Close()
	base, err := llama.Load(be, cfg, ck, 1)
	require.NoError(t, err)
	defer base.Close()
	ids := []int32{1, 7, 90, 33, 400, 12, 5, 250}
	in := llama.Inputs{IDs: ids}
	want, err := withAdapter.Forward(in, 1, len(ids))
	require.NoError(t, err)
	got, err := m.Forward(in, 1, len(ids))
	require.NoError(t, err)
	assert.Equal(t, want, got)
	orig, err := base.Forward(in, 1, len(ids))
	require.NoError(t, err)
	assert.NotEqual(t, orig, got, "the adapter changes the model")

	stdout.Reset()
	require.NoError(t, run([]string{"generate", "--model", merged, "--prompt", "### Instruction:", "--max-new-tokens", "4", "--ignore-eos", "--format", "json"},
		&stdout, &stderr))
	var gen struct {
		IDs []int `json:"ids"`
	}
	require.NoError(t, json.Unmarshal(stdout.Bytes(), &gen))
	assert.Len(t, gen.IDs, 4)

	// --adapter-init starts from the saved adapter: its first loss is the
	// loss of the trained adapter, below the fresh run's first.
	again := filepath.Join(dir, "again")
	stdout.Reset()
	require.NoError(t, run([]string{"finetune", "--model", llamaTiny, "--data", alpacaSample, "--out", again,
		"--steps", "1", "--batch", "2", "--seq", "160", "--lora-targets", "q_proj,v_proj,down_proj", "--lora-dropout", "0",
		"--adapter-init", adapter}, &stdout, &stderr))
	assert.FileExists(t, filepath.Join(again, lora.WeightsFile))
}

func TestFinetuneErrors(t *testing.T) {
	dir := t.TempDir()
	out := filepath.Join(dir, "out")
	jsonl := writeFile(t, dir, "d.jsonl", []byte(`{"input_ids": [1, 2, 3], "labels": [-100, 2, 3]}`+"\n"))
	for _, tc := range []struct {
		name string
		args []string
		want string
		code int
	}{
		{"no model", []string{"--data", alpacaSample, "--out", out}, "missing required flag --model", 2},
		{"no data", []string{"--model", llamaTiny, "--out", out}, "missing required flag --data", 2},
		{"no out", []string{"--model", llamaTiny, "--data", alpacaSample}, "missing required flag --out", 2},
		{"bad steps", []string{"--model", llamaTiny, "--data", alpacaSample, "--out", out, "--steps", "0"}, "--steps 0", 2},
		{"bad targets", []string{"--model", llamaTiny, "--data", alpacaSample, "--out", out, "--lora-targets", "qkv"}, `--lora-targets: `, 2},
		{"bad rank", []string{"--model", llamaTiny, "--data", alpacaSample, "--out", out, "--lora-r", "0"}, "r = 0", 2},
		{"bad schedule", []string{"--model", llamaTiny, "--data", alpacaSample, "--out", out, "--lr-scheduler", "step"}, `"step"`, 2},
		{"no tokenizer for alpaca", []string{"--model", syntheticTinyLlama, "--data", alpacaSample, "--out", out}, "Alpaca data needs a tokenizer", 1},
		{"missing data", []string{"--model", llamaTiny, "--data", filepath.Join(dir, "none.jsonl"), "--out", out}, "none.jsonl", 1},
		{"missing adapter", []string{"--model", llamaTiny, "--data", jsonl, "--out", out, "--seq", "4", "--batch", "1", "--adapter-init", dir}, "--adapter-init", 1},
		{"merge without adapter", []string{"merge", "--model", llamaTiny, "--out", out}, "--model, --adapter and --out are required", 2},
		{"merge synthetic", []string{"merge", "--model", syntheticTinyLlama, "--adapter", dir, "--out", out}, "needs a checkpoint directory", 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			args := tc.args
			if args[0] != "merge" {
				args = append([]string{"finetune"}, args...)
			}
			var stdout, stderr bytes.Buffer
			err := run(args, &stdout, &stderr)
			requireCLIError(t, err, tc.want, tc.code == 2)
		})
	}
}
