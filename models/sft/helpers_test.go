package sft_test

import (
	"github.com/zbench/zbench/models/sft"
	"github.com/zbench/zbench/models/tokenizer"
)

// The tokenizer package's Tokenizer is what Format is used with.
var _ sft.Tokenizer = (*tokenizer.Tokenizer)(nil)

// byteTok is a tokenizer for tests: BOS 1, EOS 2, and each byte b as the
// id b+3, so that ids are easy to predict and a text's ids are a prefix of
// a longer text's.
type byteTok struct{ eos int }

func (byteTok) Encode(text string, addSpecial bool) []int {
	var ids []int
	if addSpecial {
		ids = append(ids, 1)
	}
	for i := 0; i < len(text); i++ {
		ids = append(ids, int(text[i])+3)
	}
	return ids
}

func (t byteTok) EOS() int { return t.eos }

// ex makes an example from ids, its labels a copy of them with the first
// masked positions set to -100.
func ex(masked int, ids ...int32) sft.Example {
	labels := append([]int32(nil), ids...)
	for i := range min(masked, len(labels)) {
		labels[i] = sft.IgnoreIndex
	}
	return sft.Example{IDs: ids, Labels: labels}
}

// seq returns n ids starting at from.
func seq(from, n int32) []int32 {
	out := make([]int32, n)
	for i := range out {
		out[i] = from + int32(i)
	}
	return out
}
