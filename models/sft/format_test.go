package sft_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/zbench/zbench/models/sft"
)

func TestPrompt(t *testing.T) {
	tests := []struct {
		name string
		rec  sft.Record
		want string
	}{
		{"no input", sft.Record{Instruction: "Name a color.", Output: "Red."},
			"Below is an instruction that describes a task. Write a response that appropriately completes the request.\n\n" +
				"### Instruction:\nName a color.\n\n### Response:"},
		{"input", sft.Record{Instruction: "Translate.", Input: "chat", Output: "cat"},
			"Below is an instruction that describes a task, paired with an input that provides further context. " +
				"Write a response that appropriately completes the request.\n\n" +
				"### Instruction:\nTranslate.\n\n### Input:\nchat\n\n### Response:"},
		{"whitespace input counts", sft.Record{Instruction: "x", Input: " "},
			"Below is an instruction that describes a task, paired with an input that provides further context. " +
				"Write a response that appropriately completes the request.\n\n" +
				"### Instruction:\nx\n\n### Input:\n \n\n### Response:"},
		{"braces are text", sft.Record{Instruction: "say {input}", Input: "{instruction}"},
			"Below is an instruction that describes a task, paired with an input that provides further context. " +
				"Write a response that appropriately completes the request.\n\n" +
				"### Instruction:\nsay {input}\n\n### Input:\n{instruction}\n\n### Response:"},
		{"empty", sft.Record{},
			"Below is an instruction that describes a task. Write a response that appropriately completes the request.\n\n" +
				"### Instruction:\n\n\n### Response:"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, tt.rec.Prompt())
		})
	}
}

func TestFormat(t *testing.T) {
	tok := byteTok{eos: 2}
	tests := []struct {
		name string
		rec  sft.Record
	}{
		{"no input", sft.Record{Instruction: "Name a color.", Output: "Red."}},
		{"input", sft.Record{Instruction: "Translate.", Input: "chat", Output: "cat"}},
		{"empty output", sft.Record{Instruction: "Say nothing."}},
		{"multi-line non-ASCII", sft.Record{Instruction: "日本", Output: "é\n🎉\n"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := sft.Format(tok, []sft.Record{tt.rec})
			require.Len(t, got, 1)
			e := got[0]
			prompt := tok.Encode(tt.rec.Prompt(), true)
			full := tok.Encode(tt.rec.Prompt()+tt.rec.Output, true)
			require.Len(t, e.IDs, len(full)+1)
			require.Len(t, e.Labels, len(e.IDs))
			assert.Equal(t, int32(1), e.IDs[0], "BOS first")
			assert.Equal(t, int32(2), e.IDs[len(e.IDs)-1], "EOS last")
			assert.Equal(t, int32(2), e.Labels[len(e.Labels)-1], "EOS learned")
			for i, id := range full {
				assert.Equal(t, int32(id), e.IDs[i])
				if i < len(prompt) {
					assert.Equal(t, int32(sft.IgnoreIndex), e.Labels[i], "prompt position %d masked", i)
				} else {
					assert.Equal(t, int32(id), e.Labels[i], "response position %d learned", i)
				}
			}
			assert.Equal(t, len(tt.rec.Output)+1, e.Tokens(), "the response's bytes and EOS are learned")
		})
	}
}

// shrinkTok encodes a text ending in "!" as BOS alone: a prompt longer in
// tokens than prompt and output together.
type shrinkTok struct{ byteTok }

func (t shrinkTok) Encode(text string, addSpecial bool) []int {
	if strings.HasSuffix(text, "!") {
		return []int{1}
	}
	return t.byteTok.Encode(text, addSpecial)
}

func TestFormatKeepsEOS(t *testing.T) {
	got := sft.Format(shrinkTok{byteTok{eos: 2}}, []sft.Record{{Instruction: "i", Output: "!"}})
	require.Len(t, got, 1)
	assert.Equal(t, sft.Example{IDs: []int32{1, 2}, Labels: []int32{-100, 2}}, got[0])
}

func TestFormatNoEOS(t *testing.T) {
	assert.PanicsWithValue(t, "sft: Format: tokenizer has no usable EOS id (-1)", func() {
		sft.Format(byteTok{eos: -1}, []sft.Record{{Instruction: "i"}})
	})
	assert.Empty(t, sft.Format(byteTok{eos: 2}, nil))
}
