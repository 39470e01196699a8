package main

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/zbench/zbench/kernels"
	"github.com/zbench/zbench/models/checkpoint"
	"github.com/zbench/zbench/models/llama"
	"github.com/zbench/zbench/models/nn"
	"github.com/zbench/zbench/models/safetensors"
)

// llamaInputs are the tensors of a Llama input file; the first is
// required.
var llamaInputs = []string{"input_ids", "attention_mask"}

// llamaDTypes are the precisions a Llama model runs in; auto is the
// checkpoint's torch_dtype.
var llamaDTypes = []string{"auto", "f32", "f16", "bf16"}

// llamaPrecision resolves --dtype for cfg: auto takes torch_dtype (f32 when
// absent or unknown).
func llamaPrecision(dtype string, cfg llama.Config) (nn.Precision, error) {
	if dtype == "auto" {
		for _, p := range []nn.Precision{nn.F16, nn.BF16} {
			if llama.TorchDType(p) == cfg.TorchDType {
				return p, nil
			}
		}
		return nn.F32, nil
	}
	return nn.ParsePrecision(dtype)
}

// loadLlama loads the checkpoint files on dev in dtype.
func loadLlama(dev kernels.Backend, files checkpoint.Files, dtype string) (*llama.Model, error) {
	cfg, err := llama.LoadConfig(files.Config)
	if err != nil {
		return nil, err
	}
	prec, err := llamaPrecision(dtype, cfg)
	if err != nil {
		return nil, err
	}
	ck, err := llama.OpenCheckpoint(files.Weights)
	if err != nil {
		return nil, fmt.Errorf("weights: %w", err)
	}
	m, err := llama.Load(dev, cfg, ck, prec)
	if err != nil {
		return nil, fmt.Errorf("loading weights with config %s: %w", files.Config, err)
	}
	return m, nil
}

// inferLlama runs LlamaForCausalLM: logits of every position.
func inferLlama(job inferJob) (res inferResult, err error) {
	batch, seq, in, err := readLlamaInputs(job.input)
	if err != nil {
		return res, err
	}
	start := time.Now()
	m, err := loadLlama(job.dev, job.files, job.dtype)
	if err != nil {
		return res, err
	}
	defer func() { err = errors.Join(err, m.Close()) }()
	if err := job.dev.Sync(); err != nil {
		return res, fmt.Errorf("llama: loading: %w", err)
	}
	res.load = time.Since(start)

	start = time.Now()
	logits, err := m.Forward(in, batch, seq)
	if err != nil {
		return res, fmt.Errorf("input file %q: %w", job.input.Name(), err)
	}
	res.forward = time.Since(start)
	res.outputs = []safetensors.Tensor{f32Tensor("logits", logits, batch, seq, m.Config.VocabSize)}
	res.batch = fmt.Sprintf("%d×%d", batch, seq)
	return res, nil
}

// readLlamaInputs reads input_ids [batch, seq] and the optional
// attention_mask of the same shape.
func readLlamaInputs(f *safetensors.File) (batch, seq int, in llama.Inputs, err error) {
	batch, seq, err = readTokenInputs(f, llamaInputs, &in.IDs, &in.Mask)
	return batch, seq, in, err
}

// parseIDs parses a comma-separated list of token ids.
func parseIDs(s string) ([]int, error) {
	var ids []int
	for _, f := range strings.Split(s, ",") {
		id, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil {
			return nil, fmt.Errorf("%q is not a token id", f)
		}
		ids = append(ids, id)
	}
	return ids, nil
}
