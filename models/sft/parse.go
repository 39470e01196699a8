package sft

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// ParseAlpaca reads the bytes of an Alpaca JSON file: a JSON array of
// objects with "instruction" and "output" strings and an optional "input"
// string (absent is the same as ""); other fields are ignored. name is the
// file's name for error messages. Errors wrap ErrData and name the file and
// the record by its index in the array (from 0) and field, such as
// `alpaca.json: record 12: "output" is missing`. An empty array is an
// error.
func ParseAlpaca(name string, data []byte) ([]Record, error) {
	fail := func(format string, args ...any) error {
		return fmt.Errorf("%s: %s: %w", name, fmt.Sprintf(format, args...), ErrData)
	}
	var raw []json.RawMessage
	if first := firstByte(data); first != '[' {
		if first == 0 {
			return nil, fail("empty file: want a JSON array of records")
		}
		return nil, fail("not a JSON array of records")
	}
	if err := json.Unmarshal(data, &raw); err != nil {
		return nil, fail("%s", jsonError(data, err, true))
	}
	if len(raw) == 0 {
		return nil, fail("no records")
	}
	recs := make([]Record, len(raw))
	for i, msg := range raw {
		if firstByte(msg) != '{' {
			return nil, fail("record %d is not a JSON object", i)
		}
		var fields map[string]json.RawMessage
		if err := json.Unmarshal(msg, &fields); err != nil {
			return nil, fail("record %d: %v", i, err)
		}
		str := func(key string, required bool) (string, error) {
			v, ok := fields[key]
			if !ok {
				if required {
					return "", fail("record %d: %q is missing", i, key)
				}
				return "", nil
			}
			var s string
			if firstByte(v) != '"' || json.Unmarshal(v, &s) != nil {
				return "", fail("record %d: %q is not a string", i, key)
			}
			return s, nil
		}
		var err error
		r := &recs[i]
		if r.Instruction, err = str("instruction", true); err != nil {
			return nil, err
		}
		if r.Input, err = str("input", false); err != nil {
			return nil, err
		}
		if r.Output, err = str("output", true); err != nil {
			return nil, err
		}
	}
	return recs, nil
}

// ReadAlpaca reads an Alpaca JSON file (see ParseAlpaca).
func ReadAlpaca(path string) ([]Record, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("sft: %w", err)
	}
	return ParseAlpaca(path, data)
}

// ParseJSONL reads pre-tokenized data: one JSON object per line with
// "input_ids", an array of token ids (integers ≥ 0 that fit in an int32),
// and optionally "labels", an array of as many labels, each IgnoreIndex
// (-100) or a token id; without "labels" every id is learned (a copy of
// input_ids, as causal-LM training does). Other fields are ignored, blank
// lines are skipped, and every line must have at least one label other
// than IgnoreIndex. name is the file's name for error messages. Errors wrap
// ErrData and name the file and the line (from 1); data with no example is
// an error.
func ParseJSONL(name string, data []byte) ([]Example, error) {
	var out []Example
	for n := 1; len(data) > 0; n++ {
		var line []byte
		line, data, _ = bytes.Cut(data, []byte("\n"))
		line = bytes.TrimSpace(line)
		if len(line) == 0 {
			continue
		}
		e, err := parseLine(line)
		if err != nil {
			return nil, fmt.Errorf("%s: line %d: %s: %w", name, n, err, ErrData)
		}
		out = append(out, e)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%s: no examples: %w", name, ErrData)
	}
	return out, nil
}

// parseLine reads one line of pre-tokenized JSONL.
func parseLine(line []byte) (Example, error) {
	if line[0] != '{' {
		return Example{}, errors.New("not a JSON object")
	}
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(line, &fields); err != nil {
		return Example{}, errors.New(jsonError(line, err, false))
	}
	rawIDs, ok := fields["input_ids"]
	if !ok {
		return Example{}, errors.New(`"input_ids" is missing`)
	}
	ids, err := ints("input_ids", rawIDs, false)
	if err != nil {
		return Example{}, err
	}
	if len(ids) == 0 {
		return Example{}, errors.New(`"input_ids" is empty`)
	}
	e := Example{IDs: ids}
	if rawLabels, ok := fields["labels"]; ok {
		if e.Labels, err = ints("labels", rawLabels, true); err != nil {
			return Example{}, err
		}
		if len(e.Labels) != len(ids) {
			return Example{}, fmt.Errorf(`%d "labels" for %d "input_ids"`, len(e.Labels), len(ids))
		}
	} else {
		e.Labels = append([]int32(nil), ids...)
	}
	if e.Tokens() == 0 {
		return Example{}, fmt.Errorf(`every label is %d: nothing to learn`, IgnoreIndex)
	}
	return e, nil
}

// ints reads a JSON array of token ids (labels: or IgnoreIndex) named key.
func ints(key string, raw json.RawMessage, labels bool) ([]int32, error) {
	var elems []json.RawMessage
	if firstByte(raw) != '[' || json.Unmarshal(raw, &elems) != nil {
		return nil, fmt.Errorf("%q is not an array", key)
	}
	out := make([]int32, len(elems))
	for i, el := range elems {
		s := string(bytes.TrimSpace(el))
		v, err := strconv.ParseInt(s, 10, 64)
		switch {
		case errors.Is(err, strconv.ErrRange):
			return nil, fmt.Errorf("%q[%d]: %s is out of range", key, i, s)
		case err != nil:
			return nil, fmt.Errorf("%q[%d]: %s is not an integer", key, i, s)
		case labels && v == IgnoreIndex:
		case v < 0:
			if labels {
				return nil, fmt.Errorf("%q[%d]: %d is neither %d nor a token id", key, i, v, IgnoreIndex)
			}
			return nil, fmt.Errorf("%q[%d]: %d is negative", key, i, v)
		case v > maxID:
			return nil, fmt.Errorf("%q[%d]: %d is out of range", key, i, v)
		}
		out[i] = int32(v)
	}
	return out, nil
}

// ReadJSONL reads a pre-tokenized JSONL file (see ParseJSONL).
func ReadJSONL(path string) ([]Example, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("sft: %w", err)
	}
	return ParseJSONL(path, data)
}

// Read reads fine-tuning examples from path, by its extension: a .json file
// is Alpaca data, formatted with tok (see Format); a .jsonl file is
// pre-tokenized (see ParseJSONL) and tok is not used. Any other extension
// is an error, as is a .json file with a nil tok or one without EOS.
func Read(path string, tok Tokenizer) ([]Example, error) {
	switch ext := strings.ToLower(filepath.Ext(path)); ext {
	case ".json":
		if tok == nil {
			return nil, fmt.Errorf("sft: %s: Alpaca data needs a tokenizer", path)
		}
		if eos := tok.EOS(); eos < 0 || eos > maxID {
			return nil, fmt.Errorf("sft: %s: the tokenizer has no EOS token to end examples with", path)
		}
		recs, err := ReadAlpaca(path)
		if err != nil {
			return nil, err
		}
		return Format(tok, recs), nil
	case ".jsonl":
		return ReadJSONL(path)
	default:
		return nil, fmt.Errorf("sft: %s: unknown extension %q: want .json (Alpaca) or .jsonl (pre-tokenized)", path, ext)
	}
}

// firstByte returns the first byte of data that is not JSON whitespace, or
// 0 if there is none.
func firstByte(data []byte) byte {
	data = bytes.TrimLeft(data, " \t\r\n")
	if len(data) == 0 {
		return 0
	}
	return data[0]
}

// jsonError describes a JSON decoding error, with where it is (the line,
// when lines is set, and column) when it has an offset.
func jsonError(data []byte, err error, lines bool) string {
	var offset int64 = -1
	var syn *json.SyntaxError
	var typ *json.UnmarshalTypeError
	switch {
	case errors.As(err, &syn):
		offset = syn.Offset
	case errors.As(err, &typ):
		offset = typ.Offset
	}
	if offset < 0 || offset > int64(len(data)) {
		return "invalid JSON: " + err.Error()
	}
	before := data[:offset]
	line := bytes.Count(before, []byte("\n")) + 1
	col := int(offset) - (bytes.LastIndexByte(before, '\n') + 1)
	if !lines {
		return fmt.Sprintf("invalid JSON at column %d: %v", col, err)
	}
	return fmt.Sprintf("invalid JSON at line %d, column %d: %v", line, col, err)
}
