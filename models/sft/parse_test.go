package sft_test

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/zbench/zbench/models/sft"
)

func TestParseAlpaca(t *testing.T) {
	tests := []struct {
		name string
		data string
		want []sft.Record
	}{
		{"fields", `[{"instruction": "i", "input": "x", "output": "o"}]`,
			[]sft.Record{{Instruction: "i", Input: "x", Output: "o"}}},
		{"input absent", `[{"instruction": "i", "output": "o"}]`,
			[]sft.Record{{Instruction: "i", Output: "o"}}},
		{"input empty, other fields ignored, any order", "\n[ {\"output\": \"o\", \"id\": 7, \"text\": null, \"input\": \"\", \"instruction\": \"i\"},\n{\"instruction\": \"日本\", \"output\": \"é\\n🎉\"} ]\n",
			[]sft.Record{{Instruction: "i", Output: "o"}, {Instruction: "日本", Output: "é\n🎉"}}},
		{"empty strings", `[{"instruction": "", "output": ""}]`, []sft.Record{{}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := sft.ParseAlpaca("alpaca.json", []byte(tt.data))
			require.NoError(t, err)
			assert.Equal(t, tt.want, got)
		})
	}
}

func TestParseAlpacaErrors(t *testing.T) {
	tests := []struct {
		name, data, want string
	}{
		{"empty file", "", "alpaca.json: empty file: want a JSON array of records"},
		{"blank file", " \n", "alpaca.json: empty file: want a JSON array of records"},
		{"object", `{"instruction": "i", "output": "o"}`, "alpaca.json: not a JSON array of records"},
		{"jsonl", "{\"instruction\": \"i\", \"output\": \"o\"}\n{\"instruction\": \"j\", \"output\": \"p\"}\n", "alpaca.json: not a JSON array of records"},
		{"empty array", `[]`, "alpaca.json: no records"},
		{"syntax", "[\n  {\"instruction\": \"i\",\n   \"output\": \"o\",}\n]", "alpaca.json: invalid JSON at line 3, column 18: invalid character '}' looking for beginning of object key string"},
		{"truncated", `[{"instruction": "i", "output": "o"}`, "alpaca.json: invalid JSON at line 1, column 36: unexpected end of JSON input"},
		{"trailing data", `[{"instruction": "i", "output": "o"}] x`, "alpaca.json: invalid JSON at line 1, column 39: invalid character 'x' after top-level value"},
		{"record not an object", `[{"instruction": "i", "output": "o"}, "text"]`, "alpaca.json: record 1 is not a JSON object"},
		{"null record", `[null]`, "alpaca.json: record 0 is not a JSON object"},
		{"output missing", `[{"instruction": "i", "output": "o"}, {"instruction": "i", "input": "x"}]`, `alpaca.json: record 1: "output" is missing`},
		{"instruction missing", `[{"output": "o"}]`, `alpaca.json: record 0: "instruction" is missing`},
		{"output a number", `[{"instruction": "i", "output": 12}]`, `alpaca.json: record 0: "output" is not a string`},
		{"output null", `[{"instruction": "i", "output": null}]`, `alpaca.json: record 0: "output" is not a string`},
		{"input null", `[{"instruction": "i", "input": null, "output": "o"}]`, `alpaca.json: record 0: "input" is not a string`},
		{"instruction a list", `[{"instruction": ["i"], "output": "o"}]`, `alpaca.json: record 0: "instruction" is not a string`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := sft.ParseAlpaca("alpaca.json", []byte(tt.data))
			require.Error(t, err)
			assert.Nil(t, got)
			assert.ErrorIs(t, err, sft.ErrData)
			assert.Equal(t, tt.want+": bad fine-tuning data", err.Error())
		})
	}
}

func TestParseJSONL(t *testing.T) {
	tests := []struct {
		name string
		data string
		want []sft.Example
	}{
		{"labels absent: all learned", `{"input_ids": [1, 5, 2]}`,
			[]sft.Example{{IDs: []int32{1, 5, 2}, Labels: []int32{1, 5, 2}}}},
		{"labels", `{"input_ids": [1, 5, 6, 2], "labels": [-100, -100, 6, 2]}`,
			[]sft.Example{{IDs: []int32{1, 5, 6, 2}, Labels: []int32{-100, -100, 6, 2}}}},
		{"lines, blank lines, CRLF, other fields", "\n{\"input_ids\": [3], \"attention_mask\": [1]}\r\n  \n{\"labels\": [-100, 9], \"input_ids\": [0, 9]}",
			[]sft.Example{{IDs: []int32{3}, Labels: []int32{3}}, {IDs: []int32{0, 9}, Labels: []int32{-100, 9}}}},
		{"largest id", `{"input_ids": [2147483647]}`,
			[]sft.Example{{IDs: []int32{2147483647}, Labels: []int32{2147483647}}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := sft.ParseJSONL("data.jsonl", []byte(tt.data))
			require.NoError(t, err)
			assert.Equal(t, tt.want, got)
		})
	}
}

func TestParseJSONLErrors(t *testing.T) {
	tests := []struct {
		name, data, want string
	}{
		{"empty", "", "data.jsonl: no examples"},
		{"blank", "\n \n\n", "data.jsonl: no examples"},
		{"array", `[{"input_ids": [1]}]`, "data.jsonl: line 1: not a JSON object"},
		{"syntax", "{\"input_ids\": [1]}\n\n{\"input_ids\": [1,]}", "data.jsonl: line 3: invalid JSON at column 18: invalid character ']' looking for beginning of value"},
		{"two objects on a line", `{"input_ids": [1]} {"input_ids": [2]}`, "data.jsonl: line 1: invalid JSON at column 20: invalid character '{' after top-level value"},
		{"input_ids missing", `{"labels": [1]}`, `data.jsonl: line 1: "input_ids" is missing`},
		{"input_ids not an array", `{"input_ids": "1 2"}`, `data.jsonl: line 1: "input_ids" is not an array`},
		{"input_ids null", `{"input_ids": null}`, `data.jsonl: line 1: "input_ids" is not an array`},
		{"input_ids empty", `{"input_ids": []}`, `data.jsonl: line 1: "input_ids" is empty`},
		{"fraction", `{"input_ids": [1, 2.5]}`, `data.jsonl: line 1: "input_ids"[1]: 2.5 is not an integer`},
		{"exponent", `{"input_ids": [1e3]}`, `data.jsonl: line 1: "input_ids"[0]: 1e3 is not an integer`},
		{"string id", `{"input_ids": ["7"]}`, `data.jsonl: line 1: "input_ids"[0]: "7" is not an integer`},
		{"negative id", `{"input_ids": [4, -100]}`, `data.jsonl: line 1: "input_ids"[1]: -100 is negative`},
		{"id too large", `{"input_ids": [2147483648]}`, `data.jsonl: line 1: "input_ids"[0]: 2147483648 is out of range`},
		{"id far too large", `{"input_ids": [99999999999999999999]}`, `data.jsonl: line 1: "input_ids"[0]: 99999999999999999999 is out of range`},
		{"labels not an array", `{"input_ids": [1], "labels": 1}`, `data.jsonl: line 1: "labels" is not an array`},
		{"label negative", `{"input_ids": [1, 2], "labels": [-1, 2]}`, `data.jsonl: line 1: "labels"[0]: -1 is neither -100 nor a token id`},
		{"label null", `{"input_ids": [1, 2], "labels": [null, 2]}`, `data.jsonl: line 1: "labels"[0]: null is not an integer`},
		{"lengths", "{\"input_ids\": [1]}\n{\"input_ids\": [1, 2, 3], \"labels\": [-100, 2]}", `data.jsonl: line 2: 2 "labels" for 3 "input_ids"`},
		{"nothing to learn", `{"input_ids": [1, 2], "labels": [-100, -100]}`, `data.jsonl: line 1: every label is -100: nothing to learn`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := sft.ParseJSONL("data.jsonl", []byte(tt.data))
			require.Error(t, err)
			assert.Nil(t, got)
			assert.ErrorIs(t, err, sft.ErrData)
			assert.Equal(t, tt.want+": bad fine-tuning data", err.Error())
		})
	}
}

func TestRead(t *testing.T) {
	dir := t.TempDir()
	write := func(name, data string) string {
		p := filepath.Join(dir, name)
		require.NoError(t, os.WriteFile(p, []byte(data), 0o644))
		return p
	}
	alpaca := write("a.json", `[{"instruction": "i", "output": "o"}]`)
	upper := write("A.JSON", `[{"instruction": "i", "output": "o"}]`)
	jsonl := write("t.jsonl", `{"input_ids": [1, 2]}`)
	bad := write("b.json", `[]`)
	other := write("d.txt", `x`)
	tok := byteTok{eos: 2}

	want := sft.Format(tok, []sft.Record{{Instruction: "i", Output: "o"}})
	got, err := sft.Read(alpaca, tok)
	require.NoError(t, err)
	assert.Equal(t, want, got)
	got, err = sft.Read(upper, tok)
	require.NoError(t, err)
	assert.Equal(t, want, got)
	got, err = sft.Read(jsonl, nil)
	require.NoError(t, err)
	assert.Equal(t, []sft.Example{{IDs: []int32{1, 2}, Labels: []int32{1, 2}}}, got)

	errs := []struct {
		name, path string
		tok        sft.Tokenizer
		want       string
		data       bool
	}{
		{"no tokenizer", alpaca, nil, "sft: " + alpaca + ": Alpaca data needs a tokenizer", false},
		{"no EOS", alpaca, byteTok{eos: -1}, "sft: " + alpaca + ": the tokenizer has no EOS token to end examples with", false},
		{"bad data names the file", bad, tok, bad + ": no records: bad fine-tuning data", true},
		{"extension", other, tok, "sft: " + other + `: unknown extension ".txt": want .json (Alpaca) or .jsonl (pre-tokenized)`, false},
	}
	for _, tt := range errs {
		t.Run(tt.name, func(t *testing.T) {
			_, err := sft.Read(tt.path, tt.tok)
			require.Error(t, err)
			assert.Equal(t, tt.want, err.Error())
			assert.Equal(t, tt.data, errors.Is(err, sft.ErrData))
		})
	}
	_, err = sft.Read(filepath.Join(dir, "missing.jsonl"), nil)
	assert.ErrorIs(t, err, os.ErrNotExist)
	_, err = sft.ReadAlpaca(filepath.Join(dir, "missing.json"))
	assert.ErrorIs(t, err, os.ErrNotExist)
}
