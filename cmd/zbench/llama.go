package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/zbench/zbench/kernels"
	"github.com/zbench/zbench/models/checkpoint"
	"github.com/zbench/zbench/models/gguf"
	"github.com/zbench/zbench/models/llama"
	"github.com/zbench/zbench/models/nn"
	"github.com/zbench/zbench/models/quant"
	"github.com/zbench/zbench/models/safetensors"
)

func init() {
	register(modelEntry{name: "llama", inferDoc: llamaInferDoc, load: loadLlamaRunnable, read: llamaInputValues, dtypes: llamaDTypes,
		quantize: quantizeLlama, schemes: []quant.Scheme{quant.W8A8, quant.W8A16, quant.W4A16, quant.NF4, quant.FP8}, defaultSize: 128,
		quantizeFlags: []string{"config", "dtype", "seq"}, generates: true})
}

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

// loadLlama loads the checkpoint files (or the one GGUF file) on dev in
// dtype.
func loadLlama(dev kernels.Backend, files checkpoint.Files, dtype string) (*llama.Model, error) {
	if len(files.Weights) == 1 && isGGUF(files.Weights[0]) {
		m, _, _, err := loadLlamaGGUF(dev, files.Weights[0], dtype, true)
		return m, err
	}
	cfg, err := llama.LoadConfig(files.Config)
	if err != nil {
		return nil, err
	}
	prec, err := llamaPrecision(dtype, cfg)
	if err != nil {
		return nil, err
	}
	ck, err := llama.OpenCheckpoint(files.Weights...)
	if err != nil {
		return nil, fmt.Errorf("weights: %w", err)
	}
	m, err := llama.Load(dev, cfg, ck, prec)
	if err != nil {
		return nil, fmt.Errorf("loading weights with config %s: %w", files.Config, err)
	}
	return m, nil
}

// loadLlamaRunnable loads LlamaForCausalLM from the job's checkpoint:
// the logits of every position.
func loadLlamaRunnable(job inferJob) (nn.Runnable, error) {
	m, err := loadLlama(job.dev, job.files, job.dtype)
	if err != nil {
		return nil, err
	}
	return m, nil
}

// llamaInputValues reads a Llama input file as the model's named inputs.
func llamaInputValues(f *safetensors.File) (map[string]nn.Values, error) {
	batch, seq, in, err := readLlamaInputs(f)
	if err != nil {
		return nil, err
	}
	return tokenValues(batch, seq, map[string][]int32{"input_ids": in.IDs, "attention_mask": in.Mask}), nil
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

// quantizeLlama quantizes a Llama model's decoder layers in j's scheme and
// writes it, with the source checkpoint's tokenizer and generation files.
func quantizeLlama(j quantizeJob) (rep quantizeReport, err error) {
	cfg, src, files, closeSrc, err := llamaQuantizeSource(j.weights, j.config)
	if err != nil {
		return rep, err
	}
	defer func() { err = errors.Join(err, closeSrc()) }()
	prec, err := llamaPrecision(j.dtype, cfg)
	if err != nil {
		return rep, err
	}
	batch, seq, in, err := llamaEvalBatch(cfg, j.calib, j.seq)
	if err != nil {
		return rep, err
	}
	if err := os.MkdirAll(j.out, 0o755); err != nil {
		return rep, fmt.Errorf("--out: %w", err)
	}
	m, err := llama.Load(j.dev, cfg, src, prec)
	if err != nil {
		return rep, fmt.Errorf("loading weights: %w", err)
	}
	defer func() { err = errors.Join(err, m.Close()) }()
	eval := tokenValues(batch, seq, map[string][]int32{"input_ids": in.IDs, "attention_mask": in.Mask})
	layers, elapsed, outs, err := quantizeMeasured(m, eval, func() ([]quant.LinearReport, error) {
		if f, ok := j.scheme.WeightOnly(); ok {
			return m.QuantizeWeights(f, j.group)
		}
		if j.scheme == quant.FP8 {
			return m.QuantizeFP8()
		}
		return m.Quantize()
	})
	if err != nil {
		return rep, err
	}
	rep = newQuantizeReport(j, "llama", layers, elapsed, prec.String())
	rep.Batches, rep.Batch, rep.Seq = 1, batch, seq
	if j.scheme == quant.W4A16 || j.scheme == quant.NF4 {
		rep.Group = j.group
	}
	rep.Outputs = outs
	tensors, err := m.QuantizedTensors()
	if err != nil {
		return rep, err
	}
	raw, err := llamaConfigJSON(m.Config, files.Config)
	if err != nil {
		return rep, err
	}
	// The float tensors are written in the model's precision.
	if raw["torch_dtype"], err = json.Marshal(llama.TorchDType(prec)); err != nil {
		return rep, err
	}
	if err := writeQuantized(j.out, tensors, raw, rep); err != nil {
		return rep, err
	}
	return rep, copyCheckpointExtras(files, j.out)
}

// llamaQuantizeSource resolves --weights and --config for a Llama: the
// config, the weights, the checkpoint's files (none for synthetic weights
// and GGUF files) and what closes the weights' file once they are read.
func llamaQuantizeSource(weights, config string) (llama.Config, nn.Source, checkpoint.Files, func() error, error) {
	none := func() error { return nil }
	if rest, ok := strings.CutPrefix(weights, "synthetic"); ok && (rest == "" || rest[0] == ':') {
		seed := uint64(tinyLlamaSeed)
		if rest != "" {
			s, err := strconv.ParseUint(rest[1:], 10, 64)
			if err != nil {
				return llama.Config{}, nil, checkpoint.Files{}, none, usageErrorf("--weights %s: the seed must be an unsigned integer", weights)
			}
			seed = s
		}
		cfg := llama.TinyLlama()
		files := checkpoint.Files{Config: config}
		if config != "" {
			c, err := llama.LoadConfig(config)
			if err != nil {
				return llama.Config{}, nil, files, none, err
			}
			cfg = c
		}
		if cfg.Quant != nil {
			return llama.Config{}, nil, files, none, fmt.Errorf("config %s is already quantized (%s)", config, cfg.Quant.Scheme)
		}
		return cfg, llama.Synthetic(seed), files, none, nil
	}
	if isGGUF(weights) {
		if config != "" {
			return llama.Config{}, nil, checkpoint.Files{}, none, usageErrorf("--config: the GGUF file %s carries its own config", weights)
		}
		l, err := gguf.OpenLlama(weights)
		if err != nil {
			return llama.Config{}, nil, checkpoint.Files{}, none, err
		}
		return l.Config, l, checkpoint.Files{}, l.Close, nil
	}
	files, err := checkpoint.Resolve(weights, config)
	if err != nil {
		return llama.Config{}, nil, files, none, err
	}
	cfg, err := llama.LoadConfig(files.Config)
	if err != nil {
		return llama.Config{}, nil, files, none, err
	}
	if cfg.Quant != nil {
		return llama.Config{}, nil, files, none, fmt.Errorf("config %s: the checkpoint is already quantized (%s)", files.Config, cfg.Quant.Scheme)
	}
	ck, err := llama.OpenCheckpoint(files.Weights...)
	if err != nil {
		return llama.Config{}, nil, files, none, fmt.Errorf("weights: %w", err)
	}
	return cfg, ck, files, none, nil
}

// llamaEvalBatch is the batch the quantized model's logits are compared
// on: seq seeded ids, or a file's input_ids (and attention_mask).
func llamaEvalBatch(cfg llama.Config, calib string, seq int) (batch, n int, in llama.Inputs, err error) {
	if calib == "synthetic" {
		if seq > cfg.MaxPositionEmbeddings {
			return 0, 0, in, usageErrorf("--seq %d exceeds the model's max_position_embeddings %d", seq, cfg.MaxPositionEmbeddings)
		}
		return 1, seq, llama.Inputs{IDs: syntheticIDs(0, seq, cfg.VocabSize)}, nil
	}
	f, err := safetensors.Open(calib)
	if err != nil {
		return 0, 0, in, fmt.Errorf("--calib: %w", err)
	}
	if batch, n, in, err = readLlamaInputs(f); err != nil {
		return 0, 0, in, fmt.Errorf("--calib %s: %w", calib, err)
	}
	return batch, n, in, nil
}

// llamaConfigJSON is the quantized checkpoint's config.json: the source's
// keys (all of them, when there is one) with cfg's quantization_config.
func llamaConfigJSON(cfg llama.Config, path string) (map[string]json.RawMessage, error) {
	raw := map[string]json.RawMessage{}
	if path == "" {
		data, err := cfg.JSON()
		if err != nil {
			return nil, err
		}
		return raw, json.Unmarshal(data, &raw)
	}
	raw, err := readConfigJSON(path)
	if err != nil {
		return nil, err
	}
	if raw["quantization_config"], err = json.Marshal(quant.NewConfig(*cfg.Quant)); err != nil {
		return nil, err
	}
	return raw, nil
}

// copyCheckpointExtras copies the tokenizer and generation files of the
// checkpoint files (if any) into dir.
func copyCheckpointExtras(files checkpoint.Files, dir string) error {
	if len(files.Weights) == 0 {
		return nil
	}
	src := filepath.Dir(files.Weights[0])
	for _, name := range checkpointExtras {
		if name == checkpoint.ConfigName || name == checkpoint.IndexName {
			continue
		}
		if err := copyFile(filepath.Join(src, name), filepath.Join(dir, name)); err != nil && !errors.Is(err, os.ErrNotExist) {
			return err
		}
	}
	return nil
}

// llamaInferDoc is llama's paragraph of infer's help.
const llamaInferDoc = `For llama, IN holds input_ids [batch, seq] (I64 or I32) and optionally
attention_mask (padding on the left or the right); OUT gets logits F32
[batch, seq, vocab], zero at padded positions. --dtype auto (llama only)
takes the checkpoint's torch_dtype.`
