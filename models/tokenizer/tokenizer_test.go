package tokenizer_test

import (
	"errors"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/zbench/zbench/models/tokenizer"
)

// smallModel is the small SentencePiece model of helpers_test.go.
func smallModel() []byte { return buildModel(smallPieces(smallNormals...), llamaOptions()) }

func TestSmallEncodeDecode(t *testing.T) {
	ps := smallPieces(smallNormals...)
	id := func(s string) int {
		for i, p := range ps {
			if p.text == s {
				return i
			}
		}
		t.Fatalf("no piece %q", s)
		return -1
	}
	formats := []struct {
		name string
		data []byte
	}{
		{"tokenizer.model", smallModel()},
		{"tokenizer.json", marshal(t, smallJSON(t))},
	}
	tests := []struct {
		text string
		want []int
	}{
		{"", []int{}},
		{"hello world", []int{id("▁hello"), id("▁world")}},
		{"hello", []int{id("▁hello")}},
		{" hello", []int{id("▁"), id("▁hello")}},
		{"ah", []int{id("▁a"), id("h")}},
		{"hé", []int{id("▁h"), 3 + 0xC3, 3 + 0xA9}},
		{"hello world", []int{id("▁hello"), id("▁world")}},
		{"\n", []int{id("▁"), 3 + '\n'}},
	}
	for _, f := range formats {
		t.Run(f.name, func(t *testing.T) {
			tok, err := tokenizer.Parse(f.name, f.data)
			require.NoError(t, err)
			assert.Equal(t, 1, tok.BOS())
			assert.Equal(t, 2, tok.EOS())
			assert.Equal(t, len(ps), tok.VocabSize())
			for _, tt := range tests {
				assert.Equal(t, tt.want, nonNil(tok.Encode(tt.text, false)), "Encode(%q)", tt.text)
				assert.Equal(t, append([]int{1}, tt.want...), tok.Encode(tt.text, true), "Encode(%q, true)", tt.text)
				got, err := tok.Decode(tok.Encode(tt.text, true))
				require.NoError(t, err)
				assert.Equal(t, tt.text, got, "Decode(Encode(%q))", tt.text)
			}
			got, ok := tok.ID("▁hello")
			assert.True(t, ok)
			assert.Equal(t, id("▁hello"), got)
			_, ok = tok.ID("nope")
			assert.False(t, ok)
		})
	}
}

func TestDecodeUnknownID(t *testing.T) {
	for _, name := range []string{"tokenizer.model", "tokenizer.json"} {
		data := smallModel()
		if name == "tokenizer.json" {
			data = marshal(t, smallJSON(t))
		}
		tok, err := tokenizer.Parse(name, data)
		require.NoError(t, err)
		n := tok.VocabSize()
		for _, id := range []int{-1, n, n + 1000} {
			_, err := tok.Decode([]int{1, 5, id})
			require.ErrorIs(t, err, tokenizer.ErrID)
			assert.Contains(t, err.Error(), "id "+strconv.Itoa(id)+" (at 2)", name)
			// A Stream skips it.
			s := tok.NewStream()
			assert.Equal(t, "", s.Push(id)+s.Flush())
		}
	}
}

// TestDecodeIDGap: an id between the model's ids that names no token is an
// error too.
func TestDecodeIDGap(t *testing.T) {
	doc := smallJSON(t)
	vocab := doc["model"].(map[string]any)["vocab"].(map[string]any)
	vocab["zzz"] = 400
	tok, err := tokenizer.Parse("tokenizer.json", marshal(t, doc))
	require.NoError(t, err)
	assert.Equal(t, 401, tok.VocabSize())
	_, err = tok.Decode([]int{300})
	require.ErrorIs(t, err, tokenizer.ErrID)
	assert.Contains(t, err.Error(), "id 300 (at 0) names no token")
	got, err := tok.Decode([]int{400})
	require.NoError(t, err)
	assert.Equal(t, "zzz", got)
}

// TestStreamSplitCharacter: a character whose bytes come as byte-fallback
// tokens prints once, when its last byte arrives.
func TestStreamSplitCharacter(t *testing.T) {
	for _, name := range []string{"tokenizer.model", "tokenizer.json"} {
		t.Run(name, func(t *testing.T) {
			tok, err := tokenizer.Load(filepath.Join(tinyDir, name))
			require.NoError(t, err)
			ids := tok.Encode("🦙 ok", true)
			s := tok.NewStream()
			var outs []string
			for _, id := range ids {
				outs = append(outs, s.Push(id))
			}
			outs = append(outs, s.Flush())
			assert.Equal(t, "🦙 ok", strings.Join(outs, ""))
			// <s>, ▁, then four byte tokens: nothing shows before the
			// last byte, which brings the whole llama.
			require.Greater(t, len(outs), 6)
			assert.Equal(t, []string{"", "", "", "", ""}, outs[:5], "%q", outs)
			assert.Contains(t, outs[5]+outs[6], "🦙")
			// A stream cut inside the character flushes U+FFFDs, as
			// Decode does.
			s = tok.NewStream()
			assert.Equal(t, "", s.Push(ids[2])+s.Push(ids[3]))
			want, err := tok.Decode(ids[2:4])
			require.NoError(t, err)
			assert.Equal(t, want, s.Flush())
			assert.Equal(t, "\uFFFD\uFFFD", want)
		})
	}
}

// TestRoundTrip: Decode(Encode(text)) is text for every case text that
// holds no special token's spelling or U+2581.
func TestRoundTrip(t *testing.T) {
	g := readTinyGolden(t)
	paths := []string{filepath.Join(tinyDir, "tokenizer.model"), filepath.Join(tinyDir, "tokenizer.json")}
	for _, p := range paths {
		tok, err := tokenizer.Load(p)
		require.NoError(t, err)
		n := 0
		for _, c := range g.Cases {
			if strings.Contains(c.Text, "▁") || (strings.HasSuffix(p, ".json") && hasSpecial(c.Text)) {
				continue
			}
			n++
			for _, add := range []bool{false, true} {
				got, err := tok.Decode(tok.Encode(c.Text, add))
				require.NoError(t, err)
				assert.Equal(t, c.Text, got, "%s: %s", filepath.Base(p), c.Name)
			}
		}
		assert.Greater(t, n, 35)
	}
}

func hasSpecial(s string) bool {
	return strings.Contains(s, "<s>") || strings.Contains(s, "</s>") || strings.Contains(s, "<unk>")
}

func TestLoadDirectory(t *testing.T) {
	model, js := smallModel(), marshal(t, smallJSON(t))
	tests := []struct {
		name    string
		files   map[string][]byte
		text    string
		want    []int
		bos     int
		eos     int
		wantErr string
	}{
		{name: "json preferred", files: map[string][]byte{"tokenizer.json": js, "tokenizer.model": []byte("not read")},
			text: "hello", want: []int{1, 273}, bos: 1, eos: 2},
		{name: "model", files: map[string][]byte{"tokenizer.model": model}, text: "hello", want: []int{1, 273}, bos: 1, eos: 2},
		{name: "config adds eos", files: map[string][]byte{"tokenizer.model": model,
			"tokenizer_config.json": []byte(`{"add_bos_token": true, "add_eos_token": true}`)},
			text: "hello", want: []int{1, 273, 2}, bos: 1, eos: 2},
		{name: "config drops bos", files: map[string][]byte{"tokenizer.json": js,
			"tokenizer_config.json": []byte(`{"add_bos_token": false, "add_eos_token": false}`)},
			text: "hello", want: []int{273}, bos: 1, eos: 2},
		{name: "config tokens as objects", files: map[string][]byte{"tokenizer.json": js,
			"tokenizer_config.json": []byte(`{"add_eos_token": true, "bos_token": {"content": "</s>"}, "eos_token": "<unk>"}`)},
			text: "hello", want: []int{1, 273, 0}, bos: 2, eos: 0},
		{name: "config without flags", files: map[string][]byte{"tokenizer.json": js,
			"tokenizer_config.json": []byte(`{"model_max_length": 2048}`)},
			text: "hello", want: []int{1, 273}, bos: 1, eos: 2},
		{name: "no tokenizer", files: map[string][]byte{"config.json": []byte("{}")},
			wantErr: "no tokenizer.json or tokenizer.model"},
		{name: "bad config", files: map[string][]byte{"tokenizer.json": js, "tokenizer_config.json": []byte(`{"add_bos_token": "yes"}`)},
			wantErr: "tokenizer_config.json: line 1, column"},
		{name: "config names no token", files: map[string][]byte{"tokenizer.json": js, "tokenizer_config.json": []byte(`{"eos_token": "<|eot|>"}`)},
			wantErr: `tokenizer_config.json: eos_token "<|eot|>" is not a token of`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			for name, data := range tt.files {
				require.NoError(t, os.WriteFile(filepath.Join(dir, name), data, 0o644))
			}
			tok, err := tokenizer.Load(dir)
			if tt.wantErr != "" {
				require.Error(t, err)
				assert.Contains(t, err.Error(), tt.wantErr)
				assert.Contains(t, err.Error(), dir)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.want, tok.Encode(tt.text, true))
			assert.Equal(t, tt.bos, tok.BOS())
			assert.Equal(t, tt.eos, tok.EOS())
		})
	}
}

// TestFormat: the format is told by the content, or by a .json name.
func TestFormat(t *testing.T) {
	js := marshal(t, smallJSON(t))
	for _, tt := range []struct {
		name string
		data []byte
	}{
		{"tok", js},
		{"tok", append([]byte("\n \t"), js...)},
		{"weird.model", js},
		{"tok", smallModel()},
		{"tokenizer.bin", smallModel()},
	} {
		tok, err := tokenizer.Load(writeFile(t, tt.name, tt.data))
		require.NoError(t, err, tt.name)
		assert.Equal(t, []int{1, 273}, tok.Encode("hello", true))
	}
	_, err := tokenizer.Load(writeFile(t, "x.json", smallModel()))
	require.ErrorIs(t, err, tokenizer.ErrInvalid)
}

// TestLoadErrors: every malformed or unsupported file is one error naming
// the file and what is wrong.
func TestLoadErrors(t *testing.T) {
	jsonWith := func(change func(doc map[string]any)) []byte {
		doc := smallJSON(t)
		change(doc)
		return marshal(t, doc)
	}
	model := func(doc map[string]any) map[string]any { return doc["model"].(map[string]any) }
	pieces := smallPieces(smallNormals...)
	modelWith := func(change func(ps []piece, o *spOptions) []piece) []byte {
		o := llamaOptions()
		ps := change(append([]piece(nil), pieces...), &o)
		return buildModel(ps, o)
	}
	tests := []struct {
		name    string
		file    string
		data    []byte
		is      error
		message string
	}{
		{"empty json", "tokenizer.json", []byte(""), tokenizer.ErrInvalid, "unexpected end of JSON input"},
		{"truncated json", "tokenizer.json", marshal(t, smallJSON(t))[:100], tokenizer.ErrInvalid, "line 1, column 101"},
		{"syntax", "tokenizer.json", []byte("{\n  \"model\": [}"), tokenizer.ErrInvalid, "line 2, column"},
		{"not utf-8", "tokenizer.json", []byte("{\"a\": \"\xff\"}"), tokenizer.ErrInvalid, "not valid UTF-8"},
		{"no model", "tokenizer.json", []byte(`{"version": "1.0"}`), tokenizer.ErrInvalid, "no model"},
		{"unigram", "tokenizer.json", jsonWith(func(d map[string]any) { d["model"] = map[string]any{"type": "Unigram", "vocab": []any{}} }),
			tokenizer.ErrUnsupported, `model type "Unigram": only BPE`},
		{"byte level", "tokenizer.json", jsonWith(func(d map[string]any) { d["pre_tokenizer"] = map[string]any{"type": "ByteLevel"} }),
			tokenizer.ErrUnsupported, "pre_tokenizer type ByteLevel"},
		{"regex replace", "tokenizer.json", jsonWith(func(d map[string]any) {
			d["normalizer"] = map[string]any{"type": "Replace", "pattern": map[string]any{"Regex": " +"}, "content": "▁"}
		}), tokenizer.ErrUnsupported, "normalizer: Replace with a Regex pattern"},
		{"nfkc", "tokenizer.json", jsonWith(func(d map[string]any) {
			d["normalizer"] = map[string]any{"type": "Sequence", "normalizers": []any{map[string]any{"type": "NFKC"}}}
		}), tokenizer.ErrUnsupported, `normalizer.normalizers[0] type "NFKC"`},
		{"wordpiece decoder", "tokenizer.json", jsonWith(func(d map[string]any) { d["decoder"] = map[string]any{"type": "WordPiece"} }),
			tokenizer.ErrUnsupported, `decoder type "WordPiece"`},
		{"bert processor", "tokenizer.json", jsonWith(func(d map[string]any) { d["post_processor"] = map[string]any{"type": "BertProcessing"} }),
			tokenizer.ErrUnsupported, `post_processor type "BertProcessing"`},
		{"truncation", "tokenizer.json", jsonWith(func(d map[string]any) { d["truncation"] = map[string]any{"max_length": 5} }),
			tokenizer.ErrUnsupported, "truncation is set"},
		{"dropout", "tokenizer.json", jsonWith(func(d map[string]any) { model(d)["dropout"] = 0.1 }),
			tokenizer.ErrUnsupported, "model.dropout 0.1"},
		{"merge not in vocab", "tokenizer.json", jsonWith(func(d map[string]any) { model(d)["merges"] = []any{"l l", "x y"} }),
			tokenizer.ErrInvalid, `model.merges[1] "x" "y": "x" is not in model.vocab`},
		{"merge result not in vocab", "tokenizer.json", jsonWith(func(d map[string]any) { model(d)["merges"] = []any{[]any{"e", "l"}} }),
			tokenizer.ErrInvalid, `model.merges[0] "e" "l": "el" is not in model.vocab`},
		{"merge of three", "tokenizer.json", jsonWith(func(d map[string]any) { model(d)["merges"] = []any{"a b c"} }),
			tokenizer.ErrInvalid, "model.merges[0] \"a b c\": not two tokens"},
		{"merge pair of one", "tokenizer.json", jsonWith(func(d map[string]any) { model(d)["merges"] = []any{[]any{"a"}} }),
			tokenizer.ErrInvalid, "model.merges[0]: 1 tokens, want 2"},
		{"merges of numbers", "tokenizer.json", jsonWith(func(d map[string]any) { model(d)["merges"] = []any{1, 2} }),
			tokenizer.ErrInvalid, "model.merges: neither"},
		{"negative id", "tokenizer.json", jsonWith(func(d map[string]any) { model(d)["vocab"].(map[string]any)["e"] = -3 }),
			tokenizer.ErrInvalid, `model.vocab["e"]: id -3 out of range`},
		{"huge id", "tokenizer.json", jsonWith(func(d map[string]any) { model(d)["vocab"].(map[string]any)["e"] = 1 << 40 }),
			tokenizer.ErrInvalid, `model.vocab["e"]: id 1099511627776 out of range`},
		{"fractional id", "tokenizer.json", jsonWith(func(d map[string]any) { model(d)["vocab"].(map[string]any)["e"] = 1.5 }),
			tokenizer.ErrInvalid, "model: json: cannot unmarshal number 1.5"},
		{"duplicate id", "tokenizer.json", jsonWith(func(d map[string]any) { model(d)["vocab"].(map[string]any)["zz"] = 5 }),
			tokenizer.ErrInvalid, "model.vocab: \"<0x02>\" and \"zz\" both have id 5"},
		{"unk not in vocab", "tokenizer.json", jsonWith(func(d map[string]any) { model(d)["unk_token"] = "<oops>" }),
			tokenizer.ErrInvalid, `model.unk_token "<oops>" is not in model.vocab`},
		{"no unk no fallback", "tokenizer.json", jsonWith(func(d map[string]any) { model(d)["unk_token"] = nil; model(d)["byte_fallback"] = false }),
			tokenizer.ErrUnsupported, "no unk_token and no byte fallback"},
		{"template without A", "tokenizer.json", jsonWith(func(d map[string]any) {
			d["post_processor"].(map[string]any)["single"] = []any{map[string]any{"SpecialToken": map[string]any{"id": "<s>", "type_id": 0}}}
		}), tokenizer.ErrInvalid, "post_processor.single: no sequence A"},
		{"template unknown special", "tokenizer.json", jsonWith(func(d map[string]any) {
			d["post_processor"].(map[string]any)["special_tokens"] = map[string]any{}
		}), tokenizer.ErrInvalid, `post_processor.single[0]: special token "<s>" is not in special_tokens`},
		{"template bad id", "tokenizer.json", jsonWith(func(d map[string]any) {
			d["post_processor"].(map[string]any)["special_tokens"] = map[string]any{"<s>": map[string]any{"ids": []any{99999}}}
		}), tokenizer.ErrInvalid, "has id 99999, which names no token"},
		{"metaspace scheme", "tokenizer.json", jsonWith(func(d map[string]any) {
			d["pre_tokenizer"] = map[string]any{"type": "Metaspace", "replacement": "▁", "prepend_scheme": "sometimes"}
		}), tokenizer.ErrInvalid, `prepend_scheme "sometimes"`},
		{"metaspace replacement", "tokenizer.json", jsonWith(func(d map[string]any) {
			d["pre_tokenizer"] = map[string]any{"type": "Metaspace", "replacement": "ab"}
		}), tokenizer.ErrInvalid, "replacement must be one character"},
		{"strip", "tokenizer.json", jsonWith(func(d map[string]any) {
			d["decoder"] = map[string]any{"type": "Strip", "content": " ", "start": -1, "stop": 0}
		}),
			tokenizer.ErrInvalid, "decoder: Strip needs"},

		{"empty model", "tokenizer.model", []byte{}, tokenizer.ErrInvalid, "empty file"},
		{"garbage", "tokenizer.model", []byte("\xff\xff\xff"), tokenizer.ErrInvalid, "not a SentencePiece model: ModelProto: byte 0"},
		{"truncated model", "tokenizer.model", smallModel()[:50], tokenizer.ErrInvalid, "not a SentencePiece model"},
		{"unigram model", "tokenizer.model", modelWith(func(ps []piece, o *spOptions) []piece { o.modelType = ptr(1); return ps }),
			tokenizer.ErrUnsupported, "trainer_spec.model_type UNIGRAM: only BPE"},
		{"default model type", "tokenizer.model", modelWith(func(ps []piece, o *spOptions) []piece { o.modelType = nil; return ps }),
			tokenizer.ErrUnsupported, "model_type UNIGRAM"},
		{"charsmap", "tokenizer.model", modelWith(func(ps []piece, o *spOptions) []piece { o.charsmap = []byte{1, 2, 3}; return ps }),
			tokenizer.ErrUnsupported, "precompiled_charsmap"},
		{"no unk", "tokenizer.model", modelWith(func(ps []piece, o *spOptions) []piece { return ps[1:] }),
			tokenizer.ErrInvalid, "no UNKNOWN piece"},
		{"two unks", "tokenizer.model", modelWith(func(ps []piece, o *spOptions) []piece { return append(ps, piece{"<unk2>", 0, unknown}) }),
			tokenizer.ErrInvalid, `"<unk2>": a second UNKNOWN piece`},
		{"duplicate piece", "tokenizer.model", modelWith(func(ps []piece, o *spOptions) []piece { return append(ps, piece{"ll", 0, normal}) }),
			tokenizer.ErrInvalid, `"ll" is already defined`},
		{"empty piece", "tokenizer.model", modelWith(func(ps []piece, o *spOptions) []piece { return append(ps, piece{"", 0, normal}) }),
			tokenizer.ErrInvalid, "empty piece"},
		{"bad type", "tokenizer.model", modelWith(func(ps []piece, o *spOptions) []piece { return append(ps, piece{"x", 0, 9}) }),
			tokenizer.ErrInvalid, "type 9 is not a piece type"},
		{"missing byte", "tokenizer.model", modelWith(func(ps []piece, o *spOptions) []piece { return append(ps[:10], ps[11:]...) }),
			tokenizer.ErrInvalid, "no byte piece <0x07>"},
		{"bad byte piece", "tokenizer.model", modelWith(func(ps []piece, o *spOptions) []piece { return append(ps, piece{"<0xzz>", 0, byteType}) }),
			tokenizer.ErrInvalid, `byte piece "<0xzz>" is not <0x00>..<0xFF>`},
		{"byte without fallback", "tokenizer.model", modelWith(func(ps []piece, o *spOptions) []piece { o.byteFallback = ptr(false); return ps }),
			tokenizer.ErrInvalid, "although trainer_spec.byte_fallback is false"},
		{"nan score", "tokenizer.model", modelWith(func(ps []piece, o *spOptions) []piece {
			return append(ps, piece{"zz", float32(math.NaN()), normal})
		}), tokenizer.ErrInvalid, "score is NaN"},
		{"wrong wire type", "tokenizer.model", append(smallModel(), 0x08, 0x01), tokenizer.ErrInvalid, "field 1 has wire type 0, want 2"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := writeFile(t, tt.file, tt.data)
			_, err := tokenizer.Load(p)
			require.Error(t, err)
			require.ErrorIs(t, err, tt.is)
			msg := err.Error()
			assert.Contains(t, msg, tt.message)
			assert.True(t, strings.HasPrefix(msg, "tokenizer: "+p+": "), msg)
			assert.NotContains(t, msg, "\n")
		})
	}
	_, err := tokenizer.Load(filepath.Join(t.TempDir(), "missing.json"))
	require.ErrorIs(t, err, fs.ErrNotExist)
}

func TestParseName(t *testing.T) {
	_, err := tokenizer.Parse("", []byte("{"))
	require.ErrorIs(t, err, tokenizer.ErrInvalid)
	assert.Equal(t, "tokenizer: line 1, column 2: unexpected end of JSON input: invalid tokenizer file", err.Error())
	assert.False(t, errors.Is(err, tokenizer.ErrUnsupported))
}
