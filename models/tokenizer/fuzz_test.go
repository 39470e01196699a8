package tokenizer_test

import (
	"encoding/binary"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/require"

	"github.com/zbench/zbench/models/tokenizer"
)

// fuzzTexts are encoded with every tokenizer a fuzzed file gives.
var fuzzTexts = []string{"", " ", "Hello world", "  two\n\tspaces ", "<s> inside </s>", "naïve 🦙 你好", "a\xffb", "▁▁x"}

// seedFiles adds the committed tokenizer files of the given extension as
// seeds.
func seedFiles(f *testing.F, ext string) {
	golden := filepath.Join("..", "..", "testdata", "golden")
	paths, err := filepath.Glob(filepath.Join(golden, "tokenizer-variants", "*"+ext))
	require.NoError(f, err)
	paths = append(paths, filepath.Join(tinyDir, "tokenizer"+ext))
	for _, p := range paths {
		data, err := os.ReadFile(p)
		require.NoError(f, err)
		f.Add(data)
	}
}

// checkParse checks that Parse either fails with one line naming the file
// and wrapping ErrInvalid or ErrUnsupported, or gives a tokenizer that
// encodes and decodes without panicking, whose Decode takes whatever
// Encode gives, and whose Stream agrees with Decode.
func checkParse(t *testing.T, name string, data []byte) {
	tok, err := tokenizer.Parse(name, data)
	if err != nil {
		require.Nil(t, tok)
		require.True(t, errors.Is(err, tokenizer.ErrInvalid) || errors.Is(err, tokenizer.ErrUnsupported), "%v", err)
		require.True(t, strings.HasPrefix(err.Error(), "tokenizer: "+name+": "), "%v", err)
		require.NotContains(t, err.Error(), "\n")
		return
	}
	require.Positive(t, tok.VocabSize())
	for _, text := range fuzzTexts {
		for _, add := range []bool{false, true} {
			ids := tok.Encode(text, add)
			got, err := tok.Decode(ids)
			require.NoError(t, err, "Decode(Encode(%q))", text)
			require.Equal(t, got, streamed(tok, ids), "Stream of Encode(%q)", text)
		}
	}
	var ids []int
	for id := range min(tok.VocabSize(), 600) {
		if _, err := tok.Decode([]int{id}); err == nil {
			ids = append(ids, id)
		}
	}
	got, err := tok.Decode(ids)
	require.NoError(t, err)
	require.Equal(t, got, streamed(tok, ids))
}

// FuzzParseJSON: no tokenizer.json, however malformed, makes Parse panic
// or give a tokenizer that does.
func FuzzParseJSON(f *testing.F) {
	f.Add(marshal(f, smallJSON(f)))
	f.Add([]byte(`{"model": {"type": "BPE", "vocab": {"<unk>": 0, "a": 1}, "merges": [], "unk_token": "<unk>"}}`))
	f.Add([]byte(`{"model": {"vocab": {"a": 0, "b": 1, "ab": 2}, "merges": [["a", "b"]], "byte_fallback": true, "unk_token": "a"},
		"added_tokens": [{"content": "b", "lstrip": true, "rstrip": true, "single_word": true}],
		"pre_tokenizer": {"type": "Metaspace", "replacement": "b", "prepend_scheme": "first", "split": true},
		"decoder": {"type": "Sequence", "decoders": [{"type": "Fuse"}, {"type": "Strip", "content": "a", "start": 3, "stop": 2}]}}`))
	seedFiles(f, ".json")
	f.Fuzz(func(t *testing.T, data []byte) {
		checkParse(t, "tokenizer.json", data)
	})
}

// FuzzParseModel: no tokenizer.model, however malformed, makes Parse
// panic or give a tokenizer that does.
func FuzzParseModel(f *testing.F) {
	f.Add(smallModel())
	o := llamaOptions()
	o.removeExtraWS = ptr(true)
	f.Add(buildModel(append(smallPieces(smallNormals...), piece{"<x>", 0, userDefined}, piece{"▁he", 1, unused}), o))
	seedFiles(f, ".model")
	f.Fuzz(func(t *testing.T, data []byte) {
		checkParse(t, "tokenizer.model", data)
	})
}

// tinyTokenizers are the tiny checkpoint's tokenizer.model and
// tokenizer.json.
func tinyTokenizers(f *testing.F) []*tokenizer.Tokenizer {
	var toks []*tokenizer.Tokenizer
	for _, name := range []string{"tokenizer.model", "tokenizer.json"} {
		tok, err := tokenizer.Load(filepath.Join(tinyDir, name))
		require.NoError(f, err)
		toks = append(toks, tok)
	}
	return toks
}

// FuzzRoundTrip: Decode(Encode(text)) is text, with or without BOS, for
// any valid UTF-8 text without U+2581 (which decodes as a space) and, for
// tokenizer.json, without the spelling of a special token (which Decode
// leaves out); a Stream gives the same text.
func FuzzRoundTrip(f *testing.F) {
	toks := tinyTokenizers(f)
	for _, s := range fuzzTexts {
		f.Add(s)
	}
	f.Add("   leading and trailing   ")
	f.Add("\u00a0\u3000 \t\r\n")
	f.Fuzz(func(t *testing.T, text string) {
		if !utf8.ValidString(text) || strings.Contains(text, "▁") {
			t.Skip()
		}
		for i, tok := range toks {
			if i == 1 && hasSpecial(text) {
				continue
			}
			for _, add := range []bool{false, true} {
				ids := tok.Encode(text, add)
				got, err := tok.Decode(ids)
				require.NoError(t, err)
				require.Equal(t, text, got, "%s", tok.Path())
				require.Equal(t, text, streamed(tok, ids), "%s: Stream", tok.Path())
			}
		}
	})
}

// FuzzStream: a Stream gives what Decode gives for any ids, byte-fallback
// runs cut anywhere included.
func FuzzStream(f *testing.F) {
	toks := tinyTokenizers(f)
	f.Add([]byte{1, 0, 243, 0, 162, 0, 169, 0, 156, 0})
	f.Add([]byte{231, 0, 192, 0, 2, 0, 163, 0, 13, 0})
	f.Fuzz(func(t *testing.T, data []byte) {
		for _, tok := range toks {
			ids := make([]int, 0, len(data)/2)
			for i := 0; i+1 < len(data); i += 2 {
				ids = append(ids, int(binary.LittleEndian.Uint16(data[i:]))%tok.VocabSize())
			}
			want, err := tok.Decode(ids)
			require.NoError(t, err)
			require.Equal(t, want, streamed(tok, ids), "%s: %v", tok.Path(), ids)
		}
	})
}
