package gguf

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/zbench/zbench/models/llama"
	"github.com/zbench/zbench/models/nn"
	"github.com/zbench/zbench/models/tokenizer"
)

// Metadata keys of a Llama-family file (llama.cpp's LLM_KV names).
const (
	keyArch       = "general.architecture"
	keyName       = "general.name"
	keyFileType   = "general.file_type"
	keyQuantVer   = "general.quantization_version"
	keyVocab      = "llama.vocab_size"
	keyContext    = "llama.context_length"
	keyEmbedding  = "llama.embedding_length"
	keyBlocks     = "llama.block_count"
	keyFFN        = "llama.feed_forward_length"
	keyRopeDims   = "llama.rope.dimension_count"
	keyHeads      = "llama.attention.head_count"
	keyKVHeads    = "llama.attention.head_count_kv"
	keyKeyLen     = "llama.attention.key_length"
	keyValueLen   = "llama.attention.value_length"
	keyRMSEps     = "llama.attention.layer_norm_rms_epsilon"
	keyRopeBase   = "llama.rope.freq_base"
	keyRopeType   = "llama.rope.scaling.type"
	keyRopeFactor = "llama.rope.scaling.factor"
	keyRopeLinear = "llama.rope.scale_linear" // older files' linear factor
	keyTokModel   = "tokenizer.ggml.model"
	keyTokPre     = "tokenizer.ggml.pre"
	keyTokens     = "tokenizer.ggml.tokens"
	keyScores     = "tokenizer.ggml.scores"
	keyTokenTypes = "tokenizer.ggml.token_type"
	keyMerges     = "tokenizer.ggml.merges"
	keyBOS        = "tokenizer.ggml.bos_token_id"
	keyEOS        = "tokenizer.ggml.eos_token_id"
	keyUNK        = "tokenizer.ggml.unknown_token_id"
	keyPAD        = "tokenizer.ggml.padding_token_id"
	keyAddBOS     = "tokenizer.ggml.add_bos_token"
	keyAddEOS     = "tokenizer.ggml.add_eos_token"
	keyChat       = "tokenizer.chat_template"
	architecture  = "llama"
	spTokenizer   = "llama" // tokenizer.ggml.model of SentencePiece vocabularies
)

// fileTypes are llama_ftype's values of the files this package writes.
var fileTypes = map[Type]uint32{F32: 0, F16: 1, Q4_0: 2, Q8_0: 7, BF16: 32}

// Tensor names: GGUF's, and the Hugging Face names models/llama uses.
var (
	globalNames = map[string]string{
		"token_embd.weight":  "model.embed_tokens.weight",
		"output_norm.weight": "model.norm.weight",
		"output.weight":      "lm_head.weight",
	}
	blockNames = map[string]string{
		"attn_norm.weight":   "input_layernorm.weight",
		"attn_q.weight":      "self_attn.q_proj.weight",
		"attn_k.weight":      "self_attn.k_proj.weight",
		"attn_v.weight":      "self_attn.v_proj.weight",
		"attn_output.weight": "self_attn.o_proj.weight",
		"ffn_norm.weight":    "post_attention_layernorm.weight",
		"ffn_gate.weight":    "mlp.gate_proj.weight",
		"ffn_up.weight":      "mlp.up_proj.weight",
		"ffn_down.weight":    "mlp.down_proj.weight",
	}
)

// hfName maps a GGUF tensor name to its Hugging Face name.
func hfName(name string) (string, bool) {
	if hf, ok := globalNames[name]; ok {
		return hf, true
	}
	rest, ok := strings.CutPrefix(name, "blk.")
	if !ok {
		return "", false
	}
	num, suffix, ok := strings.Cut(rest, ".")
	i, err := strconv.Atoi(num)
	if !ok || err != nil || i < 0 || strconv.Itoa(i) != num {
		return "", false
	}
	hf, ok := blockNames[suffix]
	if !ok {
		return "", false
	}
	return fmt.Sprintf("model.layers.%d.%s", i, hf), true
}

// ggufName maps a Hugging Face Llama tensor name to its GGUF name.
func ggufName(hf string) (string, bool) {
	for g, h := range globalNames {
		if h == hf {
			return g, true
		}
	}
	rest, ok := strings.CutPrefix(hf, "model.layers.")
	if !ok {
		return "", false
	}
	num, suffix, ok := strings.Cut(rest, ".")
	if _, err := strconv.Atoi(num); !ok || err != nil {
		return "", false
	}
	for g, h := range blockNames {
		if h == suffix {
			return "blk." + num + "." + g, true
		}
	}
	return "", false
}

// Llama is a GGUF file of the llama architecture read as models/llama's
// model: its config, and an nn.Source of its tensors under Hugging Face's
// names, dequantized to float32, with llama.cpp's q/k row order undone.
type Llama struct {
	File   *File
	Config llama.Config
	byHF   map[string]Tensor
}

// OpenLlama opens the GGUF file at path as a Llama model.
func OpenLlama(path string) (*Llama, error) {
	f, err := Open(path)
	if err != nil {
		return nil, err
	}
	l, err := NewLlama(f)
	if err != nil {
		return nil, errors.Join(err, f.Close())
	}
	return l, nil
}

// NewLlama reads f's config and checks that its tensors are exactly the
// config's parameters, of their shapes and of types Dequantize reads.
func NewLlama(f *File) (*Llama, error) {
	cfg, err := f.llamaConfig()
	if err != nil {
		return nil, err
	}
	l := &Llama{File: f, Config: cfg, byHF: map[string]Tensor{}}
	for _, t := range f.tensors {
		hf, ok := hfName(t.Name)
		if !ok {
			return nil, f.errorf("tensor %q is not a tensor of a Llama model (rope_freqs, llama3 rope scaling, is not supported either): %w", t.Name, ErrUnsupported)
		}
		l.byHF[hf] = t
	}
	_, hasOutput := f.Tensor("output.weight")
	l.Config.TieWordEmbeddings = !hasOutput
	params := l.Config.Params()
	for _, p := range params {
		t, ok := l.byHF[p.Name]
		g, _ := ggufName(p.Name)
		if !ok {
			return nil, f.errorf("tensor %q (%s) is missing for the config's %d layers: %w", g, p.Name, cfg.NumHiddenLayers, ErrMissing)
		}
		if !slices.Equal(t.Shape(), p.Shape) {
			return nil, f.errorf("tensor %q has ne %v (shape %v), the metadata's config wants shape %v", g, t.Dims, t.Shape(), p.Shape)
		}
		if _, ok := dequantizers[t.Type]; !ok {
			return nil, f.errorf("tensor %q has type %s, which this package does not read (F32, F16, BF16, Q8_0, Q4_0, Q4_K, Q6_K): %w", g, t.Type, ErrUnsupported)
		}
	}
	if len(params) != len(l.byHF) {
		for _, t := range f.tensors {
			hf, _ := hfName(t.Name)
			if !slices.ContainsFunc(params, func(p nn.Param) bool { return p.Name == hf }) {
				return nil, f.errorf("tensor %q has no place in the config (%s = %d)", t.Name, keyBlocks, cfg.NumHiddenLayers)
			}
		}
	}
	return l, nil
}

// Close releases the file.
func (l *Llama) Close() error { return l.File.Close() }

// String names the file in messages.
func (l *Llama) String() string { return l.File.name }

// Values implements nn.Source: the parameter's tensor dequantized to
// float32, q_proj and k_proj rows put back in Hugging Face's order.
func (l *Llama) Values(p nn.Param) ([]float32, error) {
	t, ok := l.byHF[p.Name]
	if !ok {
		return nil, fmt.Errorf("gguf: %s: no tensor for parameter %q: %w", l.File.name, p.Name, nn.ErrWeights)
	}
	if !slices.Equal(t.Shape(), p.Shape) {
		return nil, fmt.Errorf("gguf: %s: tensor %q has shape %v, parameter %q wants %v: %w", l.File.name, t.Name, t.Shape(), p.Name, p.Shape, nn.ErrWeights)
	}
	v := make([]float32, t.Len())
	if err := Dequantize(t.Type, v, l.File.Data(t)); err != nil {
		return nil, fmt.Errorf("gguf: %s: tensor %q: %w", l.File.name, t.Name, err)
	}
	if heads := l.rotaryHeads(p.Name); heads > 0 {
		v = unpermute(v, heads, t.Dims[0])
	}
	return v, nil
}

// WInt4 returns the named weight [out, in] as kernels.WInt4 codes in
// groups of 32 and their scales, the QWeight layout, when it is stored as
// Q4_0, and nil otherwise. The weight is the same, exactly: a Q4_0 block
// is a group, its d (which may be negative) the group's scale and its
// codes q the stored code+8; only the nibbles move, from Q4_0's pairs of
// elements j and j+16 to WInt4's 2j and 2j+1. q_proj and k_proj rows are
// unpermuted as Values does.
func (l *Llama) WInt4(param string, out, in int) ([]byte, []float32, error) {
	return l.repack(param, out, in, Q4_0, wint4FromQ4_0)
}

// wint4FromQ4_0 repacks the first blocks Q4_0 blocks of src as
// kernels.WInt4 codes and their scales: each block's d the group's scale,
// its codes as they are, elements j and j+16 of a byte moved to 2j and
// 2j+1.
func wint4FromQ4_0(src []byte, blocks int) ([]byte, []float32) {
	codes, scales := make([]byte, blocks*qk/2), make([]float32, blocks)
	var q [qk]byte
	for b := range blocks {
		blk := src[b*18 : b*18+18]
		scales[b] = f16(blk)
		for j := range qk / 2 {
			q[j], q[j+qk/2] = blk[2+j]&0xf, blk[2+j]>>4
		}
		dst := codes[b*qk/2 : (b+1)*qk/2]
		for j := range dst {
			dst[j] = q[2*j] | q[2*j+1]<<4
		}
	}
	return codes, scales
}

// WInt8 returns the named weight [out, in] as kernels.WInt8 codes in
// groups of 32 and their scales, the QWeight layout, when it is stored as
// Q8_0, and nil otherwise. The weight is the same, exactly: a Q8_0 block
// is a group, its d the group's scale and its 32 int8 values the codes.
// q_proj and k_proj rows are unpermuted as Values does.
func (l *Llama) WInt8(param string, out, in int) ([]byte, []float32, error) {
	return l.repack(param, out, in, Q8_0, wint8FromQ8_0)
}

// repack returns the named weight [out, in] repacked by convert when it
// is stored in type typ, and nil otherwise, q_proj and k_proj rows
// unpermuted as Values does.
func (l *Llama) repack(param string, out, in int, typ Type, convert func([]byte, int) ([]byte, []float32)) ([]byte, []float32, error) {
	t, ok := l.byHF[param]
	if !ok || t.Type != typ {
		return nil, nil, nil
	}
	if !slices.Equal(t.Shape(), []int{out, in}) {
		return nil, nil, fmt.Errorf("gguf: %s: tensor %q has shape %v, want [%d %d]: %w", l.File.name, t.Name, t.Shape(), out, in, nn.ErrWeights)
	}
	codes, scales := convert(l.File.Data(t), out*in/qk)
	if heads := l.rotaryHeads(param); heads > 0 {
		codes = unpermute(codes, heads, len(codes)/out)
		scales = unpermute(scales, heads, in/qk)
	}
	return codes, scales, nil
}

// wint8FromQ8_0 repacks the first blocks Q8_0 blocks of src as
// kernels.WInt8 codes in groups of 32 and their scales: each block's d
// the group's scale, its 32 values the codes.
func wint8FromQ8_0(src []byte, blocks int) ([]byte, []float32) {
	codes, scales := make([]byte, blocks*qk), make([]float32, blocks)
	for b := range blocks {
		blk := src[b*(2+qk) : (b+1)*(2+qk)]
		scales[b] = f16(blk)
		copy(codes[b*qk:(b+1)*qk], blk[2:])
	}
	return codes, scales
}

// Tensor returns the GGUF tensor holding a Hugging Face parameter.
func (l *Llama) Tensor(param string) (Tensor, bool) {
	t, ok := l.byHF[param]
	return t, ok
}

// rotaryHeads is the number of heads whose rows llama.cpp's converter
// interleaves in the named parameter (q_proj: heads, k_proj: KV heads), 0
// for other parameters.
func (l *Llama) rotaryHeads(param string) int { return rotaryHeads(l.Config, param) }

func rotaryHeads(cfg llama.Config, param string) int {
	switch {
	case strings.HasSuffix(param, ".self_attn.q_proj.weight"):
		return cfg.NumAttentionHeads
	case strings.HasSuffix(param, ".self_attn.k_proj.weight"):
		return cfg.NumKeyValueHeads
	}
	return 0
}

// permute reorders the rows of w [heads·D, cols] as llama.cpp's converter
// does for q and k: within each head, row j·D/2 + i (rotary half j) moves
// to 2i + j, interleaving the halves.
func permute[T any](w []T, heads, cols int) []T {
	return reorderRows(w, heads, cols, func(half, i, d int) (from, to int) { return half*d/2 + i, 2*i + half })
}

// unpermute undoes permute.
func unpermute[T any](w []T, heads, cols int) []T {
	return reorderRows(w, heads, cols, func(half, i, d int) (from, to int) { return 2*i + half, half*d/2 + i })
}

// reorderRows moves, within each head of D = rows/heads rows, row from to
// row to for every (half, i) with half in {0, 1} and i < D/2.
func reorderRows[T any](w []T, heads, cols int, move func(half, i, d int) (from, to int)) []T {
	out := make([]T, len(w))
	d := len(w) / cols / heads
	for h := range heads {
		base := h * d
		for half := range 2 {
			for i := range d / 2 {
				from, to := move(half, i, d)
				copy(out[(base+to)*cols:(base+to+1)*cols], w[(base+from)*cols:(base+from+1)*cols])
			}
		}
	}
	return out
}

// uintKey reads a required (or, with def ≥ 0, optional) non-negative
// integer key.
func (f *File) uintKey(key string, def int) (int, error) {
	v, ok := f.Value(key)
	if !ok {
		if def < 0 {
			return 0, f.errorf("metadata key %s: %w", key, ErrMissing)
		}
		return def, nil
	}
	n, isInt := v.Int()
	if !isInt {
		return 0, f.errorf("metadata %s is a %s, want an integer", key, v)
	}
	if n < 0 || n > 1<<31 {
		return 0, f.errorf("metadata %s = %d is out of range", key, n)
	}
	return int(n), nil
}

// floatKey reads a required (or, when optional, defaulted) float key.
func (f *File) floatKey(key string, def float64, optional bool) (float64, error) {
	v, ok := f.Value(key)
	if !ok {
		if !optional {
			return 0, f.errorf("metadata key %s: %w", key, ErrMissing)
		}
		return def, nil
	}
	x, isFloat := v.Float()
	if !isFloat {
		return 0, f.errorf("metadata %s is a %s, want a float", key, v)
	}
	if v.Type == TypeFloat32 {
		// The shortest decimal of the float32, as config.json would say
		// it: 1e-05, not 9.999999747378752e-06.
		x, _ = strconv.ParseFloat(strconv.FormatFloat(x, 'g', -1, 32), 64)
	}
	return x, nil
}

// stringKey reads a string key; "" when absent and optional.
func (f *File) stringKey(key string, optional bool) (string, error) {
	v, ok := f.Value(key)
	if !ok {
		if !optional {
			return "", f.errorf("metadata key %s: %w", key, ErrMissing)
		}
		return "", nil
	}
	s, isString := v.Any().(string)
	if !isString {
		return "", f.errorf("metadata %s is a %s, want a string", key, v)
	}
	return s, nil
}

// llamaConfig maps the llama.* metadata to models/llama's config.
func (f *File) llamaConfig() (llama.Config, error) {
	arch, err := f.stringKey(keyArch, false)
	if err != nil {
		return llama.Config{}, err
	}
	if arch != architecture {
		return llama.Config{}, f.errorf("%s is %q: only llama is supported: %w", keyArch, arch, ErrUnsupported)
	}
	var c llama.Config
	for _, k := range []struct {
		key string
		dst *int
		def int
	}{
		{keyEmbedding, &c.HiddenSize, -1}, {keyFFN, &c.IntermediateSize, -1}, {keyBlocks, &c.NumHiddenLayers, -1},
		{keyHeads, &c.NumAttentionHeads, -1}, {keyContext, &c.MaxPositionEmbeddings, -1},
	} {
		if *k.dst, err = f.uintKey(k.key, k.def); err != nil {
			return c, err
		}
	}
	if c.NumKeyValueHeads, err = f.uintKey(keyKVHeads, c.NumAttentionHeads); err != nil {
		return c, err
	}
	if c.NumAttentionHeads == 0 {
		return c, f.errorf("metadata %s is 0", keyHeads)
	}
	if c.HeadDim, err = f.uintKey(keyKeyLen, c.HiddenSize/c.NumAttentionHeads); err != nil {
		return c, err
	}
	vlen, err := f.uintKey(keyValueLen, c.HeadDim)
	if err != nil {
		return c, err
	}
	if vlen != c.HeadDim {
		return c, f.errorf("%s %d differs from %s %d: Llama has one head dimension: %w", keyValueLen, vlen, keyKeyLen, c.HeadDim, ErrUnsupported)
	}
	rot, err := f.uintKey(keyRopeDims, c.HeadDim)
	if err != nil {
		return c, err
	}
	if rot != c.HeadDim {
		return c, f.errorf("%s %d is not the head dimension %d (partial rotary embeddings are not Llama's): %w", keyRopeDims, rot, c.HeadDim, ErrUnsupported)
	}
	if c.RMSNormEps, err = f.floatKey(keyRMSEps, 0, false); err != nil {
		return c, err
	}
	if c.RopeTheta, err = f.floatKey(keyRopeBase, 10000, true); err != nil {
		return c, err
	}
	if c.RopeScaling, err = f.ropeScaling(); err != nil {
		return c, err
	}
	if c.VocabSize, err = f.vocabSize(); err != nil {
		return c, err
	}
	c.BOSTokenID, c.EOSTokenIDs = 1, []int{2}
	if v, ok := f.Value(keyBOS); ok {
		if id, isInt := v.Int(); isInt {
			c.BOSTokenID = int(id)
		}
	}
	if v, ok := f.Value(keyEOS); ok {
		if id, isInt := v.Int(); isInt {
			c.EOSTokenIDs = []int{int(id)}
		}
	}
	c.TorchDType = "float32"
	if ft, ok := f.Value(keyFileType); ok {
		switch n, _ := ft.Int(); n {
		case int64(fileTypes[F16]):
			c.TorchDType = "float16"
		case int64(fileTypes[BF16]):
			c.TorchDType = "bfloat16"
		}
	}
	if err := c.Validate(); err != nil {
		return c, f.errorf("the llama.* metadata: %w", err)
	}
	return c, nil
}

// ropeScaling reads llama.rope.scaling.*: none, or linear.
func (f *File) ropeScaling() (*llama.RopeScaling, error) {
	typ, err := f.stringKey(keyRopeType, true)
	if err != nil {
		return nil, err
	}
	switch typ {
	case "", "none":
		if _, ok := f.Value(keyRopeLinear); !ok {
			return nil, nil
		}
		factor, err := f.floatKey(keyRopeLinear, 0, false)
		if err != nil || factor == 1 {
			return nil, err
		}
		return &llama.RopeScaling{Type: "linear", Factor: factor}, nil
	case "linear":
		factor, err := f.floatKey(keyRopeFactor, 0, false)
		if err != nil {
			return nil, err
		}
		return &llama.RopeScaling{Type: "linear", Factor: factor}, nil
	}
	return nil, f.errorf("%s %q: only linear rope scaling is supported: %w", keyRopeType, typ, ErrUnsupported)
}

// vocabSize is llama.vocab_size, or else the number of tokens, or else
// token_embd's rows.
func (f *File) vocabSize() (int, error) {
	if _, ok := f.Value(keyVocab); ok {
		return f.uintKey(keyVocab, -1)
	}
	if v, ok := f.Value(keyTokens); ok && v.Type == TypeArray {
		return v.Len(), nil
	}
	if t, ok := f.Tensor("token_embd.weight"); ok && len(t.Dims) == 2 {
		return t.Dims[1], nil
	}
	return 0, f.errorf("metadata key %s (and no %s or token_embd.weight to count): %w", keyVocab, keyTokens, ErrMissing)
}

// Vocab is the tokenizer a GGUF file embeds (tokenizer.ggml.*).
type Vocab struct {
	// Model is tokenizer.ggml.model: "llama" for SentencePiece
	// vocabularies, "gpt2" for byte-level BPE, ...
	Model  string
	Tokens []string
	// Scores and Types are nil when the file has none.
	Scores []float32
	Types  []int32
	// Merges are the BPE merges of byte-level vocabularies, "a b".
	Merges []string
	// BOS, EOS, UNK and PAD are the special ids, -1 when absent.
	BOS, EOS, UNK, PAD int
	// AddBOS and AddEOS are the add flags, defaulting as llama.cpp does
	// for SentencePiece vocabularies (BOS yes, EOS no).
	AddBOS, AddEOS bool
	// ChatTemplate is tokenizer.chat_template's Jinja source, "" when
	// absent.
	ChatTemplate string
}

// Vocab reads the embedded tokenizer's keys.
func (f *File) Vocab() (Vocab, error) {
	v := Vocab{BOS: -1, EOS: -1, UNK: -1, PAD: -1, AddBOS: true}
	var err error
	if v.Model, err = f.stringKey(keyTokModel, false); err != nil {
		return v, err
	}
	if v.ChatTemplate, err = f.stringKey(keyChat, true); err != nil {
		return v, err
	}
	tv, ok := f.Value(keyTokens)
	if !ok {
		return v, f.errorf("metadata key %s: %w", keyTokens, ErrMissing)
	}
	if v.Tokens, ok = tv.Any().([]string); !ok {
		return v, f.errorf("metadata %s is a %s, want an array of strings", keyTokens, tv)
	}
	n := len(v.Tokens)
	if sv, ok := f.Value(keyScores); ok {
		if v.Scores, ok = sv.Any().([]float32); !ok || len(v.Scores) != n {
			return v, f.errorf("metadata %s is a %s, want an array of %d float32", keyScores, sv, n)
		}
	}
	if tt, ok := f.Value(keyTokenTypes); ok {
		if v.Types, ok = tt.Any().([]int32); !ok || len(v.Types) != n {
			return v, f.errorf("metadata %s is a %s, want an array of %d int32", keyTokenTypes, tt, n)
		}
	}
	if mv, ok := f.Value(keyMerges); ok {
		if v.Merges, ok = mv.Any().([]string); !ok {
			return v, f.errorf("metadata %s is a %s, want an array of strings", keyMerges, mv)
		}
	}
	for _, k := range []struct {
		key string
		dst *int
	}{{keyBOS, &v.BOS}, {keyEOS, &v.EOS}, {keyUNK, &v.UNK}, {keyPAD, &v.PAD}} {
		if _, ok := f.Value(k.key); !ok {
			continue
		}
		id, err := f.uintKey(k.key, -1)
		if err != nil {
			return v, err
		}
		if id >= n {
			return v, f.errorf("metadata %s = %d is not a token (%d tokens)", k.key, id, n)
		}
		*k.dst = id
	}
	for _, k := range []struct {
		key string
		dst *bool
	}{{keyAddBOS, &v.AddBOS}, {keyAddEOS, &v.AddEOS}} {
		if bv, ok := f.Value(k.key); ok {
			b, isBool := bv.Any().(bool)
			if !isBool {
				return v, f.errorf("metadata %s is a %s, want a bool", k.key, bv)
			}
			*k.dst = b
		}
	}
	return v, nil
}

// Tokenizer builds the file's embedded tokenizer: a SentencePiece
// vocabulary (tokenizer.ggml.model "llama") through models/tokenizer.
func (f *File) Tokenizer() (*tokenizer.Tokenizer, error) {
	v, err := f.Vocab()
	if err != nil {
		return nil, err
	}
	if v.Model != spTokenizer {
		return nil, f.errorf("%s is %q: only SentencePiece vocabularies (%q) are supported: %w", keyTokModel, v.Model, spTokenizer, ErrUnsupported)
	}
	p := tokenizer.Pieces{Tokens: v.Tokens, Scores: v.Scores, Types: v.Types, BOS: v.BOS, EOS: v.EOS, AddBOS: v.AddBOS, AddEOS: v.AddEOS, ChatTemplate: v.ChatTemplate}
	if p.Scores == nil {
		p.Scores = make([]float32, len(v.Tokens))
	}
	if p.Types == nil {
		p.Types = make([]int32, len(v.Tokens))
		for i := range p.Types {
			p.Types[i] = tokenizer.PieceNormal
		}
		if v.UNK >= 0 {
			p.Types[v.UNK] = tokenizer.PieceUnknown
		}
	}
	t, err := tokenizer.FromPieces(f.name, p)
	if err != nil {
		return nil, fmt.Errorf("gguf: embedded tokenizer: %w", err)
	}
	return t, nil
}
