package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"

	"github.com/zbench/zbench/models/checkpoint"
	"github.com/zbench/zbench/models/nn"
	"github.com/zbench/zbench/models/quant"
	"github.com/zbench/zbench/models/resnet"
	"github.com/zbench/zbench/models/safetensors"
)

func init() {
	for _, name := range resnet.Names() {
		register(modelEntry{name: name, inferDoc: resnetInferDoc, load: loadResNet, read: pixelValues, dtypes: resnetDTypes, stateDict: true, images: true,
			quantize: quantizeResNet, schemes: []quant.Scheme{quant.W8A8}, calib: true, defaultSize: 224,
			quantizeFlags: append([]string{"size"}, calibrationFlags...)})
	}
}

// resnetDTypes are the --dtype values of the ResNet family: tf32 is f32
// weights and activations with the convolutions on TF32 tensor cores
// where the device has them.
var resnetDTypes = []string{"f32", "tf32", "f16", "bf16"}

// resnetOptions maps a --dtype to the model's options.
func resnetOptions(dtype string) (resnet.Options, error) {
	if dtype == "tf32" {
		return resnet.Options{Precision: nn.F32, TF32: true}, nil
	}
	p, err := nn.ParsePrecision(dtype)
	return resnet.Options{Precision: p}, err
}

// loadResNet loads the torchvision ResNet named by the job from its
// state_dict: logits [N, classes].
func loadResNet(job inferJob) (nn.Runnable, error) {
	opts, err := resnetOptions(job.dtype)
	if err != nil {
		return nil, err
	}
	ck, err := resnet.OpenCheckpoint(job.files.Weights...)
	if err != nil {
		return nil, fmt.Errorf("weights: %w", err)
	}
	cfg, err := resnet.FromCheckpoint(job.model, ck)
	if err != nil {
		return nil, fmt.Errorf("weights: %w", err)
	}
	if job.labels != nil && len(job.labels) != cfg.NumClasses {
		return nil, fmt.Errorf("--labels has %d classes, the checkpoint's fc.weight %d", len(job.labels), cfg.NumClasses)
	}
	m, err := resnet.Load(job.dev, cfg, ck, opts)
	if err != nil {
		return nil, fmt.Errorf("weights: %w", err)
	}
	return m, nil
}

// pixelValues reads a ResNet input file as the model's named input.
func pixelValues(f *safetensors.File) (map[string]nn.Values, error) {
	vals, n, h, w, err := readPixels(f)
	if err != nil {
		return nil, err
	}
	return map[string]nn.Values{"pixel_values": {Shape: []int{n, 3, h, w}, F32: vals}}, nil
}

// readPixels reads pixel_values [N, 3, H, W] (F32, F16 or BF16) from the
// input file, its only tensor.
func readPixels(f *safetensors.File) (vals []float32, n, h, w int, err error) {
	if err := checkNames(f, []string{"pixel_values"}); err != nil {
		return nil, 0, 0, 0, err
	}
	t, err := f.Tensor("pixel_values")
	if err != nil {
		return nil, 0, 0, 0, fmt.Errorf("input file %q: %w (want pixel_values [N, 3, H, W])", f.Name(), err)
	}
	if len(t.Shape) != 4 || t.Shape[1] != 3 {
		return nil, 0, 0, 0, fmt.Errorf("input file %q: pixel_values has shape %v, want [N, 3, H, W] (NCHW, RGB)", f.Name(), t.Shape)
	}
	switch t.DType {
	case "F32", "F16", "BF16":
	default:
		return nil, 0, 0, 0, fmt.Errorf("input file %q: pixel_values has dtype %s, want F32", f.Name(), t.DType)
	}
	if vals, err = t.Float32(); err != nil {
		return nil, 0, 0, 0, fmt.Errorf("input file %q: %w", f.Name(), err)
	}
	return vals, t.Shape[0], t.Shape[2], t.Shape[3], nil
}

// resnetSyntheticSeed seeds the synthetic weights of a ResNet (the
// benchmarks' seed).
const resnetSyntheticSeed = 20261201

// quantizeResNet calibrates and quantizes the torchvision ResNet named
// model and writes it.
func quantizeResNet(j quantizeJob) (rep quantizeReport, err error) {
	model := j.model
	cfg, src, err := resnetQuantizeSource(model, j.weights)
	if err != nil {
		return rep, err
	}
	cal, eval, err := resnetCalibrationBatches(j)
	if err != nil {
		return rep, err
	}
	cal.NewObserver = j.newObserver
	if err := os.MkdirAll(j.out, 0o755); err != nil {
		return rep, fmt.Errorf("--out: %w", err)
	}
	m, err := resnet.Load(j.dev, cfg, src, resnet.Options{Precision: nn.F32})
	if err != nil {
		return rep, fmt.Errorf("loading weights: %w", err)
	}
	defer func() { err = errors.Join(err, m.Close()) }()
	in := map[string]nn.Values{"pixel_values": {Shape: []int{cal.Batch, 3, cal.Height, cal.Width}, F32: eval}}
	layers, elapsed, outs, err := quantizeMeasured(m, in, func() ([]quant.LinearReport, error) { return m.Quantize(cal) })
	if err != nil {
		return rep, err
	}
	rep = newQuantizeReport(j, model, layers, elapsed, "f32")
	rep.Method, rep.Batches, rep.Batch, rep.Height, rep.Width = j.method, len(cal.Batches), cal.Batch, cal.Height, cal.Width
	rep.Percentile = j.percentile()
	rep.Outputs = outs
	tensors, err := m.QuantizedTensors()
	if err != nil {
		return rep, err
	}
	raw := map[string]json.RawMessage{}
	for k, v := range map[string]any{"architectures": []string{model}, "num_classes": cfg.NumClasses,
		"quantization_config": quant.NewConfig(resnet.QuantSpec(j.method))} {
		if raw[k], err = json.Marshal(v); err != nil {
			return rep, err
		}
	}
	return rep, writeQuantized(j.out, tensors, raw, rep)
}

// resnetQuantizeSource resolves --weights for the ResNet named model: a
// torchvision state_dict in safetensors, or synthetic[:SEED].
func resnetQuantizeSource(model, weights string) (resnet.Config, nn.Source, error) {
	if rest, ok := strings.CutPrefix(weights, "synthetic"); ok && (rest == "" || rest[0] == ':') {
		seed := uint64(resnetSyntheticSeed)
		if rest != "" {
			s, err := strconv.ParseUint(rest[1:], 10, 64)
			if err != nil {
				return resnet.Config{}, nil, usageErrorf("--weights %s: the seed must be an unsigned integer", weights)
			}
			seed = s
		}
		cfg, err := resnet.ByName(model)
		if err != nil {
			return cfg, nil, usageError{err}
		}
		return cfg, resnet.Synthetic(cfg, seed), nil
	}
	files, err := checkpoint.ResolveWeights(weights)
	if err != nil {
		return resnet.Config{}, nil, err
	}
	ck, err := resnet.OpenCheckpoint(files.Weights...)
	if err != nil {
		return resnet.Config{}, nil, fmt.Errorf("weights: %w", err)
	}
	if resnet.IsQuantized(ck) {
		return resnet.Config{}, nil, fmt.Errorf("weights %s: the checkpoint is already quantized (w8a8)", weights)
	}
	cfg, err := resnet.FromCheckpoint(model, ck)
	if err != nil {
		return resnet.Config{}, nil, fmt.Errorf("weights: %w", err)
	}
	return cfg, ck, nil
}

// resnetCalibrationBatches returns the calibration and the evaluation
// images: seeded N(0, 1) images of --size × --size (the evaluation batch
// apart from the calibration), or the pixel_values of a file, --batch at a
// time, the first batch also the evaluation batch.
func resnetCalibrationBatches(j quantizeJob) (resnet.Calibration, []float32, error) {
	cal := resnet.Calibration{Batch: j.batch, Height: j.size, Width: j.size}
	if j.calib == "synthetic" {
		n := j.batch * 3 * j.size * j.size
		for i := range j.batches {
			cal.Batches = append(cal.Batches, normalImages(uint64(i+1), n))
		}
		return cal, normalImages(0, n), nil
	}
	f, err := safetensors.Open(j.calib)
	if err != nil {
		return cal, nil, fmt.Errorf("--calib: %w", err)
	}
	vals, n, h, w, err := readPixels(f)
	if err != nil {
		return cal, nil, fmt.Errorf("--calib: %w", err)
	}
	if n < j.batch {
		return cal, nil, fmt.Errorf("--calib %s: %d images, fewer than --batch %d", j.calib, n, j.batch)
	}
	cal.Height, cal.Width = h, w
	size := j.batch * 3 * h * w
	for r := 0; r+j.batch <= n && len(cal.Batches) < j.batches; r += j.batch {
		cal.Batches = append(cal.Batches, vals[r*3*h*w:r*3*h*w+size])
	}
	return cal, cal.Batches[0], nil
}

// normalImages returns n seeded values from N(0, 1): images as a model
// normalised with ImageNet's statistics sees them.
func normalImages(seed uint64, n int) []float32 {
	rng := rand.New(rand.NewPCG(seed, 0x9e3779b97f4a7c15))
	out := make([]float32, n)
	for i := range out {
		out[i] = float32(rng.NormFloat64())
	}
	return out
}

// resnetInferDoc is resnet's paragraph of infer's help.
const resnetInferDoc = `For torchvision's ResNet family (--model resnet18, resnet34, resnet50,
resnet101, resnet152, resnext50_32x4d, resnext101_32x8d, resnext101_64x4d,
wide_resnet50_2, wide_resnet101_2), --weights is the model's state_dict
saved as safetensors with torchvision's names (no config.json; the classes
are fc.weight's rows). IN holds pixel_values F32 [N, 3, H, W], normalised,
H and W at least 32; OUT gets logits F32 [N, classes]. Instead of --input,
--image classifies one JPEG or PNG photograph after torchvision's ImageNet
evaluation transform (resize the short side to 256 as PIL's antialiased
bilinear resize does, center crop 224, scale to [0, 1], normalise with
ImageNet's mean and std) and prints the --top classes with their softmax
probabilities, named by --labels (one class per line) if given; --output
is then optional. --dtype tf32 runs f32 convolutions on TF32 tensor cores.`
