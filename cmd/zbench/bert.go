package main

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/zbench/zbench/models/bert"
	"github.com/zbench/zbench/models/checkpoint"
	"github.com/zbench/zbench/models/nn"
	"github.com/zbench/zbench/models/safetensors"
)

// bertInputs are the tensors of a BERT input file; the first is required.
var bertInputs = []string{"input_ids", "attention_mask", "token_type_ids"}

// inferBERT runs Hugging Face's BertModel: last_hidden_state and
// pooler_output.
func inferBERT(job inferJob) (res inferResult, err error) {
	if job.files.Sharded() {
		return res, fmt.Errorf("weights: %s lists %d shards; the bert loader reads one file: save the checkpoint unsharded, as %s", job.files.Index, len(job.files.Weights), checkpoint.WeightsName)
	}
	cfg, err := bert.LoadConfig(job.files.Config)
	if err != nil {
		return res, err
	}
	batch, seq, in, err := readBERTInputs(job.input)
	if err != nil {
		return res, err
	}
	prec, err := nn.ParsePrecision(job.dtype)
	if err != nil {
		return res, err
	}

	start := time.Now()
	ck, err := bert.OpenCheckpoint(job.files.Weights[0])
	if err != nil {
		return res, fmt.Errorf("weights: %w", err)
	}
	m, err := bert.Load(job.dev, cfg, ck, prec)
	if err != nil {
		return res, fmt.Errorf("loading weights with config %s: %w", job.files.Config, err)
	}
	defer func() { err = errors.Join(err, m.Close()) }()
	f, err := m.NewForward(batch, seq)
	if err != nil {
		return res, fmt.Errorf("input file %q: %w", job.input.Name(), err)
	}
	defer func() { err = errors.Join(err, f.Close()) }()
	if err := f.SetInputs(in); err != nil {
		return res, fmt.Errorf("input file %q: %w", job.input.Name(), err)
	}
	if err := job.dev.Sync(); err != nil {
		return res, fmt.Errorf("bert: loading: %w", err)
	}
	res.load = time.Since(start)

	start = time.Now()
	if err := f.Run(); err != nil {
		return res, err
	}
	if err := job.dev.Sync(); err != nil {
		return res, fmt.Errorf("bert: forward: %w", err)
	}
	res.forward = time.Since(start)

	hidden, err := f.LastHidden()
	if err != nil {
		return res, fmt.Errorf("bert: last_hidden_state: %w", err)
	}
	pooled, err := f.Pooled()
	if err != nil {
		return res, fmt.Errorf("bert: pooler_output: %w", err)
	}
	H := cfg.HiddenSize
	res.outputs = []safetensors.Tensor{
		f32Tensor("last_hidden_state", hidden, batch, seq, H),
		f32Tensor("pooler_output", pooled, batch, H),
	}
	res.batch = fmt.Sprintf("%d×%d", batch, seq)
	return res, nil
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
