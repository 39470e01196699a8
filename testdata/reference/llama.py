#!/usr/bin/env python3
"""Independent PyTorch reference for zbench's Llama (models/llama).

Our own torch modules with the semantics of Hugging Face's
LlamaForCausalLM (transformers itself is not installable here), the
seeded synthetic weights of bert.py's generator with Llama's ranges, and
the writer of the Llama goldens. Importing this file has no side effects:
baselines/peers/torch_bench.py imports the modules and the generator.

Modules (dtype and device agnostic; state_dict() keys are exactly Hugging
Face's):

  LlamaConfig        .from_dict(an HF config.json dict): hidden_size,
                     intermediate_size, num_hidden_layers,
                     num_attention_heads, num_key_value_heads (absent:
                     heads), head_dim (absent: hidden/heads), rms_norm_eps,
                     rope_theta, rope_scaling (null; {"type" or
                     "rope_type": "linear", "factor"}; {"rope_type":
                     "llama3", "factor", "low_freq_factor",
                     "high_freq_factor", "original_max_position_embeddings"};
                     any other type raises), max_position_embeddings,
                     vocab_size, tie_word_embeddings, bos_token_id,
                     eos_token_id; hidden_act silu only, attention_bias and
                     mlp_bias false only
  LlamaForCausalLM   model.embed_tokens, model.layers.N.{input_layernorm,
                     self_attn.{q,k,v,o}_proj, post_attention_layernorm,
                     mlp.{gate,up,down}_proj}, model.norm, lm_head (absent
                     when tied); forward(input_ids, attention_mask=None,
                     past_key_values=None, logits_to_keep=0) -> logits
                     [B, S, V] (of the last logits_to_keep positions only
                     if > 0), with a simple KV cache (new_cache(model): a
                     [k, v] per layer, extended by torch.cat as HF's
                     dynamic cache is)
  greedy             greedy generation, with a KV cache or by full forwards
                     (no cache: the whole sequence again every step),
                     batched with left padding as HF's generate pads

Semantics (HF's): RMSNorm in float32 (x·rsqrt(mean(x²)+eps), cast back, then
·weight; float64 activations, as in the goldens, stay float64 here and in
the softmax, where HF would round them to float32); inv_freq = 1/theta^(arange(0, D, 2)/D) in float32, scaled as
transformers' linear and llama3 rope parameters; angles = position·inv_freq
in float32; cos and sin cast to the activations' dtype; q·cos +
rotate_half(q)·sin; grouped KV heads repeated; eager attention with scores
q·kᵀ/√D, causal and padding masks at finfo.min, softmax in float32;
down(silu(gate(x))·up(x)). Positions come from the attention mask as HF's
generate computes them (cumsum(mask) − 1, 1 where masked), so left and right
padding give every real token the same logits; without a mask they are
0..S−1 (after the cache's length).

Seeded synthetic weights: bert.py's normative generator (see its
docstring: a splitmix64 counter hash keyed by seed XOR fnv1a64(name), mapped
to center + half·(2u − 1) and rounded to float32), keyed by the full name
of the HF checkpoint (e.g. "model.layers.0.self_attn.q_proj.weight"), with
Llama's ranges (normative; models/llama implements the same): every
"*norm.weight" (input_layernorm, post_attention_layernorm, model.norm)
center 1, half 0.1; every other tensor center 0, half 0.05. A tied model has
no lm_head.weight tensor.

Files written (under testdata/golden):

  llama-tiny/config.json         an HF LlamaConfig (vocab 512, hidden 64,
                                 intermediate 172, 2 layers, 4 heads, 2 KV
                                 heads, untied, float32)
  llama-tiny/model.safetensors   its weights, F32, synthetic seed 11
  llama-tiny-bf16/               the same weights as a sharded BF16
                                 checkpoint: config.json (torch_dtype
                                 bfloat16), model-0000{1,2}-of-00002
                                 .safetensors, model.safetensors.index.json
  llama.safetensors              tensors "<case>/<role>": input_ids and
                                 attention_mask I32 [B, S], logits F32
                                 [B, S, V] (every position; padded ones are
                                 not compared); metadata "<case>" = JSON
                                 {"config": an HF config dict, "weights":
                                 "testdata/golden/llama-tiny" or
                                 "synthetic", "seed", "padding": "none",
                                 "right" or "left", "gguf_type": the
                                 GGUF type the weights are rounded
                                 through, where they are}, plus "reference",
                                 "script", "format"
  llama-generate.safetensors     greedy generation in float64 on
                                 llama-tiny, 24 new tokens, EOS ignored
                                 (and never generated, asserted: stopping
                                 at eos_token_id 2 gives the same ids):
                                 "prompt<i>/prompt_ids" I32 [7], [3], [11]
                                 (ids in [3, 512)) and "prompt<i>/ids" I32
                                 [24] (the new tokens only) for i = 0, 1, 2,
                                 each prompt alone and the 3 batched with
                                 left padding (asserted equal), with and
                                 without the cache (asserted equal);
                                 "prompt0/logits" F32 [24, 512], the logits
                                 each step of prompt 0 chose from (step i's
                                 are the full forward's logits at position
                                 6 + i); metadata "generate" = JSON
                                 {"new_tokens", "eos": "ignored", "weights",
                                 "batched"}, plus "reference", "script",
                                 "format"

Cases of llama.safetensors (input_ids random in [3, V), 0 where padded):

  tiny         llama-tiny, [2, 9], no padding
  tiny_right   llama-tiny, [2, 9], right padding, lengths 9 and 5
  tiny_left    llama-tiny, [2, 9], left padding, lengths 9 and 4 (positions
               from the mask)
  gqa_llama3   synthetic seed 12: llama-tiny's config with one KV head,
               head_dim 24 ≠ hidden/heads, llama3 rope scaling (factor 8,
               low 1, high 4, original_max_position_embeddings 32), tied
               embeddings; [2, 40], right padding, lengths 40 and 34
  linear_rope  synthetic seed 13: linear rope scaling (factor 2), 4 KV
               heads = heads; [2, 17], right padding, lengths 17 and 11
  tinyllama    TinyLlama-1.1B's config (TinyLlama-1.1B-Chat-v1.0's
               config.json), synthetic seed 20261125; [1, 8], logits of all
               8 positions [1, 8, 32000]: computed one layer at a time from
               generated weights, never the whole model in memory
  tinyllama_q4_0
               the same model and input_ids as a GGUF Q4_0 file holds it:
               every 2-D tensor (the linear weights, embed_tokens and
               lm_head) rounded through gguf.py's Q4_0 quantizer and back
               (quantize_q4_0, dequantize_q4_0: blocks of 32 along the
               input dimension, d = the block's value of largest
               magnitude / −8, codes trunc(x/d + 8.5) clamped to 15, d
               stored as f16), the norms as they are; metadata as
               tinyllama's plus "gguf_type": "Q4_0"

Padded positions' logits are stored too, but mean nothing: the Go tests
compare only the positions where attention_mask is 1.

llama-tiny's max_position_embeddings is 256, not 128: bench_test's -short
Llama benchmarks run it with a 128-token prompt plus new tokens.

Expected outputs are computed in float64 from the stored float32 weights
(the angles of the rotary embedding in float32, as HF computes them).
Deterministic: fixed seeds, one thread. Requires torch (1.13 tested, CPU)
and numpy. The run takes about two minutes of CPU, most of it generating
TinyLlama's 1.1 billion weights, twice (about 35 s each; peak memory about
1.7 GB).
Run from anywhere:

  /usr/bin/python3 testdata/reference/llama.py            # write the goldens
  /usr/bin/python3 testdata/reference/llama.py --check    # verify they are current
"""

import json
import math
import os
import sys

import torch
import torch.nn as nn
import torch.nn.functional as F

from bert import compact, fnv1a64, synthetic_values, Tensors
import golden_files
from safetensors_file import entry, serialize

SCRIPT = "testdata/reference/llama.py"
FORMAT = "zbench-golden/1: tensors <case>/<role>, metadata <case> = JSON params"
GEN_FORMAT = "zbench-golden/1: tensors prompt<i>/prompt_ids, prompt<i>/ids, prompt0/logits"
REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TINY_DIR = "testdata/golden/llama-tiny"
TINY_BF16_DIR = "testdata/golden/llama-tiny-bf16"
TINY_SEED = 11
TINYLLAMA_SEED = 20261125
BASE_SEED = 20261125

TINY_CONFIG = {
    "architectures": ["LlamaForCausalLM"],
    "attention_bias": False,
    "attention_dropout": 0.0,
    "bos_token_id": 1,
    "eos_token_id": 2,
    "hidden_act": "silu",
    "hidden_size": 64,
    "initializer_range": 0.02,
    "intermediate_size": 172,
    "max_position_embeddings": 256,
    "mlp_bias": False,
    "model_type": "llama",
    "num_attention_heads": 4,
    "num_hidden_layers": 2,
    "num_key_value_heads": 2,
    "pretraining_tp": 1,
    "rms_norm_eps": 1e-05,
    "rope_scaling": None,
    "rope_theta": 10000.0,
    "tie_word_embeddings": False,
    "torch_dtype": "float32",
    "transformers_version": "4.46.0",
    "use_cache": True,
    "vocab_size": 512,
}

# TinyLlama/TinyLlama-1.1B-Chat-v1.0's config.json.
TINYLLAMA_CONFIG = {
    "architectures": ["LlamaForCausalLM"], "attention_bias": False, "bos_token_id": 1, "eos_token_id": 2,
    "hidden_act": "silu", "hidden_size": 2048, "initializer_range": 0.02, "intermediate_size": 5632,
    "max_position_embeddings": 2048, "model_type": "llama", "num_attention_heads": 32, "num_hidden_layers": 22,
    "num_key_value_heads": 4, "pretraining_tp": 1, "rms_norm_eps": 1e-05, "rope_scaling": None,
    "rope_theta": 10000.0, "tie_word_embeddings": False, "torch_dtype": "bfloat16", "use_cache": True,
    "vocab_size": 32000,
}

# ---------------------------------------------------------------------------
# Configuration


class LlamaConfig:
    """The fields of an HF Llama config that the model uses. Fields that
    would change the computation in ways this reference does not implement
    (another activation, biases, an unknown rope_scaling type) raise
    ValueError. Defaults are transformers' LlamaConfig's."""

    def __init__(self, d):
        for key, ok in (("hidden_act", "silu"), ("attention_bias", False), ("mlp_bias", False)):
            if d.get(key, ok) != ok:
                raise ValueError(f"{key} = {d[key]!r} is not supported")
        self.vocab_size = d.get("vocab_size", 32000)
        self.hidden_size = d.get("hidden_size", 4096)
        self.intermediate_size = d.get("intermediate_size", 11008)
        self.num_hidden_layers = d.get("num_hidden_layers", 32)
        self.num_attention_heads = d.get("num_attention_heads", 32)
        self.num_key_value_heads = d.get("num_key_value_heads") or self.num_attention_heads
        self.head_dim = d.get("head_dim") or self.hidden_size // self.num_attention_heads
        self.rms_norm_eps = d.get("rms_norm_eps", 1e-6)
        self.rope_theta = d.get("rope_theta", 10000.0)
        self.rope_scaling = d.get("rope_scaling")
        self.max_position_embeddings = d.get("max_position_embeddings", 2048)
        self.tie_word_embeddings = d.get("tie_word_embeddings", False)
        self.bos_token_id = d.get("bos_token_id", 1)
        self.eos_token_id = d.get("eos_token_id", 2)  # an id or a list of ids
        if self.num_attention_heads % self.num_key_value_heads:
            raise ValueError(f"num_attention_heads {self.num_attention_heads} is not a multiple of "
                             f"num_key_value_heads {self.num_key_value_heads}")
        if self.rope_scaling is not None:
            kind = self.rope_scaling.get("rope_type", self.rope_scaling.get("type"))
            need = {"linear": ("factor",), "llama3": ("factor", "low_freq_factor", "high_freq_factor",
                                                      "original_max_position_embeddings")}
            if kind not in need:
                raise ValueError(f"rope_scaling type {kind!r} is not supported")
            for key in need[kind]:
                if key not in self.rope_scaling:
                    raise ValueError(f"rope_scaling {kind} has no {key!r}")

    @classmethod
    def from_dict(cls, d):
        """The config of an HF config.json dict."""
        return cls(d)

    def inv_freq(self):
        """The rotary inverse frequencies [head_dim/2], float32, scaled."""
        D = self.head_dim
        inv = 1.0 / (self.rope_theta ** (torch.arange(0, D, 2, dtype=torch.int64).float() / D))
        rs = self.rope_scaling
        if rs is None:
            return inv
        kind = rs.get("rope_type", rs.get("type"))
        factor = rs["factor"]
        if kind == "linear":
            return inv / factor
        # llama3: long wavelengths divided by factor, short ones kept,
        # blended in between.
        low, high = rs["low_freq_factor"], rs["high_freq_factor"]
        old = rs["original_max_position_embeddings"]
        low_wave, high_wave = old / low, old / high
        wave = 2 * math.pi / inv
        scaled = torch.where(wave > low_wave, inv / factor, inv)
        smooth = (old / wave - low) / (high - low)
        blended = (1 - smooth) * scaled / factor + smooth * scaled
        medium = ~(wave < high_wave) & ~(wave > low_wave)
        return torch.where(medium, blended, scaled)


# ---------------------------------------------------------------------------
# Modules, named as Hugging Face's


class LlamaRMSNorm(nn.Module):
    def __init__(self, n, eps):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(n))
        self.eps = eps

    def forward(self, x):
        dt = x.dtype
        h = x.to(torch.float32) if dt != torch.float64 else x
        h = h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + self.eps)
        return self.weight * h.to(dt)


def rotate_half(x):
    half = x.shape[-1] // 2
    return torch.cat((-x[..., half:], x[..., :half]), dim=-1)


class LlamaAttention(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        H, D = cfg.hidden_size, cfg.head_dim
        self.heads, self.kv_heads, self.head_dim = cfg.num_attention_heads, cfg.num_key_value_heads, D
        self.q_proj = nn.Linear(H, self.heads * D, bias=False)
        self.k_proj = nn.Linear(H, self.kv_heads * D, bias=False)
        self.v_proj = nn.Linear(H, self.kv_heads * D, bias=False)
        self.o_proj = nn.Linear(self.heads * D, H, bias=False)

    def forward(self, x, cos, sin, mask, cache=None):
        B, S, _ = x.shape
        D = self.head_dim
        q = self.q_proj(x).view(B, S, self.heads, D).transpose(1, 2)
        k = self.k_proj(x).view(B, S, self.kv_heads, D).transpose(1, 2)
        v = self.v_proj(x).view(B, S, self.kv_heads, D).transpose(1, 2)
        cos, sin = cos.unsqueeze(1), sin.unsqueeze(1)
        q = q * cos + rotate_half(q) * sin
        k = k * cos + rotate_half(k) * sin
        if cache is not None:
            if cache[0] is not None:
                k = torch.cat((cache[0], k), dim=2)
                v = torch.cat((cache[1], v), dim=2)
            cache[0], cache[1] = k, v
        rep = self.heads // self.kv_heads
        k = k.repeat_interleave(rep, dim=1, output_size=k.shape[1] * rep)
        v = v.repeat_interleave(rep, dim=1, output_size=v.shape[1] * rep)
        s = torch.matmul(q, k.transpose(-1, -2)) / math.sqrt(D) + mask
        p = torch.softmax(s.to(torch.float32) if s.dtype != torch.float64 else s, dim=-1).to(q.dtype)
        o = torch.matmul(p, v).transpose(1, 2).reshape(B, S, self.heads * D)
        return self.o_proj(o)


class LlamaMLP(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        H, I = cfg.hidden_size, cfg.intermediate_size
        self.gate_proj = nn.Linear(H, I, bias=False)
        self.up_proj = nn.Linear(H, I, bias=False)
        self.down_proj = nn.Linear(I, H, bias=False)

    def forward(self, x):
        return self.down_proj(F.silu(self.gate_proj(x)) * self.up_proj(x))


class LlamaDecoderLayer(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.self_attn = LlamaAttention(cfg)
        self.mlp = LlamaMLP(cfg)
        self.input_layernorm = LlamaRMSNorm(cfg.hidden_size, cfg.rms_norm_eps)
        self.post_attention_layernorm = LlamaRMSNorm(cfg.hidden_size, cfg.rms_norm_eps)

    def forward(self, x, cos, sin, mask, cache=None):
        x = x + self.self_attn(self.input_layernorm(x), cos, sin, mask, cache)
        return x + self.mlp(self.post_attention_layernorm(x))


class LlamaModel(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.embed_tokens = nn.Embedding(cfg.vocab_size, cfg.hidden_size)
        self.layers = nn.ModuleList(LlamaDecoderLayer(cfg) for _ in range(cfg.num_hidden_layers))
        self.norm = LlamaRMSNorm(cfg.hidden_size, cfg.rms_norm_eps)


def positions(attention_mask, past):
    """HF generate's position ids: cumsum(mask) − 1, 1 where masked; past
    is the cached length (the mask then covers cache and new tokens)."""
    pos = attention_mask.long().cumsum(-1) - 1
    pos = pos.masked_fill(attention_mask == 0, 1)
    return pos[:, past:]


def rotary(cfg, pos, dtype):
    """cos and sin [B, S, D] for positions pos [B, S], cast to dtype."""
    freqs = pos[:, :, None].float() * cfg.inv_freq().to(pos.device)[None, None, :]
    emb = torch.cat((freqs, freqs), dim=-1)
    return emb.cos().to(dtype), emb.sin().to(dtype)


def attn_mask(attention_mask, S, past, dtype):
    """The additive mask [B, 1, S, past+S]: causal, and padding keys."""
    B, K = attention_mask.shape
    dev = attention_mask.device
    q = torch.arange(past, past + S, device=dev)[:, None]
    k = torch.arange(K, device=dev)[None, :]
    allowed = (k <= q)[None, None] & (attention_mask[:, None, None, :] == 1)
    return torch.zeros(B, 1, S, K, dtype=dtype, device=dev).masked_fill(~allowed, torch.finfo(dtype).min)


class LlamaForCausalLM(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.cfg = cfg
        self.model = LlamaModel(cfg)
        self.lm_head = None if cfg.tie_word_embeddings else nn.Linear(cfg.hidden_size, cfg.vocab_size, bias=False)

    def head(self, h):
        w = self.model.embed_tokens.weight if self.lm_head is None else self.lm_head.weight
        return h @ w.t()

    def forward(self, input_ids, attention_mask=None, past_key_values=None, logits_to_keep=0):
        """Logits [B, S, V], or of the last logits_to_keep positions only
        (0: all, as in HF). past_key_values, if given, is the KV cache: a
        list of [k, v] per layer ([None, None] when empty, see new_cache),
        k and v [B, KV heads, cached length, head_dim], extended in place by
        torch.cat; attention_mask then covers the cached and the new
        tokens."""
        cache = past_key_values
        B, S = input_ids.shape
        past = 0 if cache is None or cache[0][0] is None else cache[0][0].shape[2]
        if attention_mask is None:
            attention_mask = torch.ones(B, past + S, dtype=torch.int64, device=input_ids.device)
        x = self.model.embed_tokens(input_ids)
        cos, sin = rotary(self.cfg, positions(attention_mask, past), x.dtype)
        mask = attn_mask(attention_mask, S, past, x.dtype)
        for i, layer in enumerate(self.model.layers):
            x = layer(x, cos, sin, mask, None if cache is None else cache[i])
        if logits_to_keep:
            x = x[:, -logits_to_keep:]
        return self.head(self.model.norm(x))


def new_cache(model):
    """An empty KV cache for model's forward."""
    return [[None, None] for _ in model.model.layers]


@torch.no_grad()
def greedy(model, prompts, new, use_cache):
    """Greedy generation of new tokens for each prompt (lists of ids),
    batched with left padding as HF's generate pads; EOS is ignored.
    Returns the new ids per prompt and the logits [B, new, V] they came
    from."""
    B, L = len(prompts), max(len(p) for p in prompts)
    ids = torch.zeros(B, L, dtype=torch.int64)
    mask = torch.zeros(B, L, dtype=torch.int64)
    for b, p in enumerate(prompts):
        ids[b, L - len(p):] = torch.tensor(p)
        mask[b, L - len(p):] = 1
    cache = new_cache(model) if use_cache else None
    out, logits = [[] for _ in prompts], []
    step_ids = ids
    for _ in range(new):
        if use_cache:
            lg = model(step_ids, mask, cache)[:, -1]
        else:
            lg = model(ids, mask)[:, -1]
        logits.append(lg)
        nxt = lg.argmax(-1)
        for b in range(B):
            out[b].append(int(nxt[b]))
        step_ids = nxt[:, None]
        ids = torch.cat((ids, step_ids), dim=1)
        mask = torch.cat((mask, torch.ones(B, 1, dtype=torch.int64)), dim=1)
    return out, torch.stack(logits, dim=1)


# ---------------------------------------------------------------------------
# Synthetic weights


def synthetic_range(name):
    """(center, half) of the named parameter's values."""
    if name.endswith("norm.weight"):
        return 1.0, 0.1
    return 0.0, 0.05


def synthetic_tensor(name, seed, shape):
    c, h = synthetic_range(name)
    return torch.from_numpy(synthetic_values(name, seed, math.prod(shape), c, h)).view(shape)


@torch.no_grad()
def synthetic_(module, seed):
    """Fills every parameter of module from the generator by its HF name,
    converted to the parameter's dtype and device. Returns module."""
    for name, p in module.named_parameters():
        p.copy_(synthetic_tensor(name, seed, list(p.shape)))
    return module


# ---------------------------------------------------------------------------
# Goldens


def case_generator(name):
    return torch.Generator().manual_seed((BASE_SEED ^ fnv1a64(name)) & ((1 << 63) - 1))


def make_inputs(gen, V, lengths, S, side):
    """input_ids random in [3, V) (padding positions 0) and attention_mask,
    int64 [B, S], padded on side."""
    B = len(lengths)
    ids = torch.randint(3, V, (B, S), generator=gen)
    mask = torch.zeros(B, S, dtype=torch.int64)
    for r, n in enumerate(lengths):
        if side == "left":
            mask[r, S - n:] = 1
        else:
            mask[r, :n] = 1
    ids[mask == 0] = 0
    return ids, mask


def tiny_model():
    cfg = LlamaConfig.from_dict(TINY_CONFIG)
    return cfg, synthetic_(LlamaForCausalLM(cfg), TINY_SEED)


def build_checkpoints(files, model):
    """The tiny checkpoint, F32 unsharded and BF16 sharded."""
    sd = model.state_dict()
    names = sorted(sd)
    files[TINY_DIR + "/config.json"] = (json.dumps(TINY_CONFIG, indent=2, sort_keys=True) + "\n").encode()
    files[TINY_DIR + "/model.safetensors"] = serialize({n: entry(n, sd[n]) for n in names}, {"format": "pt"})
    bf = dict(TINY_CONFIG, torch_dtype="bfloat16")
    files[TINY_BF16_DIR + "/config.json"] = (json.dumps(bf, indent=2, sort_keys=True) + "\n").encode()
    shards = [[n for n in names if not n.startswith("model.layers.1.") and n != "lm_head.weight" and n != "model.norm.weight"]]
    shards.append([n for n in names if n not in shards[0]])
    weight_map, total = {}, 0
    for i, part in enumerate(shards):
        fname = f"model-{i + 1:05d}-of-{len(shards):05d}.safetensors"
        ents = {n: entry(n, sd[n].to(torch.bfloat16)) for n in part}
        files[f"{TINY_BF16_DIR}/{fname}"] = serialize(ents, {"format": "pt"})
        for n in part:
            weight_map[n] = fname
            total += len(ents[n][2])
    index = {"metadata": {"total_size": total}, "weight_map": dict(sorted(weight_map.items()))}
    files[TINY_BF16_DIR + "/model.safetensors.index.json"] = (json.dumps(index, indent=2) + "\n").encode()


@torch.no_grad()
def logits64(model, ids, mask):
    return model.double()(ids, mask)


def gguf_rounded(w, typ):
    """w (float32) as a GGUF file of type typ (None: w as it is; else
    Q4_0) stores it, in gguf.py's storage_type: 2-D tensors rounded
    through its Q4_0 quantizer and back, or through F16 where their rows
    are not whole blocks; 1-D ones (the norms, F32 in the file) as they
    are. Blocks run along rows, so llama.cpp's q/k row permutation does
    not change the values."""
    if typ is None:
        return w
    if typ != "Q4_0":
        raise ValueError(f"gguf_rounded: type {typ} (Q4_0 only)")
    from gguf import dequantize_q4_0, quantize_q4_0, storage_type
    st = storage_type(list(reversed(w.shape)), typ)
    if st == "F32":
        return w
    if st == "F16":
        return w.half().float()
    return torch.from_numpy(dequantize_q4_0(quantize_q4_0(w.numpy()))).view(w.shape)


@torch.no_grad()
def gguf_round_(module, typ):
    """Rounds every parameter of module as gguf_rounded does. Returns
    module."""
    for p in module.parameters():
        p.copy_(gguf_rounded(p.detach().float(), typ))
    return module


@torch.no_grad()
def tinyllama_logits(ids, gguf_type=None):
    """TinyLlama-1.1B's logits in float64, one layer's weights at a time,
    its tensors as gguf_rounded leaves them in gguf_type."""
    cfg = LlamaConfig.from_dict(TINYLLAMA_CONFIG)
    B, S = ids.shape

    def weight(name, shape):
        return gguf_rounded(synthetic_tensor(name, TINYLLAMA_SEED, shape), gguf_type)

    mask = torch.ones(B, S, dtype=torch.int64)
    emb = weight("model.embed_tokens.weight", [cfg.vocab_size, cfg.hidden_size])
    x = emb[ids].double()
    del emb
    cos, sin = rotary(cfg, positions(mask, 0), torch.float64)
    am = attn_mask(mask, S, 0, torch.float64)
    for i in range(cfg.num_hidden_layers):
        layer = LlamaDecoderLayer(cfg)
        for name, p in layer.named_parameters():
            p.data = weight(f"model.layers.{i}.{name}", list(p.shape))
        x = layer.double()(x, cos, sin, am)
    norm = LlamaRMSNorm(cfg.hidden_size, cfg.rms_norm_eps)
    norm.weight.data = weight("model.norm.weight", [cfg.hidden_size])
    h = norm.double()(x)
    head = weight("lm_head.weight", [cfg.vocab_size, cfg.hidden_size])
    return h @ head.double().t()


def tiny_variant(**kw):
    d = dict(TINY_CONFIG)
    d.update(kw)
    return d


def build_cases(files, model):
    t = Tensors({"reference": f"torch {torch.__version__}", "script": SCRIPT, "format": FORMAT})
    V = TINY_CONFIG["vocab_size"]

    def put(name, cfg_dict, weights, seed, padding, ids, mask, logits, gguf_type=None):
        t.put(f"{name}/input_ids", ids.to(torch.int32))
        t.put(f"{name}/attention_mask", mask.to(torch.int32))
        t.put(f"{name}/logits", logits)
        meta = {"config": cfg_dict, "weights": weights, "padding": padding}
        if seed is not None:
            meta["seed"] = seed
        if gguf_type is not None:
            meta["gguf_type"] = gguf_type
        t.meta[name] = compact(meta)

    m64 = LlamaForCausalLM(LlamaConfig.from_dict(TINY_CONFIG))
    m64.load_state_dict(model.state_dict())
    for name, lengths, side in (("tiny", (9, 9), "none"), ("tiny_right", (9, 5), "right"), ("tiny_left", (9, 4), "left")):
        ids, mask = make_inputs(case_generator(name), V, lengths, 9, side)
        put(name, TINY_CONFIG, TINY_DIR, None, side, ids, mask, logits64(m64, ids, mask))

    variants = {
        "gqa_llama3": (12, 40, tiny_variant(
            num_key_value_heads=1, head_dim=24, tie_word_embeddings=True,
            rope_scaling={"factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                          "original_max_position_embeddings": 32, "rope_type": "llama3"})),
        "linear_rope": (13, 17, tiny_variant(num_key_value_heads=4, rope_scaling={"type": "linear", "factor": 2.0})),
    }
    for name, (seed, S, d) in variants.items():
        cfg = LlamaConfig.from_dict(d)
        m = synthetic_(LlamaForCausalLM(cfg), seed)
        ids, mask = make_inputs(case_generator(name), V, (S, S - 6), S, "right")
        put(name, d, "synthetic", seed, "right", ids, mask, logits64(m, ids, mask))

    ids, mask = make_inputs(case_generator("tinyllama"), TINYLLAMA_CONFIG["vocab_size"], (8,), 8, "none")
    put("tinyllama", TINYLLAMA_CONFIG, "synthetic", TINYLLAMA_SEED, "none", ids, mask, tinyllama_logits(ids))
    put("tinyllama_q4_0", TINYLLAMA_CONFIG, "synthetic", TINYLLAMA_SEED, "none", ids, mask,
        tinyllama_logits(ids, "Q4_0"), gguf_type="Q4_0")
    files["testdata/golden/llama.safetensors"] = t.serialize()


def build_generate(files, model):
    gen = case_generator("generate")
    V = TINY_CONFIG["vocab_size"]
    prompts = [torch.randint(3, V, (n,), generator=gen).tolist() for n in (7, 3, 11)]
    m = LlamaForCausalLM(LlamaConfig.from_dict(TINY_CONFIG))
    m.load_state_dict(model.state_dict())
    m = m.double()
    t = Tensors({"reference": f"torch {torch.__version__}", "script": SCRIPT, "format": GEN_FORMAT})
    batched, _ = greedy(m, prompts, 24, use_cache=True)
    for i, p in enumerate(prompts):
        alone, logits = greedy(m, [p], 24, use_cache=True)
        nocache, _ = greedy(m, [p], 24, use_cache=False)
        assert alone == nocache, f"prompt {i}: cached and uncached greedy differ"
        assert alone[0] == batched[i], f"prompt {i}: batched with left padding differs"
        assert TINY_CONFIG["eos_token_id"] not in alone[0], f"prompt {i}: EOS generated"
        t.put(f"prompt{i}/prompt_ids", torch.tensor(p, dtype=torch.int32))
        t.put(f"prompt{i}/ids", torch.tensor(alone[0], dtype=torch.int32))
        if i == 0:
            t.put("prompt0/logits", logits[0])
    t.meta["generate"] = compact({"new_tokens": 24, "eos": "ignored", "weights": TINY_DIR, "batched": "left padding"})
    files["testdata/golden/llama-generate.safetensors"] = t.serialize()


def build():
    """{repo-relative path: bytes} of every file this script writes."""
    torch.manual_seed(BASE_SEED)
    torch.set_num_threads(1)
    files = {}
    _, model = tiny_model()
    build_checkpoints(files, model)
    build_generate(files, model)
    build_cases(files, model)
    return files


def main():
    return golden_files.main(__doc__, build, REPO, SCRIPT)



if __name__ == "__main__":
    sys.exit(main())
