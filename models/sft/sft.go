// Package sft turns supervised fine-tuning data into training batches:
// instruction data in Stanford Alpaca's JSON format, formatted and
// tokenized as Alpaca's train.py does (github.com/tatsu-lab/stanford_alpaca),
// and pre-tokenized JSONL; then padded or packed into fixed-shape
// [batch, seq] blocks of token ids and labels.
//
// An Alpaca record becomes one Example: the prompt (Prompt, Alpaca's
// PROMPT_DICT filled in) followed by the response, tokenized with BOS,
// then EOS. Its labels copy the ids with the prompt's tokens (BOS included)
// set to IgnoreIndex (-100), so that only the response and EOS are learned.
// Labels are aligned with the ids, as Hugging Face's causal-LM models take
// them: the model shifts them by one when it computes the loss.
//
// Bad data gives an error wrapping ErrData that names the file and the
// record or line; nothing is guessed.
package sft

import (
	"errors"
	"fmt"
	"strings"
)

// ErrData is wrapped by every error about malformed fine-tuning data, for
// errors.Is.
var ErrData = errors.New("bad fine-tuning data")

// IgnoreIndex is the label of a position that is not learned (PyTorch's
// cross-entropy ignore_index, Alpaca's IGNORE_INDEX).
const IgnoreIndex = -100

// Alpaca's prompt templates (train.py's PROMPT_DICT), with {instruction}
// and {input} to fill in.
const (
	// PromptInput is the template of a record with a non-empty input.
	PromptInput = "Below is an instruction that describes a task, paired with an input that provides further context. " +
		"Write a response that appropriately completes the request.\n\n" +
		"### Instruction:\n{instruction}\n\n### Input:\n{input}\n\n### Response:"
	// PromptNoInput is the template of a record whose input is empty.
	PromptNoInput = "Below is an instruction that describes a task. " +
		"Write a response that appropriately completes the request.\n\n" +
		"### Instruction:\n{instruction}\n\n### Response:"
)

// Record is one Alpaca example.
type Record struct {
	// Instruction describes the task.
	Instruction string
	// Input is the task's context; empty when there is none.
	Input string
	// Output is the response to learn.
	Output string
}

// Prompt is the record's source text: PromptInput filled in with the
// instruction and input when the input is not empty, PromptNoInput filled
// in with the instruction otherwise. The output follows it directly (no
// space or newline in between), as in Alpaca.
func (r Record) Prompt() string {
	// Filled in at once, as Python's str.format does: braces in the
	// instruction are not placeholders.
	if r.Input != "" {
		return strings.NewReplacer("{instruction}", r.Instruction, "{input}", r.Input).Replace(PromptInput)
	}
	return strings.NewReplacer("{instruction}", r.Instruction).Replace(PromptNoInput)
}

// Tokenizer is what formatting needs. models/tokenizer's *Tokenizer
// satisfies it.
type Tokenizer interface {
	// Encode returns the ids of text; with addSpecial, with the tokens the
	// tokenizer adds around a text (BOS for Llama).
	Encode(text string, addSpecial bool) []int
	// EOS returns the end-of-sequence id, or -1 if there is none.
	EOS() int
}

// Example is one tokenized training sequence.
type Example struct {
	// IDs are the token ids.
	IDs []int32
	// Labels has one label per id: the id to learn at that position, or
	// IgnoreIndex.
	Labels []int32
}

// Tokens returns how many of the example's labels are learned (not
// IgnoreIndex).
func (e Example) Tokens() int {
	n := 0
	for _, l := range e.Labels {
		if l != IgnoreIndex {
			n++
		}
	}
	return n
}

// Format tokenizes records as Alpaca's train.py does: the ids are
// tok.Encode(r.Prompt()+r.Output, true) followed by tok.EOS(), and the
// labels are a copy of them with the first len(tok.Encode(r.Prompt(), true))
// positions set to IgnoreIndex. EOS, the last position, is always learned
// (Alpaca's mask could reach it only if the prompt alone had more tokens
// than the prompt and output together).
//
// tok must have an EOS token (EOS() ≥ 0) whose id, like every id it
// returns, fits in an int32; Format panics otherwise. Read checks this
// and returns an error instead.
func Format(tok Tokenizer, recs []Record) []Example {
	eos := tok.EOS()
	if eos < 0 || eos > maxID {
		panic(fmt.Sprintf("sft: Format: tokenizer has no usable EOS id (%d)", eos))
	}
	out := make([]Example, len(recs))
	for i, r := range recs {
		prompt := r.Prompt()
		ids := tok.Encode(prompt+r.Output, true)
		masked := min(len(tok.Encode(prompt, true)), len(ids))
		e := Example{IDs: make([]int32, len(ids)+1), Labels: make([]int32, len(ids)+1)}
		for j, id := range ids {
			if id < 0 || id > maxID {
				panic(fmt.Sprintf("sft: Format: tokenizer returned id %d", id))
			}
			e.IDs[j] = int32(id)
			e.Labels[j] = int32(id)
			if j < masked {
				e.Labels[j] = IgnoreIndex
			}
		}
		e.IDs[len(ids)] = int32(eos)
		e.Labels[len(ids)] = int32(eos)
		out[i] = e
	}
	return out
}

// maxID is the largest token id an int32 holds.
const maxID = 1<<31 - 1
