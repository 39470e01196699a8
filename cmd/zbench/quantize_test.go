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
	"github.com/zbench/zbench/models/safetensors"
)

// TestQuantizeTiny quantizes the tiny checkpoint with its own inputs as
// calibration, checks the files and the report, and runs the quantized
// checkpoint through infer: its outputs stay within 5e-2 of the float
// reference's.
func TestQuantizeTiny(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "int8")
	var stdout bytes.Buffer
	require.NoError(t, run([]string{"quantize", "--model", "bert", "--weights", bertTiny, "--calib", tinyInput,
		"--method", "absmax", "--batch", "3", "--out", dir}, &stdout, &bytes.Buffer{}))
	out := stdout.String()
	assert.Contains(t, out, "layer.0.attention.self.query")
	assert.Contains(t, out, "smaller) and")
	assert.Contains(t, out, "last_hidden_state rel-err")

	var rep quantizeReport
	data, err := os.ReadFile(filepath.Join(dir, "quantization-report.json"))
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(data, &rep))
	assert.Equal(t, "w8a8", rep.Scheme)
	assert.Equal(t, 1, rep.Batches, "3 rows in batches of 3")
	assert.NotEmpty(t, rep.Layers)
	require.Len(t, rep.Outputs, 2)
	assert.Equal(t, "last_hidden_state", rep.Outputs[0].Name)
	assert.Less(t, rep.Outputs[0].RelErr, 5e-2)
	assert.Less(t, rep.QuantBytes, rep.F16Bytes)
	txt, err := os.ReadFile(filepath.Join(dir, "quantization-report.txt"))
	require.NoError(t, err)
	assert.Equal(t, out, string(txt))

	var cfg map[string]any
	data, err = os.ReadFile(filepath.Join(dir, "config.json"))
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(data, &cfg))
	assert.Equal(t, "compressed-tensors", cfg["quantization_config"].(map[string]any)["quant_method"])
	assert.NotNil(t, cfg["hidden_size"], "the source config's keys are kept")

	outPath := filepath.Join(t.TempDir(), "out.safetensors")
	require.NoError(t, run([]string{"infer", "--model", "bert", "--weights", dir, "--input", tinyInput, "--output", outPath},
		&bytes.Buffer{}, &bytes.Buffer{}))
	_, got := tensors(t, outPath)
	want, err := safetensors.Open(tinyOutput)
	require.NoError(t, err)
	for _, g := range got {
		w, err := want.Tensor(g.Name)
		require.NoError(t, err)
		gv, err := g.Float32()
		require.NoError(t, err)
		wv, err := w.Float32()
		require.NoError(t, err)
		rel, _ := kernels.RelErr(widen64(gv), widen64(wv))
		assert.Less(t, rel, 5e-2, "%s of the int8 checkpoint against the float reference", g.Name)
	}
}

// TestQuantizeSynthetic quantizes synthetic weights of the tiny config with
// synthetic calibration through every method.
func TestQuantizeSynthetic(t *testing.T) {
	for _, method := range []string{"absmax", "percentile", "percentile-hist", "entropy", "mse"} {
		t.Run(method, func(t *testing.T) {
			dir := t.TempDir()
			require.NoError(t, run([]string{"quantize", "--model", "bert", "--weights", "synthetic:7", "--config", tinyConfig,
				"--calib", "synthetic", "--batches", "2", "--seq", "16", "--method", method, "--out", dir}, &bytes.Buffer{}, &bytes.Buffer{}))
			var cfg map[string]json.RawMessage
			data, err := os.ReadFile(filepath.Join(dir, "config.json"))
			require.NoError(t, err)
			require.NoError(t, json.Unmarshal(data, &cfg))
			assert.Contains(t, string(cfg["quantization_config"]), `"observer": "`+method+`"`)
		})
	}
}

func TestQuantizeErrors(t *testing.T) {
	dir := t.TempDir()
	quantized := filepath.Join(dir, "q")
	require.NoError(t, run([]string{"quantize", "--model", "bert", "--weights", bertTiny, "--calib", tinyInput,
		"--method", "absmax", "--out", quantized}, &bytes.Buffer{}, &bytes.Buffer{}))
	base := []string{"quantize", "--model", "bert", "--weights", bertTiny, "--calib", "synthetic", "--seq", "8", "--batches", "1"}
	cases := []struct {
		name  string
		args  []string
		usage bool
		want  string
	}{
		{"missing", []string{"quantize", "--model", "bert"}, true, "--weights, --out"},
		{"model", append(append([]string{}, base...), "--model", "gpt2", "--out", dir), true, `unknown --model "gpt2"`},
		{"method", append(append([]string{}, base...), "--method", "kl", "--out", dir), true, "unknown calibration method"},
		{"percentile", append(append([]string{}, base...), "--percentile", "101", "--out", dir), true, "percentile"},
		{"bins for absmax", append(append([]string{}, base...), "--method", "absmax", "--bins", "512", "--out", dir), true, "bin count"},
		{"scheme", append(append([]string{}, base...), "--scheme", "fp4", "--out", dir), true, "unknown scheme"},
		{"seq", append(append([]string{}, base...), "--seq", "4096", "--out", dir), true, "max_position_embeddings"},
		{"calib file", append(append([]string{}, base[:len(base)-4]...), "--calib", filepath.Join(dir, "none.safetensors"), "--out", dir), false, "--calib"},
		{"already quantized", []string{"quantize", "--model", "bert", "--weights", quantized, "--calib", "synthetic", "--seq", "8", "--out", dir}, false, "already quantized"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := run(c.args, &bytes.Buffer{}, &bytes.Buffer{})
			require.Error(t, err)
			assert.Contains(t, err.Error(), c.want)
			assert.Equal(t, c.usage, exitCode(err) == 2, "usage error: %v", err)
		})
	}
}

// widen64 widens float32 values.
func widen64(v []float32) []float64 {
	out := make([]float64, len(v))
	for i, x := range v {
		out[i] = float64(x)
	}
	return out
}
