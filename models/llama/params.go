package llama

import (
	"fmt"
	"strings"

	"github.com/zbench/zbench/models/nn"
)

// Tensor names of a Hugging Face LlamaForCausalLM checkpoint.
const (
	embedTokens = "model.embed_tokens.weight"
	finalNorm   = "model.norm.weight"
	lmHead      = "lm_head.weight"
)

// layerParam names a tensor of decoder layer i.
func layerParam(i int, rest string) string { return fmt.Sprintf("model.layers.%d.%s", i, rest) }

// Params lists the model's parameters in a fixed order: the token
// embeddings, the decoder layers, the final norm, and lm_head unless the
// embeddings are tied to it.
func (c Config) Params() []nn.Param {
	H, I := c.HiddenSize, c.IntermediateSize
	var ps []nn.Param
	add := func(name string, shape ...int) { ps = append(ps, nn.Param{Name: name, Shape: shape}) }
	add(embedTokens, c.VocabSize, H)
	for i := range c.NumHiddenLayers {
		l := func(rest string) string { return layerParam(i, rest) }
		add(l("input_layernorm.weight"), H)
		add(l("self_attn.q_proj.weight"), c.QDim(), H)
		add(l("self_attn.k_proj.weight"), c.KVDim(), H)
		add(l("self_attn.v_proj.weight"), c.KVDim(), H)
		add(l("self_attn.o_proj.weight"), H, c.QDim())
		add(l("post_attention_layernorm.weight"), H)
		add(l("mlp.gate_proj.weight"), I, H)
		add(l("mlp.up_proj.weight"), I, H)
		add(l("mlp.down_proj.weight"), H, I)
	}
	add(finalNorm, H)
	if !c.TieWordEmbeddings {
		add(lmHead, c.VocabSize, H)
	}
	return ps
}

// CountParams is the number of parameter values.
func (c Config) CountParams() int64 {
	var n int64
	for _, p := range c.Params() {
		n += int64(p.Len())
	}
	return n
}

// SyntheticRange returns the center and half-width of the named
// parameter's synthetic values: RMSNorm weights uniform in 1 ± 0.1,
// every other tensor in ±0.05 (testdata/reference/llama.py's ranges).
func SyntheticRange(name string) (center, half float64) {
	if strings.HasSuffix(name, "norm.weight") {
		return 1, 0.1
	}
	return 0, 0.05
}

// Synthetic returns seeded synthetic weights of any config, identical to
// testdata/reference/llama.py's: each tensor from the stream of its
// Hugging Face name (package synth), in the ranges of SyntheticRange.
func Synthetic(seed uint64) nn.Source { return nn.Synthetic(seed, SyntheticRange) }

// names maps parameters to checkpoint tensors: Hugging Face's names as
// they are; rotary inv_freq buffers, which old checkpoints carry and which
// this package computes from the config, may be left unread.
var names = nn.Names{
	Model:      "llama",
	Candidates: func(param string) []string { return []string{param} },
	Ignored: func(name string) bool {
		return strings.HasSuffix(name, "rotary_emb.inv_freq")
	},
}

// OpenCheckpoint opens the safetensors files of a checkpoint (one
// model.safetensors, or every shard of a sharded one) with Hugging Face
// Llama names.
func OpenCheckpoint(paths ...string) (*nn.Checkpoint, error) { return nn.OpenCheckpoint(paths, names) }
