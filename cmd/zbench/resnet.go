package main

import (
	"errors"
	"fmt"
	"time"

	"github.com/zbench/zbench/models/imagenet"
	"github.com/zbench/zbench/models/nn"
	"github.com/zbench/zbench/models/resnet"
	"github.com/zbench/zbench/models/safetensors"
)

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

// inferResNet runs a torchvision ResNet on pixel_values [N, 3, H, W] F32
// from the input file, or on one photograph preprocessed as torchvision's
// ImageNet evaluation transform does, and returns logits [N, classes]
// (and, for a photograph, its top classes).
func inferResNet(job inferJob) (res inferResult, err error) {
	opts, err := resnetOptions(job.dtype)
	if err != nil {
		return res, err
	}
	start := time.Now()
	var pixels []float32
	var n, h, w int
	if job.image != "" {
		img, err := imagenet.Load(job.image)
		if err != nil {
			return res, err
		}
		if pixels, err = imagenet.Preprocess(img); err != nil {
			return res, fmt.Errorf("image %s: %w", job.image, err)
		}
		n, h, w = 1, imagenet.CropSize, imagenet.CropSize
	} else if pixels, n, h, w, err = readPixels(job.input); err != nil {
		return res, err
	}
	ck, err := resnet.OpenCheckpoint(job.files.Weights...)
	if err != nil {
		return res, fmt.Errorf("weights: %w", err)
	}
	cfg, err := resnet.FromCheckpoint(job.model, ck)
	if err != nil {
		return res, fmt.Errorf("weights: %w", err)
	}
	if job.labels != nil && len(job.labels) != cfg.NumClasses {
		return res, fmt.Errorf("--labels has %d classes, the checkpoint's fc.weight %d", len(job.labels), cfg.NumClasses)
	}
	m, err := resnet.Load(job.dev, cfg, ck, opts)
	if err != nil {
		return res, fmt.Errorf("weights: %w", err)
	}
	defer func() { err = errors.Join(err, m.Close()) }()
	f, err := m.NewForward(n, h, w)
	if err != nil {
		return res, fmt.Errorf("input: %w", err)
	}
	defer func() { err = errors.Join(err, f.Close()) }()
	if err := f.SetPixels(pixels); err != nil {
		return res, fmt.Errorf("input: %w", err)
	}
	if err := job.dev.Sync(); err != nil {
		return res, fmt.Errorf("%s: loading: %w", job.model, err)
	}
	res.load = time.Since(start)

	start = time.Now()
	if err := f.Run(); err != nil {
		return res, err
	}
	if err := job.dev.Sync(); err != nil {
		return res, fmt.Errorf("%s: forward: %w", job.model, err)
	}
	res.forward = time.Since(start)
	logits, err := f.Logits()
	if err != nil {
		return res, fmt.Errorf("%s: logits: %w", job.model, err)
	}
	res.outputs = []safetensors.Tensor{f32Tensor("logits", logits, n, cfg.NumClasses)}
	res.batch = fmt.Sprintf("%d×3×%d×%d", n, h, w)
	if job.image == "" {
		return res, nil
	}
	top, err := imagenet.TopK(logits, job.top)
	if err != nil {
		return res, fmt.Errorf("%s on %s: %w", job.model, job.image, err)
	}
	for i, p := range top {
		name := fmt.Sprintf("class %d", p.Index)
		if job.labels != nil {
			name = fmt.Sprintf("%s (%d)", job.labels[p.Index], p.Index)
		}
		res.report = append(res.report, fmt.Sprintf("%d. %6.2f%%  %s", i+1, 100*p.Prob, name))
	}
	return res, nil
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
