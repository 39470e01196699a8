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

// resnetGoldenCase returns the golden case resnet18_cifar10's images as an
// input file, and its logits.
func resnetGoldenCase(t *testing.T) (input string, logits safetensors.Tensor) {
	t.Helper()
	_, golden := tensors(t, resnetGolden)
	var in safetensors.Tensor
	for _, x := range golden {
		switch x.Name {
		case "resnet18_cifar10/pixel_values":
			in = x
		case "resnet18_cifar10/logits":
			logits = x
		}
	}
	require.NotEmpty(t, in.Name, "golden case resnet18_cifar10")
	in.Name = "pixel_values"
	return writeTensors(t, in), logits
}

// TestQuantizeResNet quantizes the torchvision checkpoint of the golden
// case resnet18_cifar10, calibrated on its own images, and runs the int8
// checkpoint through infer: its logits within the int8 bound of
// torchvision's float ones.
func TestQuantizeResNet(t *testing.T) {
	dir := t.TempDir()
	weights := writeResNetCheckpoint(t, dir)
	input, want := resnetGoldenCase(t)
	q := filepath.Join(dir, "int8")
	var stdout bytes.Buffer
	require.NoError(t, run([]string{"quantize", "--model", "resnet18", "--weights", weights, "--calib", input, "--batch", "2",
		"--method", "percentile-hist", "--out", q}, &stdout, &bytes.Buffer{}))
	assert.Contains(t, stdout.String(), "over 2 batches of 2×3×32×32")
	assert.Contains(t, stdout.String(), "layer4.1.conv2")

	var rep quantizeReport
	data, err := os.ReadFile(filepath.Join(q, "quantization-report.json"))
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(data, &rep))
	assert.Len(t, rep.Layers, 21, "20 convolutions and fc")
	require.Len(t, rep.Outputs, 1)
	t.Logf("logits rel-err against the float model %.3g", rep.Outputs[0].RelErr)
	assert.Less(t, rep.Outputs[0].RelErr, 7e-2)
	var cfg map[string]any
	data, err = os.ReadFile(filepath.Join(q, "config.json"))
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(data, &cfg))
	assert.Equal(t, []any{"Conv2d", "Linear"}, cfg["quantization_config"].(map[string]any)["config_groups"].(map[string]any)["group_0"].(map[string]any)["targets"])

	out := filepath.Join(dir, "out.safetensors")
	require.NoError(t, run([]string{"infer", "--model", "resnet18", "--weights", q, "--input", input, "--output", out}, &bytes.Buffer{}, &bytes.Buffer{}))
	f, err := safetensors.Open(out)
	require.NoError(t, err)
	got, err := f.Tensor("logits")
	require.NoError(t, err)
	rel, _ := kernels.RelErr(float64s(t, got), float64s(t, want))
	t.Logf("infer of the int8 checkpoint against torchvision's logits: rel-err %.3g", rel)
	assert.Less(t, rel, 7e-2)

	err = run([]string{"quantize", "--model", "resnet18", "--weights", q, "--calib", input, "--out", filepath.Join(dir, "again")}, &bytes.Buffer{}, &bytes.Buffer{})
	assert.ErrorContains(t, err, "already quantized")
}

// TestQuantizeResNetSynthetic quantizes synthetic weights with synthetic
// calibration images, and checks the refusals.
func TestQuantizeResNetSynthetic(t *testing.T) {
	dir := t.TempDir()
	var stdout bytes.Buffer
	require.NoError(t, run([]string{"quantize", "--model", "resnet18", "--weights", "synthetic:5", "--calib", "synthetic", "--batches", "2",
		"--size", "32", "--method", "absmax", "--out", dir}, &stdout, &bytes.Buffer{}))
	assert.Contains(t, stdout.String(), "over 2 batches of 1×3×32×32 (synthetic)")
	input, _ := resnetGoldenCase(t)
	for _, c := range []struct {
		name  string
		args  []string
		usage bool
		want  string
	}{
		{"scheme", []string{"--scheme", "w4a16", "--calib", "synthetic"}, true, "resnet18 is quantized in w8a8"},
		{"calib", nil, true, "--model resnet18 needs --calib"},
		{"batch", []string{"--calib", input, "--batch", "5"}, false, "4 images, fewer than --batch 5"},
	} {
		t.Run(c.name, func(t *testing.T) {
			args := append([]string{"quantize", "--model", "resnet18", "--weights", "synthetic", "--out", t.TempDir()}, c.args...)
			err := run(args, &bytes.Buffer{}, &bytes.Buffer{})
			require.Error(t, err)
			assert.Contains(t, err.Error(), c.want)
			assert.Equal(t, c.usage, exitCode(err) == 2, "usage error: %v", err)
		})
	}
}
