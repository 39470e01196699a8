package gguf_test

import (
	"bytes"
	"encoding/binary"
	"path/filepath"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/zbench/zbench/models/gguf"
	"github.com/zbench/zbench/models/llama"
	"github.com/zbench/zbench/models/tokenizer"
)

// smallFile is a file with a metadata entry of every kind and three
// tensors, for the parser's tests and the fuzz corpus.
func smallFile(t testing.TB, alignment uint32) []byte {
	t.Helper()
	w := gguf.NewWriter()
	kvs := []gguf.KV{
		{Key: "general.architecture", Value: gguf.String("test")},
		{Key: "a.u32", Value: gguf.Uint32(7)},
		{Key: "a.i32", Value: gguf.Int32(-7)},
		{Key: "a.f32", Value: gguf.Float32(0.5)},
		{Key: "a.bool", Value: gguf.Bool(true)},
		{Key: "a.strings", Value: gguf.Strings([]string{"x", "", "ÿ"})},
		{Key: "a.floats", Value: gguf.Float32s([]float32{1, -2})},
		{Key: "a.ints", Value: gguf.Int32s([]int32{3, -4, 5})},
	}
	if alignment != 0 {
		kvs = append(kvs, gguf.KV{Key: gguf.KeyAlignment, Value: gguf.Uint32(alignment)})
	}
	for _, kv := range kvs {
		require.NoError(t, w.Add(kv.Key, kv.Value))
	}
	vals := make([]float32, 64)
	for i := range vals {
		vals[i] = float32(i%13) - 6
	}
	for _, tt := range []struct {
		name  string
		shape []int
		typ   gguf.Type
	}{{"t.f32", []int{2, 3}, gguf.F32}, {"t.q8", []int{2, 32}, gguf.Q8_0}, {"t.q4", []int{64}, gguf.Q4_0}} {
		n := 1
		for _, d := range tt.shape {
			n *= d
		}
		data, err := gguf.Quantize(tt.typ, vals[:n])
		require.NoError(t, err)
		require.NoError(t, w.AddTensor(tt.name, tt.shape, tt.typ, data))
	}
	var buf bytes.Buffer
	_, err := w.WriteTo(&buf)
	require.NoError(t, err)
	return buf.Bytes()
}

// microLlama is a one-layer Llama of width 32 with an eight-token
// SentencePiece vocabulary, in Q4_0: a small fuzz seed that NewLlama and
// Tokenizer accept.
func microLlama(t testing.TB) []byte {
	t.Helper()
	cfg := llama.Config{VocabSize: 8, HiddenSize: 32, IntermediateSize: 32, NumHiddenLayers: 1, NumAttentionHeads: 2,
		NumKeyValueHeads: 1, HeadDim: 16, RMSNormEps: 1e-5, RopeTheta: 10000, MaxPositionEmbeddings: 16,
		BOSTokenID: 1, EOSTokenIDs: []int{2}, TorchDType: "float32"}
	tok, err := tokenizer.FromPieces("micro", tokenizer.Pieces{
		Tokens: []string{"<unk>", "<s>", "</s>", "\u2581", "a", "b", "\u2581a", "ab"},
		Scores: []float32{0, 0, 0, 0, -3, -4, -1, -2},
		Types:  []int32{2, 3, 3, 1, 1, 1, 1, 1},
		BOS:    1, EOS: 2, AddBOS: true,
		ChatTemplate: "{{ bos_token }}{% for m in messages %}{{ m.content }}{% endfor %}",
	})
	require.NoError(t, err)
	var buf bytes.Buffer
	require.NoError(t, gguf.WriteLlama(&buf, "micro", cfg, llama.Synthetic(1), tok, gguf.Q4_0))
	f, err := gguf.Parse("micro", buf.Bytes())
	require.NoError(t, err)
	l, err := gguf.NewLlama(f)
	require.NoError(t, err)
	require.Equal(t, cfg, l.Config)
	got, err := f.Tokenizer()
	require.NoError(t, err)
	assert.Equal(t, []int{1, 6, 5}, got.Encode("ab", true))
	assert.Equal(t, tok.ChatTemplate(), got.ChatTemplate())
	bos, ok := got.Token(got.BOS())
	assert.True(t, ok)
	assert.Equal(t, "<s>", bos)
	return buf.Bytes()
}

func TestMicroLlama(t *testing.T) { microLlama(t) }

func TestParseSmall(t *testing.T) {
	for _, a := range []uint32{0, 64, 1} {
		data := smallFile(t, a)
		f, err := gguf.Parse("small", data)
		require.NoError(t, err)
		assert.Equal(t, uint32(3), f.Version())
		want := int(a)
		if a == 0 {
			want = gguf.DefaultAlignment
		}
		assert.Equal(t, want, f.Alignment())
		v, ok := f.Value("a.i32")
		require.True(t, ok)
		n, _ := v.Int()
		assert.Equal(t, int64(-7), n)
		v, _ = f.Value("a.strings")
		assert.Equal(t, []string{"x", "", "ÿ"}, v.Any())
		v, _ = f.Value("a.ints")
		ints, ok := v.Ints()
		require.True(t, ok)
		assert.Equal(t, []int64{3, -4, 5}, ints)
		ts := f.Tensors()
		require.Len(t, ts, 3)
		assert.Equal(t, []int{3, 2}, ts[0].Dims)
		assert.Equal(t, []int{2, 3}, ts[0].Shape())
		for _, tt := range ts {
			assert.Zero(t, tt.Offset%int64(want), tt.Name)
		}
		got := make([]float32, 6)
		require.NoError(t, gguf.Dequantize(ts[0].Type, got, f.Data(ts[0])))
		assert.Equal(t, []float32{-6, -5, -4, -3, -2, -1}, got)
	}
}

// patch returns a copy of data with the bytes at the first occurrence of
// find (after the header) replaced by repl, shifted by skip bytes.
func patch(t *testing.T, data []byte, find string, skip int, repl []byte) []byte {
	t.Helper()
	i := bytes.Index(data[24:], []byte(find))
	require.GreaterOrEqual(t, i, 0, find)
	out := slices.Clone(data)
	copy(out[24+i+skip:], repl)
	return out
}

func le32(v uint32) []byte { return binary.LittleEndian.AppendUint32(nil, v) }
func le64(v uint64) []byte { return binary.LittleEndian.AppendUint64(nil, v) }

// TestParseErrors: each corruption gives one error naming what is wrong.
func TestParseErrors(t *testing.T) {
	good := smallFile(t, 0)
	aligned := smallFile(t, 64)
	// The tensor info of t.q8: name, n_dims, ne[0], ne[1], type, offset.
	q8 := len("t.q8")
	tests := []struct {
		name string
		data []byte
		want []string
		err  error
	}{
		{"empty", nil, []string{"bad magic"}, gguf.ErrInvalid},
		{"magic", append([]byte("GGML"), good[4:]...), []string{"bad magic", `"GGML"`}, gguf.ErrInvalid},
		{"version", append(append([]byte("GGUF"), le32(1)...), good[8:]...), []string{"version 1"}, gguf.ErrUnsupported},
		{"truncated header", good[:100], []string{"truncated"}, gguf.ErrInvalid},
		{"truncated data", good[:len(good)-40], []string{`tensor "t.q4"`, "runs past", "truncated"}, gguf.ErrInvalid},
		{"huge metadata count", append(append(slices.Clone(good[:16]), le64(1<<40)...), good[24:]...), []string{"metadata count"}, gguf.ErrInvalid},
		{"duplicate key", patch(t, good, "a.i32", 0, []byte("a.u32")), []string{`metadata key "a.u32" appears twice`}, gguf.ErrInvalid},
		{"duplicate tensor", patch(t, good, "t.q4", 0, []byte("t.q8")), []string{`tensor "t.q8" appears twice`}, gguf.ErrInvalid},
		{"unknown value type", patch(t, good, "a.f32", 5, le32(99)), []string{"a.f32", "unknown value type 99"}, gguf.ErrInvalid},
		{"bad bool", patch(t, good, "a.bool", len("a.bool")+4, []byte{2}), []string{"a.bool", "bool byte 2"}, gguf.ErrInvalid},
		{"string past the end", patch(t, good, "a.strings", 9+4+4+8, le64(1<<50)), []string{"a.strings", "truncated"}, gguf.ErrInvalid},
		{"bad UTF-8", patch(t, good, "ÿ", 0, []byte{0xff, 0xfe}), []string{"not valid UTF-8"}, gguf.ErrInvalid},
		{"unknown tensor type", patch(t, good, "t.q8", q8+4+16, le32(77)), []string{`tensor "t.q8"`, "unknown ggml type 77"}, gguf.ErrInvalid},
		{"n_dims", patch(t, good, "t.q8", q8, le32(5)), []string{`tensor "t.q8"`, "n_dims 5"}, gguf.ErrInvalid},
		{"zero dim", patch(t, good, "t.q8", q8+4+8, le64(0)), []string{`tensor "t.q8"`, "ne[1] = 0"}, gguf.ErrInvalid},
		{"partial block", patch(t, good, "t.q8", q8+4, le64(16)), []string{`tensor "t.q8"`, "rows of 16 values", "Q8_0 blocks of 32"}, gguf.ErrInvalid},
		{"offset out of range", patch(t, good, "t.q8", q8+4+16+4, le64(1<<20)), []string{`tensor "t.q8"`, "runs past"}, gguf.ErrInvalid},
		{"offset overflowing with the size", patch(t, patch(t, patch(t, good, "t.q8", q8+4+8, le64(1<<55-1)), "t.q8", q8+4+16, le32(uint32(gguf.F64))), "t.q8", q8+4+16+4, le64(1<<62-32)), []string{`tensor "t.q8"`, "runs past"}, gguf.ErrInvalid},
		{"misaligned offset", patch(t, good, "t.q8", q8+4+16+4, le64(33)), []string{`tensor "t.q8"`, "not a multiple of the alignment 32"}, gguf.ErrInvalid},
		{"overlap", patch(t, good, "t.q8", q8+4+16+4, le64(0)), []string{"overlaps"}, gguf.ErrInvalid},
		{"alignment not a power of two", patch(t, aligned, gguf.KeyAlignment, len(gguf.KeyAlignment)+4, le32(48)), []string{"general.alignment = 48"}, gguf.ErrInvalid},
		{"alignment type", patch(t, aligned, gguf.KeyAlignment, len(gguf.KeyAlignment), le32(uint32(gguf.TypeInt32))), []string{"general.alignment has type int32"}, gguf.ErrInvalid},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f, err := gguf.Parse("bad.gguf", tc.data)
			require.Error(t, err)
			assert.Nil(t, f)
			assert.ErrorIs(t, err, tc.err)
			assert.Contains(t, err.Error(), "bad.gguf")
			for _, s := range tc.want {
				assert.Contains(t, err.Error(), s)
			}
		})
	}
}

// rewrite copies a parsed file into a Writer, leaving out the keys and
// tensors drop names and replacing the values in set.
func rewrite(t *testing.T, f *gguf.File, drop []string, set map[string]gguf.Value) []byte {
	t.Helper()
	w := gguf.NewWriter()
	for _, kv := range f.Metadata() {
		if slices.Contains(drop, kv.Key) {
			continue
		}
		v := kv.Value
		if s, ok := set[kv.Key]; ok {
			v = s
		}
		require.NoError(t, w.Add(kv.Key, v))
	}
	for _, tt := range f.Tensors() {
		if !slices.Contains(drop, tt.Name) {
			require.NoError(t, w.AddTensor(tt.Name, tt.Shape(), tt.Type, f.Data(tt)))
		}
	}
	var buf bytes.Buffer
	_, err := w.WriteTo(&buf)
	require.NoError(t, err)
	return buf.Bytes()
}

// TestLlamaErrors: a Llama file missing a key or tensor, or with one of
// the wrong shape or an unknown one, is refused naming it.
func TestLlamaErrors(t *testing.T) {
	f, err := gguf.Open(filepath.Join(ggufDir, "model-q8_0.gguf"))
	require.NoError(t, err)
	defer func() { require.NoError(t, f.Close()) }()
	tests := []struct {
		name string
		drop []string
		set  map[string]gguf.Value
		want []string
		err  error
	}{
		{"missing key", []string{"llama.embedding_length"}, nil, []string{"llama.embedding_length"}, gguf.ErrMissing},
		{"missing tensor", []string{"blk.1.ffn_down.weight"}, nil, []string{`"blk.1.ffn_down.weight"`, "missing"}, gguf.ErrMissing},
		{"architecture", nil, map[string]gguf.Value{"general.architecture": gguf.String("gpt2")}, []string{`"gpt2"`}, gguf.ErrUnsupported},
		{"key type", nil, map[string]gguf.Value{"llama.block_count": gguf.String("2")}, []string{"llama.block_count", "want an integer"}, gguf.ErrInvalid},
		{"fewer layers", nil, map[string]gguf.Value{"llama.block_count": gguf.Uint32(1)}, []string{`"blk.1.`, "no place"}, gguf.ErrInvalid},
		{"shape", nil, map[string]gguf.Value{"llama.feed_forward_length": gguf.Uint32(96)}, []string{`"blk.0.ffn_gate.weight"`, "wants shape [96 64]"}, gguf.ErrInvalid},
		{"partial rotary", nil, map[string]gguf.Value{"llama.rope.dimension_count": gguf.Uint32(8)}, []string{"llama.rope.dimension_count 8"}, gguf.ErrUnsupported},
		{"rope scaling type", nil, map[string]gguf.Value{"llama.rope.freq_base": gguf.String("yarn")}, []string{"llama.rope.freq_base", "want a float"}, gguf.ErrInvalid},
		{"valid rewrite", nil, map[string]gguf.Value{"llama.rope.freq_base": gguf.Float32(1e4)}, nil, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			data := rewrite(t, f, tc.drop, tc.set)
			pf, err := gguf.Parse("bad.gguf", data)
			require.NoError(t, err)
			_, err = gguf.NewLlama(pf)
			if tc.err == nil {
				require.NoError(t, err)
				return
			}
			require.Error(t, err)
			assert.ErrorIs(t, err, tc.err)
			assert.Contains(t, err.Error(), "bad.gguf")
			for _, s := range tc.want {
				assert.Contains(t, err.Error(), s)
			}
		})
	}
}

// FuzzParse: no input makes Parse, the Llama mapping or the tokenizer
// panic, and what Parse accepts survives a Writer round trip.
func FuzzParse(f *testing.F) {
	f.Add(smallFile(f, 0))
	f.Add(smallFile(f, 64))
	f.Add(smallFile(f, 1))
	f.Add(microLlama(f))
	f.Add([]byte("GGUF\x03\x00\x00\x00"))
	f.Fuzz(func(t *testing.T, data []byte) {
		first, err := gguf.Parse("fuzz", data)
		if err != nil {
			require.Nil(t, first)
			return
		}
		for _, tt := range first.Tensors() {
			if tt.Len() > 1<<16 {
				continue
			}
			_ = gguf.Dequantize(tt.Type, make([]float32, tt.Len()), first.Data(tt))
		}
		if l, err := gguf.NewLlama(first); err == nil {
			require.NotZero(t, l.Config.HiddenSize)
		}
		_, _ = first.Tokenizer()
		w := gguf.NewWriter()
		for _, kv := range first.Metadata() {
			require.NoError(t, w.Add(kv.Key, kv.Value))
		}
		for _, tt := range first.Tensors() {
			require.NoError(t, w.AddTensor(tt.Name, tt.Shape(), tt.Type, first.Data(tt)))
		}
		var buf bytes.Buffer
		_, err = w.WriteTo(&buf)
		require.NoError(t, err)
		second, err := gguf.Parse("again", buf.Bytes())
		require.NoError(t, err, "reading what Writer wrote")
		require.Equal(t, first.Metadata(), second.Metadata())
		require.Equal(t, len(first.Tensors()), len(second.Tensors()))
		for i, tt := range first.Tensors() {
			t2 := second.Tensors()[i]
			require.Equal(t, tt.Name, t2.Name)
			require.Equal(t, tt.Dims, t2.Dims)
			require.Equal(t, tt.Type, t2.Type)
			require.Equal(t, first.Data(tt), second.Data(t2))
		}
	})
}
