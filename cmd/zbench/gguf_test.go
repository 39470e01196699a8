package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/zbench/zbench/kernels"
)

// llamaTinyGGUF holds testdata/reference/gguf.py's files of llama-tiny.
const llamaTinyGGUF = "../../testdata/golden/llama-tiny-gguf"

// TestQuantizeGGUF writes llama-tiny as GGUF from its checkpoint
// directory: the file is the reference writer's byte for byte (the
// tokenizer.json's pieces are the tokenizer.model's), and generate then
// continues the golden prompt from it as from the reference's file.
func TestQuantizeGGUF(t *testing.T) {
	for _, typ := range []string{"Q8_0", "Q4_0", "F32"} {
		t.Run(typ, func(t *testing.T) {
			out := filepath.Join(t.TempDir(), "tiny.gguf")
			var stdout bytes.Buffer
			require.NoError(t, run([]string{"quantize", "--model", "llama", "--weights", llamaTiny, "--format", "gguf",
				"--type", typ, "--name", "zbench llama-tiny", "--out", out}, &stdout, &bytes.Buffer{}))
			assert.Contains(t, stdout.String(), "wrote "+out)
			got, err := os.ReadFile(out)
			require.NoError(t, err)
			want, err := os.ReadFile(filepath.Join(llamaTinyGGUF, "model-"+map[string]string{"Q8_0": "q8_0", "Q4_0": "q4_0", "F32": "f32"}[typ]+".gguf"))
			require.NoError(t, err)
			require.True(t, bytes.Equal(want, got), "the file differs from testdata/reference/gguf.py's")

			// Round trip: the GGUF as --weights writes the same file again.
			again := filepath.Join(t.TempDir(), "again.gguf")
			require.NoError(t, run([]string{"quantize", "--model", "llama", "--weights", out, "--format", "gguf",
				"--type", "F32", "--name", "zbench llama-tiny", "--out", again}, &bytes.Buffer{}, &bytes.Buffer{}))
			if typ == "F32" {
				second, err := os.ReadFile(again)
				require.NoError(t, err)
				require.True(t, bytes.Equal(got, second))
			}
		})
	}
}

// TestGenerateGGUF continues the golden prompt greedily from the F32 and
// Q8_0 files: F32 gives the reference's ids, Q8_0 the same as the
// reference's Q8_0 file loaded through the checkpoint path's code.
func TestGenerateGGUF(t *testing.T) {
	gen := func(model string) []int {
		var stdout bytes.Buffer
		require.NoError(t, run([]string{"generate", "--model", model, "--prompt", "zbench measures",
			"--max-new-tokens", "12", "--ignore-eos", "--format", "json"}, &stdout, &bytes.Buffer{}))
		var res struct{ IDs []int }
		require.NoError(t, json.Unmarshal(stdout.Bytes(), &res))
		require.Len(t, res.IDs, 12)
		return res.IDs
	}
	want := gen(llamaTiny)
	assert.Equal(t, want, gen(filepath.Join(llamaTinyGGUF, "model-f32.gguf")))
	gen(filepath.Join(llamaTinyGGUF, "model-q4_0.gguf"))
}

// TestInferGGUF runs infer on the golden left-padded case from the F32
// file: the logits of the real tokens agree with the reference's.
func TestInferGGUF(t *testing.T) {
	in, want, mask := llamaCaseInput(t, llamaGoldenCase)
	out := filepath.Join(t.TempDir(), "out.safetensors")
	require.NoError(t, run([]string{"infer", "--model", "llama", "--weights", filepath.Join(llamaTinyGGUF, "model-f32.gguf"),
		"--input", in, "--output", out}, &bytes.Buffer{}, &bytes.Buffer{}))
	_, got := tensors(t, out)
	require.Len(t, got, 1)
	g, w := float64s(t, got[0]), float64s(t, want)
	V := want.Shape[2]
	var gs, ws []float64
	for i, m := range mask {
		if m == 1 {
			gs, ws = append(gs, g[i*V:(i+1)*V]...), append(ws, w[i*V:(i+1)*V]...)
		}
	}
	rel, _ := kernels.RelErr(gs, ws)
	assert.LessOrEqual(t, rel, 1e-4)
}

func TestGGUFErrors(t *testing.T) {
	q8 := filepath.Join(llamaTinyGGUF, "model-q8_0.gguf")
	out := filepath.Join(t.TempDir(), "x.gguf")
	for _, tc := range []struct {
		name string
		args []string
		want string
		code int
	}{
		{"scheme with gguf", []string{"quantize", "--model", "llama", "--weights", llamaTiny, "--format", "gguf", "--scheme", "w8a16", "--out", out}, "--scheme: not used by --format gguf", 2},
		{"unknown type", []string{"quantize", "--model", "llama", "--weights", llamaTiny, "--format", "gguf", "--type", "Q5_K", "--out", out}, "cannot write a Llama model in Q5_K", 1},
		{"bad type", []string{"quantize", "--model", "llama", "--weights", llamaTiny, "--format", "gguf", "--type", "Q9", "--out", out}, `unknown tensor type "Q9"`, 2},
		{"type without gguf", []string{"quantize", "--model", "llama", "--weights", llamaTiny, "--type", "Q4_0", "--scheme", "w8a16", "--out", out}, "--type: only used with --format gguf", 2},
		{"bert as gguf", []string{"quantize", "--model", "bert", "--weights", "synthetic", "--format", "gguf", "--out", out}, "only Llama-family models", 2},
		{"config with gguf", []string{"generate", "--model", q8, "--config", filepath.Join(llamaTiny, "config.json"), "--prompt-ids", "1,2"}, "carries its own config", 2},
		{"infer bert from gguf", []string{"infer", "--model", "bert", "--weights", q8, "--input", "x", "--output", "y"}, "only Llama-family models", 2},
		{"not a gguf", []string{"generate", "--model", filepath.Join(llamaTiny, "config.json.gguf"), "--prompt-ids", "1,2"}, "no such file", 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := run(tc.args, &bytes.Buffer{}, &bytes.Buffer{})
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.want)
			assert.Equal(t, tc.code, exitCode(err))
		})
	}
}

// TestLoadLlamaGGUF: generation keeps a Q4_0 file's decoder weights in
// int4, training gets them dequantized; the embedded tokenizer comes too.
func TestLoadLlamaGGUF(t *testing.T) {
	dev, err := openDevice("cpu")
	require.NoError(t, err)
	for _, quantized := range []bool{true, false} {
		m, tok, tokErr, err := loadLlamaGGUF(dev, filepath.Join(llamaTinyGGUF, "model-q4_0.gguf"), "auto", quantized)
		require.NoError(t, err)
		require.NoError(t, tokErr)
		assert.Equal(t, llamaTinyVocab, tok.VocabSize())
		assert.Equal(t, quantized, m.Quantized())
		require.NoError(t, m.Close())
	}
}
