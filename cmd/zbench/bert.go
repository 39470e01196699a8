package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"

	"github.com/zbench/zbench/models/bert"
	"github.com/zbench/zbench/models/checkpoint"
	"github.com/zbench/zbench/models/nn"
	"github.com/zbench/zbench/models/quant"
	"github.com/zbench/zbench/models/safetensors"
)

func init() {
	register(modelEntry{name: "bert", inferDoc: bertInferDoc, load: loadBERT, read: bertInputValues, dtypes: []string{"f32", "f16", "bf16", "mixed"},
		quantize: quantizeBERT, schemes: []quant.Scheme{quant.W8A8}, calib: true, defaultSize: 128,
		quantizeFlags: append([]string{"config", "seq"}, calibrationFlags...)})
}

// bertInputs are the tensors of a BERT input file; the first is required.
var bertInputs = []string{"input_ids", "attention_mask", "token_type_ids"}

// loadBERT loads Hugging Face's BertModel from the job's checkpoint:
// last_hidden_state and pooler_output.
func loadBERT(job inferJob) (nn.Runnable, error) {
	if job.files.Sharded() {
		return nil, fmt.Errorf("weights: %s lists %d shards; the bert loader reads one file: save the checkpoint unsharded, as %s", job.files.Index, len(job.files.Weights), checkpoint.WeightsName)
	}
	cfg, err := bert.LoadConfig(job.files.Config)
	if err != nil {
		return nil, err
	}
	prec, err := nn.ParsePrecision(job.dtype)
	if err != nil {
		return nil, err
	}
	ck, err := bert.OpenCheckpoint(job.files.Weights[0])
	if err != nil {
		return nil, fmt.Errorf("weights: %w", err)
	}
	m, err := bert.Load(job.dev, cfg, ck, prec)
	if err != nil {
		return nil, fmt.Errorf("loading weights with config %s: %w", job.files.Config, err)
	}
	return m, nil
}

// bertInputValues reads a BERT input file as the model's named inputs.
func bertInputValues(f *safetensors.File) (map[string]nn.Values, error) {
	batch, seq, in, err := readBERTInputs(f)
	if err != nil {
		return nil, err
	}
	return tokenValues(batch, seq, map[string][]int32{"input_ids": in.IDs, "attention_mask": in.Mask, "token_type_ids": in.TypeIDs}), nil
}

// tokenValues are the named token inputs of shape [batch, seq] that are
// not nil.
func tokenValues(batch, seq int, in map[string][]int32) map[string]nn.Values {
	out := map[string]nn.Values{}
	for name, v := range in {
		if v != nil {
			out[name] = nn.Values{Shape: []int{batch, seq}, I32: v}
		}
	}
	return out
}

// readBERTInputs reads input_ids [batch, seq] and the optional
// attention_mask and token_type_ids of the same shape.
func readBERTInputs(f *safetensors.File) (batch, seq int, in bert.Inputs, err error) {
	batch, seq, err = readTokenInputs(f, bertInputs, &in.IDs, &in.Mask, &in.TypeIDs)
	return batch, seq, in, err
}

// readTokenInputs reads the integer tensors named (input_ids [batch, seq],
// required, then optional ones of its shape) into dst, in order; any other
// tensor of f is an error.
func readTokenInputs(f *safetensors.File, names []string, dst ...*[]int32) (batch, seq int, err error) {
	if err := checkNames(f, names); err != nil {
		return 0, 0, err
	}
	ids, shape, ok, err := intTensor(f, names[0])
	switch {
	case err != nil:
		return 0, 0, err
	case !ok:
		return 0, 0, fmt.Errorf("input file %q: no tensor %q (want %s [batch, seq], optionally %s)",
			f.Name(), names[0], names[0], strings.Join(names[1:], " and "))
	case len(shape) != 2:
		return 0, 0, fmt.Errorf("input file %q: tensor %q has shape %v, want 2-D [batch, seq]", f.Name(), names[0], shape)
	case shape[0] == 0 || shape[1] == 0:
		return 0, 0, fmt.Errorf("input file %q: tensor %q has shape %v, want batch and seq > 0", f.Name(), names[0], shape)
	}
	*dst[0] = ids
	for i, name := range names[1:] {
		v, s, ok, err := intTensor(f, name)
		if err != nil {
			return 0, 0, err
		}
		if !ok {
			continue
		}
		if !slices.Equal(s, shape) {
			return 0, 0, fmt.Errorf("input file %q: tensor %q has shape %v, want %v as %s", f.Name(), name, s, shape, names[0])
		}
		*dst[i+1] = v
	}
	return shape[0], shape[1], nil
}

// quantizeBERT calibrates and quantizes a BERT model and writes it.
func quantizeBERT(j quantizeJob) (rep quantizeReport, err error) {
	cfg, src, cfgPath, err := quantizeSource(j.weights, j.config)
	if err != nil {
		return rep, err
	}
	cal, b, err := calibrationBatches(cfg, j.calib, j.batches, j.batch, j.seq)
	if err != nil {
		return rep, err
	}
	cal.NewObserver = j.newObserver
	if err := os.MkdirAll(j.out, 0o755); err != nil {
		return rep, fmt.Errorf("--out: %w", err)
	}
	m, err := bert.Load(j.dev, cfg, src, nn.F32)
	if err != nil {
		return rep, fmt.Errorf("loading weights: %w", err)
	}
	defer func() { err = errors.Join(err, m.Close()) }()
	eval := tokenValues(b.batch, b.seq, map[string][]int32{"input_ids": b.in.IDs, "attention_mask": b.in.Mask, "token_type_ids": b.in.TypeIDs})
	layers, elapsed, outs, err := quantizeMeasured(m, eval, func() ([]quant.LinearReport, error) { return m.Quantize(cal) })
	if err != nil {
		return rep, err
	}
	rep = newQuantizeReport(j, "bert", layers, elapsed, "f32")
	rep.Method, rep.Batches, rep.Batch, rep.Seq, rep.Percentile = j.method, len(cal.Batches), cal.Batch, cal.Seq, j.percentile()
	rep.Outputs = outs
	tensors, err := m.QuantizedTensors()
	if err != nil {
		return rep, err
	}
	raw := map[string]json.RawMessage{}
	if cfgPath == "" {
		data, err := json.Marshal(m.Config)
		if err != nil {
			return rep, err
		}
		if err := json.Unmarshal(data, &raw); err != nil {
			return rep, err
		}
		raw["model_type"], raw["architectures"] = json.RawMessage(`"bert"`), json.RawMessage(`["BertModel"]`)
	} else if raw, err = readConfigJSON(cfgPath); err != nil {
		return rep, err
	}
	qc, err := json.Marshal(quant.NewConfig(quant.Spec{Scheme: quant.W8A8, Method: j.method, Ignore: bert.QuantIgnored()}))
	if err != nil {
		return rep, err
	}
	raw["quantization_config"] = qc
	return rep, writeQuantized(j.out, tensors, raw, rep)
}

// quantizeSource resolves --weights and --config: the config, the
// weights and the config.json file to extend ("" for synthetic weights
// without --config).
func quantizeSource(weights, config string) (bert.Config, nn.Source, string, error) {
	if rest, ok := strings.CutPrefix(weights, "synthetic"); ok && (rest == "" || rest[0] == ':') {
		seed := uint64(20261121) // the benchmarks' seed
		if rest != "" {
			s, err := strconv.ParseUint(rest[1:], 10, 64)
			if err != nil {
				return bert.Config{}, nil, "", usageErrorf("--weights %s: the seed must be an unsigned integer", weights)
			}
			seed = s
		}
		cfg := bert.Base()
		if config != "" {
			c, err := bert.LoadConfig(config)
			if err != nil {
				return bert.Config{}, nil, "", err
			}
			cfg = c
		}
		return cfg, bert.Synthetic(seed), config, nil
	}
	files, err := checkpoint.Resolve(weights, config)
	if err != nil {
		return bert.Config{}, nil, "", err
	}
	if files.Sharded() {
		return bert.Config{}, nil, "", fmt.Errorf("weights: %s lists %d shards; the bert loader reads one file", files.Index, len(files.Weights))
	}
	cfg, err := bert.LoadConfig(files.Config)
	if err != nil {
		return bert.Config{}, nil, "", err
	}
	if cfg.Quant != "" {
		return bert.Config{}, nil, "", fmt.Errorf("config %s: the checkpoint is already quantized (%s)", files.Config, cfg.Quant)
	}
	ck, err := bert.OpenCheckpoint(files.Weights[0])
	if err != nil {
		return bert.Config{}, nil, "", fmt.Errorf("weights: %w", err)
	}
	return cfg, ck, files.Config, nil
}

// calibrationBatches returns the calibration and the evaluation batch:
// synthetic ids (seeded, the evaluation batch apart from the calibration),
// or the rows of a file, batch at a time, the first batch also the
// evaluation batch.
func calibrationBatches(cfg bert.Config, calib string, batches, batch, seq int) (bert.Calibration, bertBatch, error) {
	cal := bert.Calibration{Batch: batch, Seq: seq}
	if calib == "synthetic" {
		if seq > cfg.MaxPositionEmbeddings {
			return cal, bertBatch{}, usageErrorf("--seq %d exceeds the model's max_position_embeddings %d", seq, cfg.MaxPositionEmbeddings)
		}
		for i := range batches {
			cal.Batches = append(cal.Batches, bert.Inputs{IDs: syntheticIDs(uint64(i+1), batch*seq, cfg.VocabSize)})
		}
		return cal, bertBatch{bert.Inputs{IDs: syntheticIDs(0, batch*seq, cfg.VocabSize)}, batch, seq}, nil
	}
	f, err := safetensors.Open(calib)
	if err != nil {
		return cal, bertBatch{}, fmt.Errorf("--calib: %w", err)
	}
	rows, s, in, err := readBERTInputs(f)
	if err != nil {
		return cal, bertBatch{}, fmt.Errorf("--calib: %w", err)
	}
	if rows < batch {
		return cal, bertBatch{}, fmt.Errorf("--calib %s: %d rows, fewer than --batch %d", calib, rows, batch)
	}
	cal.Seq = s
	rowsOf := func(v []int32, r int) []int32 {
		if v == nil {
			return nil
		}
		return v[r*s : (r+batch)*s]
	}
	for r := 0; r+batch <= rows && len(cal.Batches) < batches; r += batch {
		cal.Batches = append(cal.Batches, bert.Inputs{IDs: rowsOf(in.IDs, r), Mask: rowsOf(in.Mask, r), TypeIDs: rowsOf(in.TypeIDs, r)})
	}
	return cal, bertBatch{cal.Batches[0], batch, s}, nil
}

// syntheticIDs returns n token ids below vocab from a seeded generator.
func syntheticIDs(seed uint64, n, vocab int) []int32 {
	ids := make([]int32, n)
	x := seed*0x9e3779b97f4a7c15 + 1
	for i := range ids {
		x ^= x << 13
		x ^= x >> 7
		x ^= x << 17
		ids[i] = int32(x % uint64(vocab))
	}
	return ids
}

// bertBatch is one batch of BERT inputs with its shape.
type bertBatch struct {
	in         bert.Inputs
	batch, seq int
}

// bertInferDoc is bert's paragraph of infer's help.
const bertInferDoc = `For bert, IN holds input_ids [batch, seq] (I64 or I32) and optionally
attention_mask (right padding) and token_type_ids of the same shape; OUT gets
last_hidden_state F32 [batch, seq, hidden] and pooler_output F32 [batch,
hidden].`
