#!/usr/bin/env python3
"""Independent PyTorch reference for zbench's GPT-2 (models/gpt2).

Our own torch modules with the semantics of Hugging Face's GPT2Model and
GPT2LMHeadModel (transformers itself is not installable here), the seeded
synthetic weights of bert.py's generator with GPT-2's ranges, and the writer
of the GPT-2 goldens. Importing this file has no side effects:
baselines/peers/gpt2_peer.py imports the modules and the generator.

Modules (dtype and device agnostic; state_dict() keys are exactly Hugging
Face's, Conv1D weights in its [in, out] layout):

  GPT2Config        .from_dict(an HF config.json dict): n_embd, n_head,
                    n_layer, n_positions, n_inner (null: 4·n_embd),
                    vocab_size, layer_norm_epsilon, activation_function
                    (gelu_new only), scale_attn_weights; raises on
                    scale_attn_by_inverse_layer_idx, reorder_and_upcast_attn,
                    add_cross_attention true and tie_word_embeddings false
  GPT2Model         wte, wpe, h.N.{ln_1, attn.c_attn, attn.c_proj, ln_2,
                    mlp.c_fc, mlp.c_proj}, ln_f; forward(input_ids,
                    attention_mask=None) -> last hidden state [B, S, H]
  GPT2LMHeadModel   transformer (GPT2Model) and lm_head tied to
                    transformer.wte; forward(input_ids, attention_mask=None,
                    last_only=False) -> logits [B, S, V] (of the last
                    position only, [B, 1, V], when last_only)
  synthetic_        fills every parameter from the seeded generator

Semantics (HF's, eval mode, no dropout): h = wte[ids] + wpe[0..S−1]; per
block (pre-LN) a = ln_1(h), q, k, v = split(a·W_attn + b_attn) into n_head
heads, scores q·kᵀ/√head_dim (scale_attn_weights), the causal mask and the
attention_mask's padded keys at finfo(dtype).min, softmax, ·v, heads merged,
h += c_proj(·); h += mlp.c_proj(gelu_new(mlp.c_fc(ln_2(h)))) (gelu_new is
torch's tanh approximation); logits = ln_f(h)·wteᵀ. Positions are 0..S−1
whatever the mask (GPT2Model without position_ids), so right padding leaves
every real token's logits unchanged; padded positions attend to the row's
real tokens and have logits too.

Seeded synthetic weights: bert.py's normative generator (see its
docstring), keyed by the GPT2Model name without "transformer." (e.g.
"h.0.attn.c_attn.weight"), drawn in Hugging Face's layout (a Conv1D weight
[in, out] row-major), with GPT-2's ranges (normative; models/gpt2
implements the same): every LayerNorm weight ("ln_1", "ln_2", "ln_f")
center 1, half 0.1; every bias (LayerNorm's included) center 0, half 0.02;
every other weight center 0, half 0.05.

Files written (under testdata/golden):

  gpt2-tiny/config.json        an HF GPT2Config (vocab 256, n_embd 64,
                               2 layers, 4 heads, n_positions 64)
  gpt2-tiny/model.safetensors  its weights as GPT2LMHeadModel's state_dict
                               saves them: "transformer." + every GPT2Model
                               name, F32, synthetic seed 5, with the
                               attn.bias (F32 [1, 1, 64, 64] lower
                               triangle) and attn.masked_bias (F32 [])
                               buffers older transformers saved, and no
                               lm_head.weight (tied); metadata
                               {"format": "pt"}
  gpt2.safetensors             tensors "<case>/<role>": input_ids and
                               attention_mask I32 [B, S], logits F32
                               [B, S, V], or [B, 1, V] (the last position)
                               where the case's metadata says "positions":
                               "last"; metadata "<case>" = JSON {"config":
                               an HF config dict, "weights":
                               "testdata/golden/gpt2-tiny" or "synthetic",
                               "seed" (synthetic only), "padding": "none" or
                               "right", "positions": "all" or "last"},
                               plus "reference", "script", "format"

Cases: tiny (the checkpoint, [2, 12], no padding), tiny_right (the
checkpoint, [3, 12], right padding to 12, 7, 1 tokens) and small (GPT-2
small's shape: n_embd 768, 12 layers, 12 heads, vocab 50257, n_positions
1024, synthetic seed 20261127, [1, 128], the last position's logits only,
to keep the file small).

Expected outputs are computed in float64 from the float32 weights.
Deterministic: fixed seeds, one thread. Requires torch (1.13 tested, CPU
only) and numpy. Run from anywhere:

  /usr/bin/python3 testdata/reference/gpt2.py            # write the goldens
  /usr/bin/python3 testdata/reference/gpt2.py --check    # verify they are current
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

SCRIPT = "testdata/reference/gpt2.py"
FORMAT = "zbench-golden/1: tensors <case>/<role>, metadata <case> = JSON params"
REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TINY_DIR = "testdata/golden/gpt2-tiny"
TINY_SEED = 5
SMALL_SEED = 20261127
BASE_SEED = 20261127

TINY_CONFIG = {
    "activation_function": "gelu_new",
    "architectures": ["GPT2LMHeadModel"],
    "attn_pdrop": 0.1,
    "bos_token_id": 255,
    "embd_pdrop": 0.1,
    "eos_token_id": 255,
    "initializer_range": 0.02,
    "layer_norm_epsilon": 1e-05,
    "model_type": "gpt2",
    "n_ctx": 64,
    "n_embd": 64,
    "n_head": 4,
    "n_inner": None,
    "n_layer": 2,
    "n_positions": 64,
    "reorder_and_upcast_attn": False,
    "resid_pdrop": 0.1,
    "scale_attn_by_inverse_layer_idx": False,
    "scale_attn_weights": True,
    "summary_activation": None,
    "summary_first_dropout": 0.1,
    "summary_proj_to_labels": True,
    "summary_type": "cls_index",
    "summary_use_proj": True,
    "torch_dtype": "float32",
    "transformers_version": "4.46.0",
    "use_cache": True,
    "vocab_size": 256,
}

# openai-community/gpt2's config.json (GPT-2 small, 124M parameters).
SMALL_CONFIG = {
    "activation_function": "gelu_new", "architectures": ["GPT2LMHeadModel"], "attn_pdrop": 0.1,
    "bos_token_id": 50256, "embd_pdrop": 0.1, "eos_token_id": 50256, "initializer_range": 0.02,
    "layer_norm_epsilon": 1e-05, "model_type": "gpt2", "n_ctx": 1024, "n_embd": 768, "n_head": 12,
    "n_layer": 12, "n_positions": 1024, "resid_pdrop": 0.1, "summary_activation": None,
    "summary_first_dropout": 0.1, "summary_proj_to_labels": True, "summary_type": "cls_index",
    "summary_use_proj": True, "vocab_size": 50257,
}

# ---------------------------------------------------------------------------
# Configuration

# Keys whose value other than the one given changes the model into one this
# reference (and models/gpt2) does not implement.
UNSUPPORTED = {
    "scale_attn_by_inverse_layer_idx": False,
    "reorder_and_upcast_attn": False,
    "add_cross_attention": False,
    "tie_word_embeddings": True,
}


class GPT2Config:
    """The fields of an HF GPT-2 config that the model uses; defaults are
    transformers' GPT2Config's."""

    def __init__(self, d):
        for key, ok in UNSUPPORTED.items():
            if d.get(key, ok) != ok:
                raise ValueError(f"{key} = {d[key]!r} is not supported (only {ok!r})")
        act = d.get("activation_function", "gelu_new")
        if act != "gelu_new":
            raise ValueError(f"activation_function {act!r}: only gelu_new is supported")
        self.vocab_size = d.get("vocab_size", 50257)
        self.n_positions = d.get("n_positions", 1024)
        self.n_embd = d.get("n_embd", 768)
        self.n_layer = d.get("n_layer", 12)
        self.n_head = d.get("n_head", 12)
        self.n_inner = d.get("n_inner") or 4 * self.n_embd
        self.layer_norm_epsilon = d.get("layer_norm_epsilon", 1e-5)
        self.scale_attn_weights = d.get("scale_attn_weights", True)
        if self.n_embd % self.n_head != 0:
            raise ValueError(f"n_embd {self.n_embd} is not a multiple of n_head {self.n_head}")

    @classmethod
    def from_dict(cls, d):
        return cls(d)

    @property
    def head_dim(self):
        return self.n_embd // self.n_head


# ---------------------------------------------------------------------------
# Modules, named as Hugging Face's


class Conv1D(nn.Module):
    """HF's Conv1D: a linear layer with its weight stored [in, out], y =
    x·W + b."""

    def __init__(self, nf, nx):
        super().__init__()
        self.weight = nn.Parameter(torch.empty(nx, nf))
        self.bias = nn.Parameter(torch.zeros(nf))

    def forward(self, x):
        return torch.addmm(self.bias, x.reshape(-1, x.shape[-1]), self.weight).view(*x.shape[:-1], -1)


class GPT2Attention(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        H = cfg.n_embd
        self.heads, self.head_dim, self.scale = cfg.n_head, cfg.head_dim, cfg.scale_attn_weights
        self.c_attn = Conv1D(3 * H, H)
        self.c_proj = Conv1D(H, H)

    def forward(self, x, mask):
        B, S, H = x.shape
        q, k, v = self.c_attn(x).split(H, dim=2)
        split = lambda t: t.view(B, S, self.heads, self.head_dim).transpose(1, 2)
        q, k, v = split(q), split(k), split(v)
        w = torch.matmul(q, k.transpose(-1, -2))
        if self.scale:
            w = w / math.sqrt(self.head_dim)
        w = w.masked_fill(mask, torch.finfo(w.dtype).min)
        ctx = torch.matmul(torch.softmax(w, dim=-1), v)
        return self.c_proj(ctx.transpose(1, 2).reshape(B, S, H))


class GPT2MLP(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.c_fc = Conv1D(cfg.n_inner, cfg.n_embd)
        self.c_proj = Conv1D(cfg.n_embd, cfg.n_inner)

    def forward(self, x):
        return self.c_proj(F.gelu(self.c_fc(x), approximate="tanh"))


class GPT2Block(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        H, eps = cfg.n_embd, cfg.layer_norm_epsilon
        self.ln_1 = nn.LayerNorm(H, eps=eps)
        self.attn = GPT2Attention(cfg)
        self.ln_2 = nn.LayerNorm(H, eps=eps)
        self.mlp = GPT2MLP(cfg)

    def forward(self, h, mask):
        h = h + self.attn(self.ln_1(h), mask)
        return h + self.mlp(self.ln_2(h))


def attention_mask(attention_mask, S, device):
    """The masked (True) scores [B or 1, 1, S, S]: a key after its query, or
    a padded key (attention_mask 0)."""
    causal = torch.ones(S, S, dtype=torch.bool, device=device).triu(1)[None, None]
    if attention_mask is None:
        return causal
    return causal | (attention_mask[:, None, None, :] == 0)


class GPT2Model(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.config = cfg
        self.wte = nn.Embedding(cfg.vocab_size, cfg.n_embd)
        self.wpe = nn.Embedding(cfg.n_positions, cfg.n_embd)
        self.h = nn.ModuleList(GPT2Block(cfg) for _ in range(cfg.n_layer))
        self.ln_f = nn.LayerNorm(cfg.n_embd, eps=cfg.layer_norm_epsilon)

    def forward(self, input_ids, attention_mask_=None):
        S = input_ids.shape[1]
        pos = torch.arange(S, device=input_ids.device)
        h = self.wte(input_ids) + self.wpe(pos)[None]
        mask = attention_mask(attention_mask_, S, input_ids.device)
        for block in self.h:
            h = block(h, mask)
        return self.ln_f(h)


class GPT2LMHeadModel(nn.Module):
    """HF GPT2LMHeadModel: transformer.* and lm_head, whose weight is
    transformer.wte's."""

    def __init__(self, cfg):
        super().__init__()
        self.config = cfg
        self.transformer = GPT2Model(cfg)
        self.lm_head = nn.Linear(cfg.n_embd, cfg.vocab_size, bias=False)
        self.lm_head.weight = self.transformer.wte.weight

    def forward(self, input_ids, attention_mask=None, last_only=False):
        h = self.transformer(input_ids, attention_mask)
        if last_only:
            h = h[:, -1:]
        return self.lm_head(h)


# ---------------------------------------------------------------------------
# Synthetic weights


def synthetic_range(name):
    """(center, half) of the named parameter's values."""
    module, _, kind = name.rpartition(".")
    if kind == "weight" and module.rpartition(".")[2].startswith("ln_"):
        return 1.0, 0.1
    if kind == "bias":
        return 0.0, 0.02
    return 0.0, 0.05


def strip_transformer(name):
    return name[len("transformer."):] if name.startswith("transformer.") else name


def synthetic_tensor(name, seed, shape):
    c, h = synthetic_range(name)
    return torch.from_numpy(synthetic_values(name, seed, math.prod(shape), c, h)).view(shape)


@torch.no_grad()
def synthetic_(module, seed):
    """Fills every parameter of module (GPT2Model or GPT2LMHeadModel; the
    tied lm_head is wte) from the generator by its GPT2Model name,
    converted to the parameter's dtype and device. Returns module."""
    for name, p in module.named_parameters():
        p.copy_(synthetic_tensor(strip_transformer(name), seed, list(p.shape)))
    return module


def self_test():
    assert synthetic_range("h.0.ln_1.weight") == (1.0, 0.1)
    assert synthetic_range("ln_f.weight") == (1.0, 0.1)
    assert synthetic_range("h.11.ln_2.bias") == (0.0, 0.02)
    assert synthetic_range("h.3.attn.c_attn.bias") == (0.0, 0.02)
    assert synthetic_range("h.3.mlp.c_fc.weight") == (0.0, 0.05)
    assert synthetic_range("wte.weight") == (0.0, 0.05)
    names = [n for n, _ in GPT2LMHeadModel(GPT2Config(TINY_CONFIG)).named_parameters()]
    assert "lm_head.weight" not in names, "the tied lm_head has no parameter of its own"
    # gelu_new is torch's tanh approximation.
    x = torch.linspace(-6, 6, 101, dtype=torch.float64)
    new = 0.5 * x * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * torch.pow(x, 3.0))))
    assert torch.allclose(F.gelu(x, approximate="tanh"), new, rtol=0, atol=1e-15)


# ---------------------------------------------------------------------------
# Goldens


def case_generator(name):
    return torch.Generator().manual_seed((BASE_SEED ^ fnv1a64(name)) & ((1 << 63) - 1))


def make_inputs(gen, V, lengths, S):
    """input_ids random in [0, V) (padding positions V−1, GPT-2's
    <|endoftext|> as pad) and attention_mask, int64 [B, S], padded on the
    right."""
    B = len(lengths)
    ids = torch.randint(0, V, (B, S), generator=gen)
    mask = torch.zeros(B, S, dtype=torch.int64)
    for r, n in enumerate(lengths):
        mask[r, :n] = 1
    ids[mask == 0] = V - 1
    return ids, mask


def tiny_checkpoint(model):
    """The tiny model's state_dict as GPT2LMHeadModel saves it, with the
    attention buffers older transformers saved and without the tied
    lm_head.weight."""
    sd = {n: p for n, p in model.state_dict().items() if n != "lm_head.weight"}
    P = model.config.n_positions
    for i in range(model.config.n_layer):
        sd[f"transformer.h.{i}.attn.bias"] = torch.ones(P, P).tril().view(1, 1, P, P)
        sd[f"transformer.h.{i}.attn.masked_bias"] = torch.tensor(-1e4)
    return {n: entry(n, sd[n]) for n in sorted(sd)}


@torch.no_grad()
def logits64(model, ids, mask, last_only=False):
    m = GPT2LMHeadModel(model.config)
    m.load_state_dict(model.state_dict())
    return m.double().eval()(ids, mask, last_only)


def build():
    """{repo-relative path: bytes} of every file this script writes."""
    torch.manual_seed(BASE_SEED)
    torch.set_num_threads(1)
    files = {}
    tiny = synthetic_(GPT2LMHeadModel(GPT2Config(TINY_CONFIG)), TINY_SEED).eval()
    files[TINY_DIR + "/config.json"] = (json.dumps(TINY_CONFIG, indent=2, sort_keys=True) + "\n").encode()
    files[TINY_DIR + "/model.safetensors"] = serialize(tiny_checkpoint(tiny), {"format": "pt"})

    t = Tensors({"reference": f"torch {torch.__version__}", "script": SCRIPT, "format": FORMAT})

    def put(name, cfg_dict, weights, seed, padding, positions, ids, mask, logits):
        t.put(f"{name}/input_ids", ids.to(torch.int32))
        t.put(f"{name}/attention_mask", mask.to(torch.int32))
        t.put(f"{name}/logits", logits)
        meta = {"config": cfg_dict, "weights": weights, "padding": padding, "positions": positions}
        if seed is not None:
            meta["seed"] = seed
        t.meta[name] = compact(meta)

    V = TINY_CONFIG["vocab_size"]
    for name, lengths, padding in (("tiny", (12, 12), "none"), ("tiny_right", (12, 7, 1), "right")):
        ids, mask = make_inputs(case_generator(name), V, lengths, 12)
        put(name, TINY_CONFIG, TINY_DIR, None, padding, "all", ids, mask, logits64(tiny, ids, mask))

    small = synthetic_(GPT2LMHeadModel(GPT2Config(SMALL_CONFIG)), SMALL_SEED).eval()
    ids, mask = make_inputs(case_generator("small"), SMALL_CONFIG["vocab_size"], (128,), 128)
    put("small", SMALL_CONFIG, "synthetic", SMALL_SEED, "none", "last", ids, mask,
        logits64(small, ids, mask, last_only=True))
    files["testdata/golden/gpt2.safetensors"] = t.serialize()
    return files


def main():
    self_test()
    return golden_files.main(__doc__, build, REPO, SCRIPT)


if __name__ == "__main__":
    sys.exit(main())
