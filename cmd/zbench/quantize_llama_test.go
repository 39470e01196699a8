package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/zbench/zbench/kernels"
)

// TestQuantizeLlama quantizes the tiny Llama checkpoint in each scheme
// that fits its sizes, with the golden case as the evaluation batch, and
// checks the report, the files, and that infer and generate run the
// quantized checkpoint: infer's logits within the scheme's bound of the
// reference's.
func TestQuantizeLlama(t *testing.T) {
	in, want, mask := llamaCaseInput(t, llamaGoldenCase)
	for _, tc := range []struct {
		scheme string
		tol    float64
	}{{"w8a8", 5e-2}, {"w8a16", 2e-2}, {"fp8", 8e-2}} {
		t.Run(tc.scheme, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), tc.scheme)
			var stdout bytes.Buffer
			require.NoError(t, run([]string{"quantize", "--model", "llama", "--weights", llamaTiny, "--scheme", tc.scheme,
				"--calib", in, "--out", dir}, &stdout, &bytes.Buffer{}))
			out := stdout.String()
			assert.Contains(t, out, "layers.1.mlp.down_proj")
			assert.Contains(t, out, "logits rel-err")

			var rep quantizeReport
			data, err := os.ReadFile(filepath.Join(dir, "quantization-report.json"))
			require.NoError(t, err)
			require.NoError(t, json.Unmarshal(data, &rep))
			assert.Equal(t, tc.scheme, rep.Scheme)
			assert.Equal(t, "f32", rep.DType, "the config's torch_dtype")
			assert.Len(t, rep.Layers, 14, "seven modules in each of two layers")
			require.Len(t, rep.Outputs, 1)
			assert.Less(t, rep.Outputs[0].RelErr, tc.tol)
			assert.Less(t, rep.QuantBytes*3, rep.F32Bytes, "int8 codes are a quarter of float32's, with scales")
			for _, name := range []string{"tokenizer.json", "tokenizer.model", "tokenizer_config.json"} {
				assert.FileExists(t, filepath.Join(dir, name), "copied from the checkpoint")
			}
			var cfg map[string]any
			data, err = os.ReadFile(filepath.Join(dir, "config.json"))
			require.NoError(t, err)
			require.NoError(t, json.Unmarshal(data, &cfg))
			assert.Equal(t, "4.46.0", cfg["transformers_version"], "the source config's keys are kept")
			assert.Equal(t, []any{"lm_head"}, cfg["quantization_config"].(map[string]any)["ignore"])

			outPath := filepath.Join(t.TempDir(), "out.safetensors")
			require.NoError(t, run([]string{"infer", "--model", "llama", "--weights", dir, "--input", in, "--output", outPath},
				&bytes.Buffer{}, &bytes.Buffer{}))
			_, got := tensors(t, outPath)
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
			t.Logf("%s: report rel-err %.3g, infer against the reference %.3g", tc.scheme, rep.Outputs[0].RelErr, rel)
			assert.Less(t, rel, tc.tol)

			stdout.Reset()
			require.NoError(t, run([]string{"generate", "--model", dir, "--prompt-ids", "1,5,9", "--max-new-tokens", "3",
				"--format", "json", "--ignore-eos"}, &stdout, &bytes.Buffer{}))
			var gen struct {
				IDs []int `json:"ids"`
			}
			require.NoError(t, json.Unmarshal(stdout.Bytes(), &gen))
			assert.Len(t, gen.IDs, 3)
		})
	}
}

// TestQuantizeLlama4Bit quantizes synthetic weights of a config whose
// inputs divide into groups of 32 and 64 to int4 and NF4, and generates
// from the result.
func TestQuantizeLlama4Bit(t *testing.T) {
	cfgPath := writeFile(t, t.TempDir(), "config.json", []byte(`{"model_type":"llama","hidden_size":64,"intermediate_size":128,
		"num_hidden_layers":2,"num_attention_heads":4,"num_key_value_heads":2,"vocab_size":300,"max_position_embeddings":64,
		"torch_dtype":"bfloat16"}`))
	for _, c := range []struct {
		scheme, group, method string
		wantGroup             int
		tol                   float64 // measured: 0.100 and 0.151 (uniform weights, 2 layers)
	}{{"w4a16", "32", "compressed-tensors", 32, 0.15}, {"nf4", "", "bitsandbytes", 64, 0.2}} {
		t.Run(c.scheme, func(t *testing.T) {
			dir := t.TempDir()
			args := []string{"quantize", "--model", "llama", "--weights", "synthetic:3", "--config", cfgPath,
				"--scheme", c.scheme, "--seq", "16", "--dtype", "f32", "--out", dir}
			if c.group != "" {
				args = append(args, "--group", c.group)
			}
			var stdout bytes.Buffer
			require.NoError(t, run(args, &stdout, &bytes.Buffer{}))
			assert.Contains(t, stdout.String(), fmt.Sprintf("groups of %d", c.wantGroup))
			var rep quantizeReport
			data, err := os.ReadFile(filepath.Join(dir, "quantization-report.json"))
			require.NoError(t, err)
			require.NoError(t, json.Unmarshal(data, &rep))
			assert.Equal(t, c.wantGroup, rep.Group)
			var cfg map[string]any
			data, err = os.ReadFile(filepath.Join(dir, "config.json"))
			require.NoError(t, err)
			require.NoError(t, json.Unmarshal(data, &cfg))
			assert.Equal(t, "float32", cfg["torch_dtype"], "the dtype the float tensors are written in")
			assert.Equal(t, c.method, cfg["quantization_config"].(map[string]any)["quant_method"])
			assert.Less(t, rep.QuantBytes*5, rep.F32Bytes, "4-bit codes and a scale per group")
			t.Logf("logits rel-err %.3g", rep.Outputs[0].RelErr)
			assert.Less(t, rep.Outputs[0].RelErr, c.tol)
			stdout.Reset()
			require.NoError(t, run([]string{"generate", "--model", dir, "--prompt-ids", "1,5,9", "--max-new-tokens", "2", "--format", "json"},
				&stdout, &bytes.Buffer{}))
			assert.Contains(t, stdout.String(), `"ids"`)
		})
	}
}

func TestQuantizeLlamaErrors(t *testing.T) {
	dir := t.TempDir()
	w8 := filepath.Join(dir, "w8")
	require.NoError(t, run([]string{"quantize", "--model", "llama", "--weights", llamaTiny, "--scheme", "w8a16", "--seq", "8", "--out", w8},
		&bytes.Buffer{}, &bytes.Buffer{}))
	base := []string{"quantize", "--model", "llama", "--weights", llamaTiny, "--seq", "8", "--out", dir}
	for _, c := range []struct {
		name  string
		args  []string
		usage bool
		want  string
	}{
		{"group", append(append([]string{}, base...), "--scheme", "w4a16", "--group", "48"), true, "--group 48"},
		{"bert scheme", []string{"quantize", "--model", "bert", "--weights", "synthetic", "--calib", "synthetic", "--scheme", "w4a16", "--out", dir}, true, "bert is quantized in w8a8"},
		{"bert calib", []string{"quantize", "--model", "bert", "--weights", "synthetic", "--out", dir}, true, "needs --calib"},
		{"dtype", append(append([]string{}, base...), "--dtype", "f8"), true, "unknown --dtype"},
		{"method", append(append([]string{}, base...), "--method", "entropy", "--batches", "3"), true, "--batches, --method: not used by --model llama"},
		{"group for int8", append(append([]string{}, base...), "--scheme", "w8a16", "--group", "64"), true, "--group: not used"},
		{"bert dtype", []string{"quantize", "--model", "bert", "--weights", "synthetic", "--calib", "synthetic", "--dtype", "f16", "--out", dir}, true, "--dtype: not used by --model bert"},
		{"resnet config", []string{"quantize", "--model", "resnet50", "--weights", "synthetic", "--calib", "synthetic", "--config", "c.json", "--out", dir}, true, "--config: not used by --model resnet50"},
		{"groups of the sizes", append(append([]string{}, base...), "--scheme", "w4a16", "--group", "32"), false, "model.layers.0.mlp.down_proj: 172 inputs do not divide into groups of 32"},
		{"seq", append(append([]string{}, base...), "--seq", "4096"), true, "max_position_embeddings"},
		{"already quantized", []string{"quantize", "--model", "llama", "--weights", w8, "--out", dir}, false, "already quantized (w8a16)"},
	} {
		t.Run(c.name, func(t *testing.T) {
			err := run(c.args, &bytes.Buffer{}, &bytes.Buffer{})
			require.Error(t, err)
			assert.Contains(t, err.Error(), c.want)
			assert.Equal(t, c.usage, exitCode(err) == 2, "usage error: %v", err)
		})
	}
}
