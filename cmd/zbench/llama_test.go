package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/zbench/zbench/kernels"
	"github.com/zbench/zbench/models/safetensors"
)

// Files written by testdata/reference/llama.py.
const (
	llamaTiny       = "../../testdata/golden/llama-tiny"
	llamaTinyBF16   = "../../testdata/golden/llama-tiny-bf16"
	llamaGolden     = "../../testdata/golden/llama.safetensors"
	llamaGenGolden  = "../../testdata/golden/llama-generate.safetensors"
	llamaTinyVocab  = 512
	llamaGoldenCase = "tiny_left"
)

// llamaCaseInput writes the golden case's input_ids and attention_mask as
// an input file and returns its path with the expected logits.
func llamaCaseInput(t *testing.T, name string) (path string, logits safetensors.Tensor, mask []int32) {
	t.Helper()
	f, err := safetensors.Open(llamaGolden)
	require.NoError(t, err)
	var ts []safetensors.Tensor
	for _, role := range []string{"input_ids", "attention_mask"} {
		x, err := f.Tensor(name + "/" + role)
		require.NoError(t, err)
		x.Name = role
		ts = append(ts, x)
	}
	mask, err = ts[1].Int32()
	require.NoError(t, err)
	logits, err = f.Tensor(name + "/logits")
	require.NoError(t, err)
	var buf bytes.Buffer
	require.NoError(t, safetensors.Write(&buf, ts, nil))
	return writeFile(t, t.TempDir(), "in.safetensors", buf.Bytes()), logits, mask
}

// TestInferLlamaGolden runs the tiny checkpoint, unsharded F32 and
// sharded BF16, on a left-padded batch and compares the logits of the
// real tokens with the reference's.
func TestInferLlamaGolden(t *testing.T) {
	in, want, mask := llamaCaseInput(t, llamaGoldenCase)
	for _, tc := range []struct {
		name, weights, dtype string
		tol                  float64
	}{
		{"f32", llamaTiny, "f32", 1e-4},
		{"sharded bf16 checkpoint in f32", llamaTinyBF16, "f32", 1e-2},
		{"bf16 (auto)", llamaTinyBF16, "auto", kernels.Tolerance(kernels.BF16)},
		{"f16", llamaTiny, "f16", 1e-2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out := filepath.Join(t.TempDir(), "out.safetensors")
			var stdout, stderr bytes.Buffer
			require.NoError(t, run([]string{"infer", "--model", "llama", "--weights", tc.weights, "--input", in,
				"--output", out, "--dtype", tc.dtype}, &stdout, &stderr))
			assert.Contains(t, stdout.String(), "llama")
			_, got := tensors(t, out)
			require.Len(t, got, 1)
			require.Equal(t, "logits", got[0].Name)
			require.Equal(t, want.Shape, got[0].Shape)
			g, w := float64s(t, got[0]), float64s(t, want)
			V := want.Shape[2]
			var gs, ws []float64
			for i, m := range mask {
				if m == 1 {
					gs, ws = append(gs, g[i*V:(i+1)*V]...), append(ws, w[i*V:(i+1)*V]...)
				} else {
					assert.Equal(t, make([]float64, V), g[i*V:(i+1)*V], "padded position %d is zero", i)
				}
			}
			rel, _ := kernels.RelErr(gs, ws)
			t.Logf("rel-err %.3g", rel)
			assert.LessOrEqual(t, rel, tc.tol)
		})
	}
}

func TestInferLlamaErrors(t *testing.T) {
	in, _, _ := llamaCaseInput(t, llamaGoldenCase)
	holes := writeSafetensors(t, []safetensors.Tensor{
		i32Tensor("input_ids", []int32{1, 2, 3}, 1, 3), i32Tensor("attention_mask", []int32{1, 0, 1}, 1, 3)})
	outOfVocab := writeSafetensors(t, []safetensors.Tensor{i64Tensor("input_ids", []int64{1, 512}, 1, 2)})
	extra := writeSafetensors(t, []safetensors.Tensor{
		i32Tensor("input_ids", []int32{1}, 1, 1), i32Tensor("token_type_ids", []int32{0}, 1, 1)})
	for _, tc := range []struct {
		name  string
		input string
		want  string
	}{
		{"padding between tokens", holes, "only left or right padding is supported"},
		{"id outside the vocabulary", outOfVocab, "token id 512 at position 1 of sequence 0 is outside the vocabulary [0, 512)"},
		{"unexpected tensor", extra, `unexpected tensor "token_type_ids" (want input_ids, attention_mask)`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := run([]string{"infer", "--model", "llama", "--weights", llamaTiny, "--input", tc.input,
				"--output", filepath.Join(t.TempDir(), "o.safetensors")}, &bytes.Buffer{}, &bytes.Buffer{})
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.want)
			assert.Equal(t, 1, exitCode(err))
		})
	}
	err := run([]string{"infer", "--model", "llama", "--weights", llamaTiny, "--input", in, "--output", "o", "--dtype", "mixed"},
		&bytes.Buffer{}, &bytes.Buffer{})
	assert.ErrorContains(t, err, `unknown --dtype "mixed" for llama`)
	assert.Equal(t, 2, exitCode(err))
}

func writeSafetensors(t *testing.T, ts []safetensors.Tensor) string {
	t.Helper()
	var buf bytes.Buffer
	require.NoError(t, safetensors.Write(&buf, ts, nil))
	return writeFile(t, t.TempDir(), "in.safetensors", buf.Bytes())
}

// TestGenerateGreedy runs generate on the tiny checkpoint with the golden
// prompt and checks its ids against the reference's greedy generation.
func TestGenerateGreedy(t *testing.T) {
	f, err := safetensors.Open(llamaGenGolden)
	require.NoError(t, err)
	pt, err := f.Tensor("prompt0/prompt_ids")
	require.NoError(t, err)
	prompt, err := pt.Int32()
	require.NoError(t, err)
	it, err := f.Tensor("prompt0/ids")
	require.NoError(t, err)
	want, err := it.Int32()
	require.NoError(t, err)
	ids := make([]string, len(prompt))
	for i, id := range prompt {
		ids[i] = itoa(int(id))
	}
	var stdout, stderr bytes.Buffer
	require.NoError(t, run([]string{"generate", "--model", llamaTiny, "--prompt-ids", strings.Join(ids, ","),
		"--max-new-tokens", itoa(len(want)), "--ignore-eos", "--format", "json"}, &stdout, &stderr))
	var res struct {
		IDs         []int   `json:"ids"`
		Text        string  `json:"text"`
		TTFT        float64 `json:"ttft_ms"`
		DecodeTokS  float64 `json:"decode_tok_s"`
		PromptToken int     `json:"prompt_tokens"`
		NewTokens   int     `json:"new_tokens"`
		PeakBytes   int64   `json:"peak_bytes"`
	}
	require.NoError(t, json.Unmarshal(stdout.Bytes(), &res), stdout.String())
	got := make([]int32, len(res.IDs))
	for i, id := range res.IDs {
		got[i] = int32(id)
	}
	assert.Equal(t, want, got, "greedy ids equal the reference's")
	assert.Equal(t, len(prompt), res.PromptToken)
	assert.Equal(t, len(want), res.NewTokens)
	assert.Positive(t, res.TTFT)
	assert.Positive(t, res.DecodeTokS)
	assert.Positive(t, res.PeakBytes)

	// Text format streams the text, then the figures.
	stdout.Reset()
	require.NoError(t, run([]string{"generate", "--model", llamaTiny, "--prompt", "Hello world", "--max-new-tokens", "5"},
		&stdout, &stderr))
	for _, s := range []string{"first token", "decode", "tok/s", "p50", "p99", "load", "cold start", "peak memory"} {
		assert.Contains(t, stdout.String(), s)
	}
}

func itoa(i int) string { b, _ := json.Marshal(i); return string(b) }

func TestGenerateErrors(t *testing.T) {
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "config.json"), []byte(`{"model_type": "llama", "mlp_bias": true}`), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "model.safetensors"), []byte("x"), 0o644))
	for _, tc := range []struct {
		name string
		args []string
		want string
		code int
	}{
		{"no model", []string{"--prompt-ids", "1"}, "missing required flag --model", 2},
		{"no prompt", []string{"--model", llamaTiny}, "give exactly one of --prompt and --prompt-ids", 2},
		{"two prompts", []string{"--model", llamaTiny, "--prompt", "a", "--prompt-ids", "1"}, "exactly one", 2},
		{"bad ids", []string{"--model", llamaTiny, "--prompt-ids", "1,x"}, `--prompt-ids: "x" is not a token id`, 2},
		{"bad temperature", []string{"--model", llamaTiny, "--prompt-ids", "1", "--temperature", "-1"}, "temperature -1", 2},
		{"bad top-p", []string{"--model", llamaTiny, "--prompt-ids", "1", "--top-p", "2"}, "top-p 2", 2},
		{"bad format", []string{"--model", llamaTiny, "--prompt-ids", "1", "--format", "xml"}, `unknown --format "xml"`, 2},
		{"bad dtype", []string{"--model", llamaTiny, "--prompt-ids", "1", "--dtype", "f8"}, `unknown --dtype "f8"`, 2},
		{"no checkpoint", []string{"--model", filepath.Join(dir, "nothing"), "--prompt-ids", "1"}, "nothing", 1},
		{"refused config", []string{"--model", dir, "--prompt-ids", "1"}, "mlp_bias = true is not supported", 1},
		{"id outside the vocabulary", []string{"--model", llamaTiny, "--prompt-ids", "1,600"}, "token id 600", 1},
		{"synthetic without tokenizer", []string{"--model", "tinyllama-synthetic", "--prompt", "hi", "--dtype", "bf16"}, "has no tokenizer", 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := run(append([]string{"generate"}, tc.args...), &bytes.Buffer{}, &bytes.Buffer{})
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.want)
			assert.Equal(t, tc.code, exitCode(err))
		})
	}
}
