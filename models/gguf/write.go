package gguf

import (
	"bufio"
	"encoding/binary"
	"fmt"
	"io"
	"slices"

	"github.com/zbench/zbench/models/llama"
	"github.com/zbench/zbench/models/nn"
	"github.com/zbench/zbench/models/tokenizer"
)

// Writer collects the metadata and tensors of a GGUF file and writes it.
type Writer struct {
	alignment int
	kvs       []KV
	tensors   []Tensor
	data      [][]byte
}

// NewWriter returns an empty file with the default alignment.
func NewWriter() *Writer { return &Writer{alignment: DefaultAlignment} }

// Add appends a metadata entry; general.alignment (a uint32 power of two)
// also sets the data alignment. A key added twice is an error.
func (w *Writer) Add(key string, v Value) error {
	if slices.ContainsFunc(w.kvs, func(kv KV) bool { return kv.Key == key }) {
		return fmt.Errorf("gguf: metadata key %q added twice", key)
	}
	if key == KeyAlignment {
		a, ok := v.scalar.(uint32)
		if !ok || a == 0 || a&(a-1) != 0 {
			return fmt.Errorf("gguf: %s = %v, want a uint32 power of two", key, v)
		}
		w.alignment = int(a)
	}
	w.kvs = append(w.kvs, KV{key, v})
	return nil
}

// AddTensor appends a tensor of row-major shape (outermost first) whose
// data, already in type t, is data.
func (w *Writer) AddTensor(name string, shape []int, t Type, data []byte) error {
	if slices.ContainsFunc(w.tensors, func(x Tensor) bool { return x.Name == name }) {
		return fmt.Errorf("gguf: tensor %q added twice", name)
	}
	info, ok := t.info()
	if !ok {
		return fmt.Errorf("gguf: tensor %q: unknown type %d: %w", name, uint32(t), ErrUnsupported)
	}
	if len(shape) == 0 || len(shape) > maxDims {
		return fmt.Errorf("gguf: tensor %q: %d dimensions, want 1 to %d", name, len(shape), maxDims)
	}
	dims := slices.Clone(shape)
	slices.Reverse(dims)
	x := Tensor{Name: name, Dims: dims, Type: t}
	if dims[0]%info.block != 0 || int64(len(data)) != int64(x.Len()/info.block*info.bytes) {
		return fmt.Errorf("gguf: tensor %q: shape %v in %s needs rows of whole blocks of %d and %d bytes, got %d", name, shape, t, info.block, x.Len()/info.block*info.bytes, len(data))
	}
	x.Size = int64(len(data))
	w.tensors = append(w.tensors, x)
	w.data = append(w.data, data)
	return nil
}

// WriteTo writes the file: header, metadata, tensor infos, padding, and
// each tensor's data padded to the alignment.
func (w *Writer) WriteTo(out io.Writer) (int64, error) {
	pad := func(n int64) int64 { return alignUp(n, int64(w.alignment)) - n }
	le := binary.LittleEndian
	h := []byte(Magic)
	h = le.AppendUint32(h, Version)
	h = le.AppendUint64(h, uint64(len(w.tensors)))
	h = le.AppendUint64(h, uint64(len(w.kvs)))
	var err error
	for _, kv := range w.kvs {
		h = appendString(h, kv.Key)
		h = le.AppendUint32(h, uint32(kv.Value.Type))
		if h, err = appendValue(h, kv.Value); err != nil {
			return 0, fmt.Errorf("gguf: metadata %s: %w", kv.Key, err)
		}
	}
	var off int64
	for _, t := range w.tensors {
		h = appendString(h, t.Name)
		h = le.AppendUint32(h, uint32(len(t.Dims)))
		for _, d := range t.Dims {
			h = le.AppendUint64(h, uint64(d))
		}
		h = le.AppendUint32(h, uint32(t.Type))
		h = le.AppendUint64(h, uint64(off))
		off += t.Size + pad(t.Size)
	}
	h = append(h, make([]byte, pad(int64(len(h))))...)
	bw := bufio.NewWriterSize(out, 1<<20)
	n, err := bw.Write(h)
	total := int64(n)
	for _, d := range w.data {
		if err != nil {
			break
		}
		n, err = bw.Write(d)
		total += int64(n)
		if err == nil {
			n, err = bw.Write(make([]byte, pad(int64(len(d)))))
			total += int64(n)
		}
	}
	if err == nil {
		err = bw.Flush()
	}
	if err != nil {
		return total, fmt.Errorf("gguf: writing: %w", err)
	}
	return total, nil
}

// StorageType is the type a Llama tensor of row-major shape is stored in,
// in a file of type t: 1-D tensors (the norms) in F32; 2-D ones in t, or
// in F16 when their rows are not whole blocks of t (as llama.cpp's
// converter falls back).
func StorageType(shape []int, t Type) Type {
	if len(shape) == 1 {
		return F32
	}
	if shape[len(shape)-1]%t.BlockSize() != 0 {
		return F16
	}
	return t
}

// WriteLlama writes a Llama model as a GGUF file llama.cpp loads: cfg's
// llama.* metadata, the tokenizer tok embedded (its Pieces), and the
// parameters from src in type t (see StorageType; F32, F16, BF16, Q8_0 or
// Q4_0), q_proj and k_proj rows in llama.cpp's order. name is
// general.name.
func WriteLlama(out io.Writer, name string, cfg llama.Config, src nn.Source, tok *tokenizer.Tokenizer, t Type) error {
	w, err := llamaWriter(name, cfg, tok, t)
	if err != nil {
		return err
	}
	for _, p := range cfg.Params() {
		v, err := src.Values(p)
		if err != nil {
			return err
		}
		if heads := rotaryHeads(cfg, p.Name); heads > 0 {
			v = permute(v, heads, p.Shape[1])
		}
		st := StorageType(p.Shape, t)
		data, err := Quantize(st, v)
		if err != nil {
			return fmt.Errorf("gguf: parameter %s: %w", p.Name, err)
		}
		g, _ := ggufName(p.Name)
		if err := w.AddTensor(g, p.Shape, st, data); err != nil {
			return err
		}
	}
	_, err = w.WriteTo(out)
	return err
}

// llamaWriter is a Writer with a Llama model's metadata.
func llamaWriter(name string, cfg llama.Config, tok *tokenizer.Tokenizer, t Type) (*Writer, error) {
	ft, ok := fileTypes[t]
	if !ok {
		return nil, fmt.Errorf("gguf: cannot write a Llama model in %s (want F32, F16, BF16, Q8_0 or Q4_0): %w", t, ErrUnsupported)
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	p, err := tok.Pieces()
	if err != nil {
		return nil, err
	}
	if len(p.Tokens) != cfg.VocabSize {
		return nil, fmt.Errorf("gguf: the tokenizer %s has %d tokens, the config's vocab_size is %d", tok.Path(), len(p.Tokens), cfg.VocabSize)
	}
	unk := slices.Index(p.Types, tokenizer.PieceUnknown)
	w := NewWriter()
	u32 := func(n int) Value { return Uint32(uint32(n)) }
	kvs := []KV{
		{keyArch, String(architecture)},
		{keyName, String(name)},
		{keyFileType, Uint32(ft)},
		{keyQuantVer, Uint32(2)},
		{keyVocab, u32(cfg.VocabSize)},
		{keyContext, u32(cfg.MaxPositionEmbeddings)},
		{keyEmbedding, u32(cfg.HiddenSize)},
		{keyBlocks, u32(cfg.NumHiddenLayers)},
		{keyFFN, u32(cfg.IntermediateSize)},
		{keyRopeDims, u32(cfg.HeadDim)},
		{keyHeads, u32(cfg.NumAttentionHeads)},
		{keyKVHeads, u32(cfg.NumKeyValueHeads)},
		{keyRMSEps, Float32(float32(cfg.RMSNormEps))},
		{keyRopeBase, Float32(float32(cfg.RopeTheta))},
	}
	if cfg.HeadDim != cfg.HiddenSize/cfg.NumAttentionHeads {
		kvs = append(kvs, KV{keyKeyLen, u32(cfg.HeadDim)}, KV{keyValueLen, u32(cfg.HeadDim)})
	}
	if rs := cfg.RopeScaling; rs != nil {
		if rs.Type != "linear" {
			return nil, fmt.Errorf("gguf: rope_scaling %s cannot be written (linear only): %w", rs.Type, ErrUnsupported)
		}
		kvs = append(kvs, KV{keyRopeType, String("linear")}, KV{keyRopeFactor, Float32(float32(rs.Factor))})
	}
	kvs = append(kvs,
		KV{keyTokModel, String(spTokenizer)},
		KV{keyTokPre, String("default")},
		KV{keyTokens, Strings(p.Tokens)},
		KV{keyScores, Float32s(p.Scores)},
		KV{keyTokenTypes, Int32s(p.Types)},
	)
	for _, id := range []struct {
		key string
		id  int
	}{{keyBOS, p.BOS}, {keyEOS, p.EOS}, {keyUNK, unk}} {
		if id.id >= 0 {
			kvs = append(kvs, KV{id.key, u32(id.id)})
		}
	}
	kvs = append(kvs, KV{keyAddBOS, Bool(p.AddBOS)}, KV{keyAddEOS, Bool(p.AddEOS)})
	if p.ChatTemplate != "" {
		kvs = append(kvs, KV{keyChat, String(p.ChatTemplate)})
	}
	for _, kv := range kvs {
		if err := w.Add(kv.Key, kv.Value); err != nil {
			return nil, err
		}
	}
	return w, nil
}
