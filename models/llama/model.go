// Package llama is the Llama family of decoder-only language models
// (Llama 2 and 3, TinyLlama, and any checkpoint of Hugging Face's
// LlamaForCausalLM) over any kernels.Backend that implements
// kernels.Decoder: config.json and safetensors checkpoints (sharded or
// not, F32, F16 or BF16) with Hugging Face's names, seeded synthetic
// weights of any config, prefill of a batch of prompts into a KV cache,
// KV-cached decode, full-sequence logits with left or right padding, and
// generation with greedy or sampled decoding, in floating point or with
// the decoder layers' linear modules in int8 (Model.Quantize: W8A8 with
// dynamic per-token activation scales).
//
// Semantics are Hugging Face's LlamaForCausalLM: RMSNorm before attention
// and MLP, rotary embeddings in the rotate-half layout (with linear and
// llama3 scaling), grouped KV heads, SiLU-gated MLP, optionally tied
// embeddings. Positions come from the attention mask as Hugging Face's
// generate computes them, so a left-padded and a right-padded batch give
// every real token the same logits.
package llama

import (
	"errors"
	"fmt"

	"github.com/zbench/zbench/kernels"
	"github.com/zbench/zbench/models/layers"
	"github.com/zbench/zbench/models/nn"
)

// layer is one decoder layer's parameters; linear weights are [out, in]
// as in torch.nn.Linear.
type layer struct {
	attnNorm, mlpNorm          *kernels.Tensor
	q, k, v, o, gate, up, down linear
}

// module is one of a layer's linear modules and its name under
// model.layers.N.
type module struct {
	name string
	lin  *linear
}

// modules returns l's linear modules in the checkpoint's order.
func (l *layer) modules() []module {
	return []module{
		{"self_attn.q_proj", &l.q}, {"self_attn.k_proj", &l.k}, {"self_attn.v_proj", &l.v}, {"self_attn.o_proj", &l.o},
		{"mlp.gate_proj", &l.gate}, {"mlp.up_proj", &l.up}, {"mlp.down_proj", &l.down},
	}
}

// weights are the model's parameters by role.
type weights struct {
	embed, norm *kernels.Tensor
	// head is lm_head: the embedding when tied, else its own weight,
	// float or weight-only quantized (SetWeightOnly from a GGUF file).
	head   linear
	layers []layer
}

// wire assigns tensors to roles by parameter name.
func wire(cfg Config, get func(name string) *kernels.Tensor) weights {
	w := weights{embed: get(embedTokens), norm: get(finalNorm), head: linear{W: get(lmHead)}}
	if cfg.TieWordEmbeddings {
		w.head.W = w.embed
	}
	for i := range cfg.NumHiddenLayers {
		l := func(rest string) *kernels.Tensor { return get(layerParam(i, rest)) }
		lin := func(rest string) linear { return linear{W: l(rest + ".weight")} }
		w.layers = append(w.layers, layer{
			attnNorm: l("input_layernorm.weight"),
			q:        lin("self_attn.q_proj"), k: lin("self_attn.k_proj"),
			v: lin("self_attn.v_proj"), o: lin("self_attn.o_proj"),
			mlpNorm: l("post_attention_layernorm.weight"),
			gate:    lin("mlp.gate_proj"), up: lin("mlp.up_proj"), down: lin("mlp.down_proj"),
		})
	}
	return w
}

// Model is LlamaForCausalLM's weights on a device.
type Model struct {
	Config    Config
	Precision nn.Precision
	be        kernels.Backend
	dec       kernels.Decoder
	params    *nn.TensorSet
	w         weights
	invFreq   *kernels.Tensor
	// quantized counts the linear modules quantized in any form
	// (Quantize, QuantizeWeights, QuantizeFP8, a quantized checkpoint).
	quantized int
	// codes is the dtype a quantized module's inputs are cast to: I8, or
	// E4M3 for FP8; 0 while none is, or for weight-only modules.
	codes kernels.DType
	// stored is how the linear weights are stored once quantized, for the
	// bytes a step reads.
	stored weightCodes
}

// Load uploads the weights of cfg from src to be in precision prec (F32,
// F16 or BF16: weights and activations in that dtype, with float32
// arithmetic inside the kernels). A quantized config (Config.Quant) reads
// its checkpoint's quantized modules as they are stored (quantized.go).
func Load(be kernels.Backend, cfg Config, src nn.Source, prec nn.Precision) (*Model, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("llama: %w", err)
	}
	if prec != nn.F32 && prec != nn.F16 && prec != nn.BF16 {
		return nil, fmt.Errorf("llama: precision %v: want f32, f16 or bf16: %w", prec, kernels.ErrDType)
	}
	dec, err := kernels.Group[kernels.Decoder](be)
	if err != nil {
		return nil, fmt.Errorf("llama: the decoder ops (RoPE, KV cache, cached attention): %w", err)
	}
	s := nn.NewTensorSet(be)
	var lins map[string]linear
	if cfg.Quant != nil {
		lins, err = loadQuantized(be, s, cfg, src, prec.DType())
	} else {
		err = nn.LoadParams(s, src, cfg.Params(), prec.DType())
	}
	if err != nil {
		return nil, errors.Join(err, s.Free())
	}
	inv, err := s.Upload("inv_freq", kernels.F32, cfg.InvFreq(), cfg.HeadDim/2)
	if err != nil {
		return nil, errors.Join(err, s.Free())
	}
	m := &Model{Config: cfg, Precision: prec, be: be, dec: dec, params: s, w: wire(cfg, s.Get), invFreq: inv}
	if lins != nil {
		m.setQuantized(lins)
	}
	return m, nil
}

// Backend is the device the model lives on.
func (m *Model) Backend() kernels.Backend { return m.be }

// Close frees the weights.
func (m *Model) Close() error { return m.params.Free() }

// Pack packs the float weights of the decoder layers' linear modules into
// the layout the backend's products read (layers.Pack), once, for a model
// that serves inference: its prefill products then pack only their
// activations. The packed form takes as much memory again as the weights
// it packs, and the weights must not change afterwards except through
// Upload.
func (m *Model) Pack() error {
	var lins []*linear
	for i := range m.w.layers {
		for _, mod := range m.w.layers[i].modules() {
			lins = append(lins, mod.lin)
		}
	}
	if err := layers.Pack(m.be, lins...); err != nil {
		return fmt.Errorf("llama: %w", err)
	}
	return nil
}

// WeightBytes is the size of the weights on the device: what a decode
// step reads at least once (for a quantized model, the int8 weights with
// their scales and the float tensors left).
func (m *Model) WeightBytes() int64 { return m.params.Bytes() - m.invFreq.Bytes() }
