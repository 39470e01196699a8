package tokenizer_test

import (
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/encoding/protowire"
)

// Piece types of sentencepiece_model.proto.
const (
	normal      = 1
	unknown     = 2
	control     = 3
	userDefined = 4
	unused      = 5
	byteType    = 6
)

// piece is one piece of a SentencePiece model built by a test.
type piece struct {
	text  string
	score float32
	typ   int
}

// spOptions are the TrainerSpec and NormalizerSpec fields a test sets;
// nil fields are left out (the proto's defaults).
type spOptions struct {
	modelType      *int
	byteFallback   *bool
	addDummyPrefix *bool
	removeExtraWS  *bool
	charsmap       []byte
	unkSurface     *string
}

func ptr[T any](v T) *T { return &v }

// llamaOptions are Llama's: BPE, byte fallback, no removal of extra
// whitespace.
func llamaOptions() spOptions {
	return spOptions{modelType: ptr(2), byteFallback: ptr(true), removeExtraWS: ptr(false)}
}

// buildModel serializes a ModelProto.
func buildModel(pieces []piece, o spOptions) []byte {
	var b []byte
	for _, p := range pieces {
		var m []byte
		m = protowire.AppendTag(m, 1, protowire.BytesType)
		m = protowire.AppendString(m, p.text)
		m = protowire.AppendTag(m, 2, protowire.Fixed32Type)
		m = protowire.AppendFixed32(m, math.Float32bits(p.score))
		if p.typ != 0 {
			m = protowire.AppendTag(m, 3, protowire.VarintType)
			m = protowire.AppendVarint(m, uint64(p.typ))
		}
		b = protowire.AppendTag(b, 1, protowire.BytesType)
		b = protowire.AppendBytes(b, m)
	}
	var ts []byte
	if o.modelType != nil {
		ts = protowire.AppendTag(ts, 3, protowire.VarintType)
		ts = protowire.AppendVarint(ts, uint64(*o.modelType))
	}
	if o.byteFallback != nil {
		ts = protowire.AppendTag(ts, 35, protowire.VarintType)
		ts = protowire.AppendVarint(ts, protowire.EncodeBool(*o.byteFallback))
	}
	if o.unkSurface != nil {
		ts = protowire.AppendTag(ts, 44, protowire.BytesType)
		ts = protowire.AppendString(ts, *o.unkSurface)
	}
	b = protowire.AppendTag(b, 2, protowire.BytesType)
	b = protowire.AppendBytes(b, ts)
	var ns []byte
	ns = protowire.AppendTag(ns, 1, protowire.BytesType)
	ns = protowire.AppendString(ns, "identity")
	if o.charsmap != nil {
		ns = protowire.AppendTag(ns, 2, protowire.BytesType)
		ns = protowire.AppendBytes(ns, o.charsmap)
	}
	if o.addDummyPrefix != nil {
		ns = protowire.AppendTag(ns, 3, protowire.VarintType)
		ns = protowire.AppendVarint(ns, protowire.EncodeBool(*o.addDummyPrefix))
	}
	if o.removeExtraWS != nil {
		ns = protowire.AppendTag(ns, 4, protowire.VarintType)
		ns = protowire.AppendVarint(ns, protowire.EncodeBool(*o.removeExtraWS))
	}
	b = protowire.AppendTag(b, 3, protowire.BytesType)
	return protowire.AppendBytes(b, ns)
}

// smallPieces is a small Llama-like vocabulary: <unk> <s> </s>, the 256
// byte pieces, then pieces scored by rank.
func smallPieces(normals ...string) []piece {
	ps := []piece{{"<unk>", 0, unknown}, {"<s>", 0, control}, {"</s>", 0, control}}
	for b := range 256 {
		ps = append(ps, piece{fmt.Sprintf("<0x%02X>", b), 0, byteType})
	}
	for i, n := range normals {
		ps = append(ps, piece{n, -float32(i), normal})
	}
	return ps
}

// smallNormals are the normal pieces of the small test models.
var smallNormals = []string{"▁", "e", "l", "o", "h", "w", "r", "d", "▁h", "ll", "▁w", "or", "▁he", "llo", "▁hello", "▁wor", "ld", "▁world", "a", "▁a"}

// smallJSON is a tokenizer.json over the same vocabulary in the Llama 2
// layout, with merges made from the pieces' ranks.
func smallJSON(t testing.TB) map[string]any {
	t.Helper()
	ps := smallPieces(smallNormals...)
	vocab := map[string]any{}
	for i, p := range ps {
		vocab[p.text] = i
	}
	var merges []any
	for _, n := range smallNormals {
		r := []rune(n)
		for k := 1; k < len(r); k++ {
			l, rt := string(r[:k]), string(r[k:])
			if _, ok := vocab[l]; !ok {
				continue
			}
			if _, ok := vocab[rt]; !ok {
				continue
			}
			merges = append(merges, l+" "+rt)
		}
	}
	special := func(id int, content string) map[string]any {
		return map[string]any{"id": id, "content": content, "single_word": false, "lstrip": false,
			"rstrip": false, "normalized": false, "special": true}
	}
	return map[string]any{
		"version":      "1.0",
		"truncation":   nil,
		"padding":      nil,
		"added_tokens": []any{special(0, "<unk>"), special(1, "<s>"), special(2, "</s>")},
		"normalizer": map[string]any{"type": "Sequence", "normalizers": []any{
			map[string]any{"type": "Prepend", "prepend": "▁"},
			map[string]any{"type": "Replace", "pattern": map[string]any{"String": " "}, "content": "▁"},
		}},
		"pre_tokenizer": nil,
		"post_processor": map[string]any{
			"type":           "TemplateProcessing",
			"single":         []any{map[string]any{"SpecialToken": map[string]any{"id": "<s>", "type_id": 0}}, map[string]any{"Sequence": map[string]any{"id": "A", "type_id": 0}}},
			"special_tokens": map[string]any{"<s>": map[string]any{"id": "<s>", "ids": []any{1}, "tokens": []any{"<s>"}}},
		},
		"decoder": map[string]any{"type": "Sequence", "decoders": []any{
			map[string]any{"type": "Replace", "pattern": map[string]any{"String": "▁"}, "content": " "},
			map[string]any{"type": "ByteFallback"},
			map[string]any{"type": "Fuse"},
			map[string]any{"type": "Strip", "content": " ", "start": 1, "stop": 0},
		}},
		"model": map[string]any{"type": "BPE", "dropout": nil, "unk_token": "<unk>", "fuse_unk": true,
			"byte_fallback": true, "vocab": vocab, "merges": merges},
	}
}

func marshal(t testing.TB, v any) []byte {
	t.Helper()
	data, err := json.Marshal(v)
	require.NoError(t, err)
	return data
}

// writeFile writes data to name in a new temporary directory and returns
// its path.
func writeFile(t *testing.T, name string, data []byte) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	require.NoError(t, os.WriteFile(p, data, 0o644))
	return p
}
