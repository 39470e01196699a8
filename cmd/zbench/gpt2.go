package main

import (
	"fmt"

	"github.com/zbench/zbench/models/gpt2"
	"github.com/zbench/zbench/models/nn"
	"github.com/zbench/zbench/models/safetensors"
)

func init() {
	register(modelEntry{name: "gpt2", inferDoc: gpt2InferDoc, load: loadGPT2, read: gpt2Inputs, dtypes: []string{"f32", "f16", "bf16"}})
}

// gpt2InputNames are the tensors of a GPT-2 input file; the first is
// required.
var gpt2InputNames = []string{"input_ids", "attention_mask"}

// loadGPT2 loads Hugging Face's GPT2LMHeadModel from the job's checkpoint:
// the logits of every position.
func loadGPT2(job inferJob) (nn.Runnable, error) {
	cfg, err := gpt2.LoadConfig(job.files.Config)
	if err != nil {
		return nil, err
	}
	prec, err := nn.ParsePrecision(job.dtype)
	if err != nil {
		return nil, err
	}
	ck, err := gpt2.OpenCheckpoint(job.files.Weights...)
	if err != nil {
		return nil, fmt.Errorf("weights: %w", err)
	}
	m, err := gpt2.Load(job.dev, cfg, ck, prec)
	if err != nil {
		return nil, fmt.Errorf("loading weights with config %s: %w", job.files.Config, err)
	}
	return m, nil
}

// gpt2Inputs reads a GPT-2 input file as the model's named inputs:
// input_ids [batch, seq] and the optional attention_mask of its shape.
func gpt2Inputs(f *safetensors.File) (map[string]nn.Values, error) {
	var ids, mask []int32
	batch, seq, err := readTokenInputs(f, gpt2InputNames, &ids, &mask)
	if err != nil {
		return nil, err
	}
	return tokenValues(batch, seq, map[string][]int32{"input_ids": ids, "attention_mask": mask}), nil
}

// gpt2InferDoc is gpt2's paragraph of infer's help.
const gpt2InferDoc = `For gpt2, IN holds input_ids [batch, seq] (I64 or I32) and optionally
attention_mask (right padding); OUT gets logits F32 [batch, seq, vocab].`
