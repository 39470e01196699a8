package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/zbench/zbench/kernels"
	"github.com/zbench/zbench/models/imagenet"
	"github.com/zbench/zbench/models/resnet"
	"github.com/zbench/zbench/models/safetensors"
)

// resnetGolden holds torchvision's logits of the ResNet family on seeded
// synthetic weights (testdata/reference/resnet.py).
const resnetGolden = "../../testdata/golden/resnet.safetensors"

// writeResNetCheckpoint writes a torchvision-layout state_dict of
// resnet18 with a 10-class head (the golden case resnet18_cifar10's
// weights: every BatchNorm's num_batches_tracked included) to dir.
func writeResNetCheckpoint(t *testing.T, dir string) string {
	t.Helper()
	cfg, err := resnet.ByName("resnet18")
	require.NoError(t, err)
	cfg.NumClasses = 10
	src := resnet.Synthetic(cfg, 20261201)
	var ts []safetensors.Tensor
	for _, p := range cfg.Params() {
		v, err := src.Values(p)
		require.NoError(t, err)
		ts = append(ts, f32Tensor(p.Name, v, p.Shape...))
		if strings.HasSuffix(p.Name, ".running_var") {
			n := strings.TrimSuffix(p.Name, "running_var") + "num_batches_tracked"
			ts = append(ts, safetensors.Tensor{Name: n, DType: "I64", Shape: []int{}, Data: make([]byte, 8)})
		}
	}
	var buf bytes.Buffer
	require.NoError(t, safetensors.Write(&buf, ts, map[string]string{"format": "pt"}))
	return writeFile(t, dir, "resnet18_cifar10.safetensors", buf.Bytes())
}

// TestInferResNet runs the golden case resnet18_cifar10 through infer
// and compares the logits with torchvision's.
func TestInferResNet(t *testing.T) {
	dir := t.TempDir()
	weights := writeResNetCheckpoint(t, dir)
	_, golden := tensors(t, resnetGolden)
	var in, want safetensors.Tensor
	for _, x := range golden {
		switch x.Name {
		case "resnet18_cifar10/pixel_values":
			in = x
		case "resnet18_cifar10/logits":
			want = x
		}
	}
	require.NotEmpty(t, in.Name, "golden case resnet18_cifar10")
	in.Name = "pixel_values"
	input := writeTensors(t, in)
	out := filepath.Join(dir, "out.safetensors")
	var stdout bytes.Buffer
	require.NoError(t, run([]string{"infer", "--model", "resnet18", "--weights", weights, "--input", input, "--output", out}, &stdout, new(bytes.Buffer)))
	assert.Contains(t, stdout.String(), "batch   4×3×32×32")
	assert.Contains(t, stdout.String(), "logits [4 10]")
	f, err := safetensors.Open(out)
	require.NoError(t, err)
	got, err := f.Tensor("logits")
	require.NoError(t, err)
	rel, _ := kernels.RelErr(float64s(t, got), float64s(t, want))
	assert.LessOrEqual(t, rel, 1e-4, "logits against torchvision's")
	assert.Equal(t, "resnet18", f.Metadata()["model"])
	assert.NotContains(t, f.Metadata(), "config")
}

// TestInferResNetImage classifies a photograph: the top classes printed
// are those of the logits written, with their softmax probabilities.
func TestInferResNetImage(t *testing.T) {
	dir := t.TempDir()
	weights := writeResNetCheckpoint(t, dir)
	var names []string
	for i := range 10 {
		names = append(names, "class-"+string(rune('a'+i)))
	}
	labels := writeFile(t, dir, "labels.txt", []byte(strings.Join(names, "\n")+"\n"))
	photo := "../../testdata/golden/imagenet/cat.png"
	out := filepath.Join(dir, "out.safetensors")
	var stdout bytes.Buffer
	require.NoError(t, run([]string{"infer", "--model", "resnet18", "--weights", weights, "--image", photo,
		"--labels", labels, "--top", "3", "--output", out}, &stdout, new(bytes.Buffer)))
	text := stdout.String()
	assert.Contains(t, text, "batch   1×3×224×224")
	f, err := safetensors.Open(out)
	require.NoError(t, err)
	lt, err := f.Tensor("logits")
	require.NoError(t, err)
	logits, err := lt.Float32()
	require.NoError(t, err)
	top, err := imagenet.TopK(logits, 3)
	require.NoError(t, err)
	lines := strings.Split(strings.TrimSpace(text), "\n")
	require.GreaterOrEqual(t, len(lines), 3)
	for i, p := range top {
		line := lines[len(lines)-3+i]
		assert.Contains(t, line, names[p.Index], "line %d: %q", i+1, line)
		assert.Contains(t, line, fmt.Sprintf("%.2f%%", 100*p.Prob), "line %d: %q", i+1, line)
	}
	assert.Equal(t, "cat.png", f.Metadata()["image"])

	// Without --output nothing is written and the classes still print.
	stdout.Reset()
	require.NoError(t, run([]string{"infer", "--model", "resnet18", "--weights", weights, "--image", photo, "--top", "1"},
		&stdout, new(bytes.Buffer)))
	assert.Contains(t, stdout.String(), "output  not written")
	assert.Contains(t, stdout.String(), "1. ")
}

// TestInferResNetErrors checks the flag and input errors of the ResNet
// paths.
func TestInferResNetErrors(t *testing.T) {
	dir := t.TempDir()
	weights := writeResNetCheckpoint(t, dir)
	photo := "../../testdata/golden/imagenet/cat.png"
	bad := writeTensors(t, f32Tensor("pixel_values", make([]float32, 12), 1, 4, 3, 1))
	labels := writeFile(t, dir, "labels.txt", []byte("a\nb\n"))
	for _, c := range []struct {
		name string
		args []string
		want string
	}{
		{"image for bert", []string{"--model", "bert", "--weights", weights, "--image", photo}, "--image is for image classifiers"},
		{"image and input", []string{"--model", "resnet18", "--weights", weights, "--image", photo, "--input", bad, "--output", filepath.Join(dir, "o")}, "not both"},
		{"config", []string{"--model", "resnet18", "--weights", weights, "--config", labels, "--image", photo}, "has no config.json"},
		{"wrong family member", []string{"--model", "resnet50", "--weights", weights, "--image", photo}, "fc.weight has shape [10 512], want [classes 2048] for resnet50"},
		{"labels count", []string{"--model", "resnet18", "--weights", weights, "--image", photo, "--labels", labels}, "--labels has 2 classes, the checkpoint's fc.weight 10"},
		{"not an image", []string{"--model", "resnet18", "--weights", weights, "--image", labels}, "labels.txt"},
		{"pixel layout", []string{"--model", "resnet18", "--weights", weights, "--input", bad, "--output", filepath.Join(dir, "o")}, "pixel_values has shape [1 4 3 1], want [N, 3, H, W]"},
		{"top", []string{"--model", "resnet18", "--weights", weights, "--image", photo, "--top", "0"}, "--top 0"},
		{"tf32 for bert", []string{"--model", "bert", "--weights", weights, "--dtype", "tf32", "--input", bad, "--output", filepath.Join(dir, "o")}, `unknown --dtype "tf32" for bert`},
	} {
		t.Run(c.name, func(t *testing.T) {
			err := run(append([]string{"infer"}, c.args...), new(bytes.Buffer), new(bytes.Buffer))
			require.Error(t, err)
			assert.Contains(t, err.Error(), c.want)
			_, statErr := os.Stat(filepath.Join(dir, "o"))
			assert.True(t, os.IsNotExist(statErr), "no output on error")
		})
	}
}

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
