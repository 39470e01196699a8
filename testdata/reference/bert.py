#!/usr/bin/env python3
"""Independent PyTorch reference for zbench's BERT (models/bert).

Our own torch modules with the semantics of Hugging Face's BertModel and
BertForMaskedLM (transformers itself is not needed, nor installable here),
the cross-language generator of seeded synthetic weights, and the writer of
the BERT goldens. Importing this file has no side effects:
baselines/peers/torch_bench.py imports the modules and the generator.

Modules (dtype and device agnostic: nn.Embedding, nn.Linear, nn.LayerNorm;
state_dict() keys are exactly Hugging Face's):

  BertConfig        from an HF config.json dict
  BertModel         forward(input_ids, attention_mask, token_type_ids)
                    -> (last_hidden_state, pooler_output or None)
  BertForMaskedLM   bert (no pooler) + cls.predictions (transform dense, act,
                    LayerNorm; decoder tied to the word embeddings, plus
                    cls.predictions.bias); forward(..., labels) -> (loss,
                    logits), loss = mean cross-entropy over labels != -100
  synthetic_        fills every parameter from the seeded generator

Dropout is never applied (eval semantics; the training goldens also run
without dropout). Semantics: embeddings = word + token_type (default zeros)
+ position (ids 0..S-1), LayerNorm; post-LN encoder layers with attention
scores q·kᵀ/√head_dim + (1 − mask)·finfo(dtype).min; pooler =
tanh(dense(hidden[:, 0])).

Seeded synthetic weights (normative; models/synth implements the same):

  fnv1a64(name): h = 0xcbf29ce484222325; per utf-8 byte: h ^= b; h *= 0x100000001b3
  k   = seed XOR fnv1a64(name)
  z_i = k + (i+1)·0x9e3779b97f4a7c15, then splitmix64's finaliser
        z ^= z>>30; z *= 0xbf58476d1ce4e5b9; z ^= z>>27; z *= 0x94d049bb133111eb; z ^= z>>31
  u_i = (z_i >> 40) / 2^24                   (exact, in [0, 1))
  value_i = float32(center + half·(2u_i − 1)), in float64 (no fused
        multiply-add), rounded to nearest float32

all arithmetic mod 2^64, i the row-major element index, name the Hugging
Face name without a leading "bert.". (center, half): "*LayerNorm.weight"
(1, 0.1), "*LayerNorm.bias" (0, 0.05), any other "*.bias" (0, 0.02), any
other weight (0, 0.05).

Files written (under testdata/golden):

  bert-tiny/config.json        an HF BERT config (tiny sizes)
  bert-tiny/model.safetensors  a BertForPreTraining-style checkpoint, F32,
                               synthetic seed 7: "bert." + every BertModel
                               name (pooler included), cls.predictions.*
                               (no tied decoder weight) and
                               cls.seq_relationship.*; metadata {"format":"pt"}
  bert-tiny/input.safetensors  input_ids, attention_mask, token_type_ids I64
                               [3, 11], right padding (lengths 11, 7, 2)
  bert-tiny/output.safetensors last_hidden_state F32 [3, 11, 32],
                               pooler_output F32 [3, 32]
  bert.safetensors             tensors "<case>/<role>": input_ids,
                               attention_mask, token_type_ids I32 [B, S];
                               last_hidden_state F32 [B, S, H], pooler_output
                               F32 [B, H] (every position, padded ones too);
                               metadata "<case>" = JSON {"config": "tiny" |
                               "base", "weights": the tiny checkpoint's path
                               or "synthetic", "seed" (synthetic only),
                               "padded"}, plus "reference", "script", "format"
  bert-train.safetensors       BertForMaskedLM on the tiny config and
                               checkpoint, AdamW for 10 steps on one batch:
                               input_ids, token_type_ids, labels I32 [4, 16]
                               (no padding; attention mask all ones, not
                               stored); loss F32 [10] (each step's, before its
                               update); grad/<param> (after step 1's
                               backward; the word embeddings' includes the
                               tied decoder's part) and step1/<param> (after
                               step 1's update) F32 for every parameter, named
                               as in the checkpoint; metadata "train" (JSON
                               hyper-parameters), "weights", "reference",
                               "script", "format"
  bert-train-curve.safetensors BertForMaskedLM on CURVE_CONFIG (6 layers,
                               hidden 64, 2 heads, intermediate 256, vocab
                               4096), synthetic weights of seed 20261126 (not
                               stored), AdamW for 200 steps, step i on batch
                               i % 50, in float32 and in bf16 mixed precision
                               (float32 masters, the whole model and every op in
                               bfloat16, loss in float32 of the bf16 logits,
                               master grads = the bf16 grads): input_ids,
                               labels I32 [50, 8, 32] (no padding; attention
                               mask all ones and token types all 0, not
                               stored; ids iid Zipf over 999..4095, p(id) ∝
                               1/(id − 998), then masked as bert-train's with
                               mask id 103); loss/f32, loss/bf16 F32 [200]
                               (each step's, before its update); metadata
                               "train" (JSON hyper-parameters), "config" (JSON
                               HF config), "weights" ("synthetic"), "seed",
                               "reference", "script", "format"

Expected outputs are computed in float64 from the stored float32 weights,
except bert-train-curve's losses (float32 and bf16 training in torch, on
one CPU thread).
The safetensors files are written by this script itself with the reference
implementation's layout: tensors ordered by decreasing dtype then name,
"__metadata__" first, header padded with spaces to 8 bytes.

Deterministic: fixed seeds, one thread, deterministic algorithms.
Requires torch (1.13 tested, CPU only) and numpy. Run from anywhere:

  /usr/bin/python3 testdata/reference/bert.py            # write the goldens
  /usr/bin/python3 testdata/reference/bert.py --check    # verify they are current
"""

import json
import math
import os
import struct
import sys

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

import golden_files
from safetensors_file import entry, serialize

SCRIPT = "testdata/reference/bert.py"
FORMAT = "zbench-golden/1: tensors <case>/<role>, metadata <case> = JSON params"
TRAIN_FORMAT = ("zbench-golden/1: tensors input_ids, token_type_ids, labels, loss, grad/<param>, "
                "step1/<param>; metadata train = JSON hyper-parameters")
REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TINY_DIR = "testdata/golden/bert-tiny"
TINY_WEIGHTS = TINY_DIR + "/model.safetensors"
TINY_SEED = 7
BASE_SEED = 20261121
IGNORE_INDEX = -100

# ---------------------------------------------------------------------------
# Configuration

ACTS = ("gelu", "gelu_new", "gelu_pytorch_tanh", "relu")

# The tiny test config, as an HF config.json holds it.
TINY_CONFIG = {
    "architectures": ["BertForPreTraining"],
    "attention_probs_dropout_prob": 0.1,
    "classifier_dropout": None,
    "hidden_act": "gelu",
    "hidden_dropout_prob": 0.1,
    "hidden_size": 32,
    "initializer_range": 0.02,
    "intermediate_size": 37,
    "layer_norm_eps": 1e-12,
    "max_position_embeddings": 64,
    "model_type": "bert",
    "num_attention_heads": 4,
    "num_hidden_layers": 2,
    "pad_token_id": 0,
    "position_embedding_type": "absolute",
    "torch_dtype": "float32",
    "type_vocab_size": 2,
    "use_cache": True,
    "vocab_size": 99,
}

# bert-base-uncased's sizes.
BASE_CONFIG = {
    "vocab_size": 30522, "hidden_size": 768, "num_hidden_layers": 12, "num_attention_heads": 12,
    "intermediate_size": 3072, "hidden_act": "gelu", "max_position_embeddings": 512,
    "type_vocab_size": 2, "layer_norm_eps": 1e-12,
}


class BertConfig:
    """The fields of an HF BERT config that the model uses."""

    def __init__(self, vocab_size=30522, hidden_size=768, num_hidden_layers=12, num_attention_heads=12,
                 intermediate_size=3072, hidden_act="gelu", max_position_embeddings=512, type_vocab_size=2,
                 layer_norm_eps=1e-12):
        if hidden_size % num_attention_heads != 0:
            raise ValueError(f"hidden_size {hidden_size} is not a multiple of num_attention_heads {num_attention_heads}")
        if hidden_act not in ACTS:
            raise ValueError(f"hidden_act {hidden_act!r}: want one of {', '.join(ACTS)}")
        self.vocab_size = vocab_size
        self.hidden_size = hidden_size
        self.num_hidden_layers = num_hidden_layers
        self.num_attention_heads = num_attention_heads
        self.intermediate_size = intermediate_size
        self.hidden_act = hidden_act
        self.max_position_embeddings = max_position_embeddings
        self.type_vocab_size = type_vocab_size
        self.layer_norm_eps = layer_norm_eps

    @classmethod
    def from_dict(cls, d):
        """From an HF config.json dict; keys the model does not use (dropout
        rates, architectures, ...) are ignored."""
        pet = d.get("position_embedding_type", "absolute")
        if pet != "absolute":
            raise ValueError(f"position_embedding_type {pet!r}: only absolute is supported")
        names = ("vocab_size", "hidden_size", "num_hidden_layers", "num_attention_heads", "intermediate_size",
                 "hidden_act", "max_position_embeddings", "type_vocab_size", "layer_norm_eps")
        return cls(**{k: d[k] for k in names if k in d})

    @property
    def head_dim(self):
        return self.hidden_size // self.num_attention_heads


def activation(name, x):
    if name == "gelu":
        return F.gelu(x)  # exact, with erf
    if name in ("gelu_new", "gelu_pytorch_tanh"):
        return F.gelu(x, approximate="tanh")
    if name == "relu":
        return F.relu(x)
    raise ValueError(name)


# ---------------------------------------------------------------------------
# Modules, named as Hugging Face's


class BertEmbeddings(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        H = cfg.hidden_size
        self.word_embeddings = nn.Embedding(cfg.vocab_size, H)
        self.position_embeddings = nn.Embedding(cfg.max_position_embeddings, H)
        self.token_type_embeddings = nn.Embedding(cfg.type_vocab_size, H)
        self.LayerNorm = nn.LayerNorm(H, eps=cfg.layer_norm_eps)

    def forward(self, input_ids, token_type_ids=None):
        S = input_ids.shape[1]
        if token_type_ids is None:
            token_type_ids = torch.zeros_like(input_ids)
        pos = torch.arange(S, device=input_ids.device).unsqueeze(0)
        x = self.word_embeddings(input_ids) + self.token_type_embeddings(token_type_ids)
        x = x + self.position_embeddings(pos)
        return self.LayerNorm(x)


def _compiling():
    """Whether torch.compile is tracing this call (torch >= 2)."""
    for mod in ("compiler", "_dynamo"):
        f = getattr(getattr(torch, mod, None), "is_compiling", None)
        if f is not None:
            return bool(f())
    return False


class BertSelfAttention(nn.Module):
    """q, k, v projections and the attention core. attn_dtype (None: the
    hidden states' dtype) is the dtype the core (q·kᵀ, softmax, ·v) runs in;
    sdpa uses F.scaled_dot_product_attention where torch has it."""

    def __init__(self, cfg, sdpa=False, attn_dtype=None):
        super().__init__()
        H = cfg.hidden_size
        self.heads, self.head_dim = cfg.num_attention_heads, cfg.head_dim
        self.query = nn.Linear(H, H)
        self.key = nn.Linear(H, H)
        self.value = nn.Linear(H, H)
        self.sdpa = sdpa and hasattr(F, "scaled_dot_product_attention")
        self.attn_dtype = attn_dtype

    def forward(self, x, ext_mask):
        B, S, H = x.shape
        split = lambda t: t.view(B, S, self.heads, self.head_dim).transpose(1, 2)
        q, k, v = split(self.query(x)), split(self.key(x)), split(self.value(x))
        if self.attn_dtype is not None:
            q, k, v = q.to(self.attn_dtype), k.to(self.attn_dtype), v.to(self.attn_dtype)
        if self.sdpa:
            ctx = F.scaled_dot_product_attention(q, k, v, attn_mask=ext_mask)
        else:
            s = torch.matmul(q, k.transpose(-1, -2)) / math.sqrt(self.head_dim)
            if ext_mask is not None:
                s = s + ext_mask
            ctx = torch.matmul(torch.softmax(s, dim=-1), v)
        return ctx.to(x.dtype).transpose(1, 2).reshape(B, S, H)


class BertSelfOutput(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.dense = nn.Linear(cfg.hidden_size, cfg.hidden_size)
        self.LayerNorm = nn.LayerNorm(cfg.hidden_size, eps=cfg.layer_norm_eps)

    def forward(self, h, residual):
        return self.LayerNorm(self.dense(h) + residual)


class BertAttention(nn.Module):
    def __init__(self, cfg, sdpa=False, attn_dtype=None):
        super().__init__()
        self.self = BertSelfAttention(cfg, sdpa, attn_dtype)
        self.output = BertSelfOutput(cfg)

    def forward(self, x, ext_mask):
        return self.output(self.self(x, ext_mask), x)


class BertIntermediate(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.dense = nn.Linear(cfg.hidden_size, cfg.intermediate_size)
        self.act = cfg.hidden_act

    def forward(self, x):
        return activation(self.act, self.dense(x))


class BertOutput(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.dense = nn.Linear(cfg.intermediate_size, cfg.hidden_size)
        self.LayerNorm = nn.LayerNorm(cfg.hidden_size, eps=cfg.layer_norm_eps)

    def forward(self, h, residual):
        return self.LayerNorm(self.dense(h) + residual)


class BertLayer(nn.Module):
    def __init__(self, cfg, sdpa=False, attn_dtype=None):
        super().__init__()
        self.attention = BertAttention(cfg, sdpa, attn_dtype)
        self.intermediate = BertIntermediate(cfg)
        self.output = BertOutput(cfg)

    def forward(self, x, ext_mask):
        a = self.attention(x, ext_mask)
        return self.output(self.intermediate(a), a)


class BertEncoder(nn.Module):
    def __init__(self, cfg, sdpa=False, attn_dtype=None):
        super().__init__()
        self.layer = nn.ModuleList(BertLayer(cfg, sdpa, attn_dtype) for _ in range(cfg.num_hidden_layers))

    def forward(self, x, ext_mask):
        for layer in self.layer:
            x = layer(x, ext_mask)
        return x


class BertPooler(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.dense = nn.Linear(cfg.hidden_size, cfg.hidden_size)

    def forward(self, h):
        return torch.tanh(self.dense(h[:, 0]))


class BertModel(nn.Module):
    """HF BertModel. sdpa and attn_dtype: see BertSelfAttention (the
    reference itself uses neither)."""

    def __init__(self, cfg, add_pooling_layer=True, sdpa=False, attn_dtype=None):
        super().__init__()
        self.config = cfg
        self.sdpa = sdpa and hasattr(F, "scaled_dot_product_attention")
        self.attn_dtype = attn_dtype
        self.embeddings = BertEmbeddings(cfg)
        self.encoder = BertEncoder(cfg, sdpa, attn_dtype)
        self.pooler = BertPooler(cfg) if add_pooling_layer else None

    def extended_mask(self, attention_mask, dtype):
        """HF's get_extended_attention_mask: [B, S] of 1 (attend) and 0
        (padding) -> additive [B, 1, 1, S] of 0 and finfo(dtype).min. With
        sdpa, an all-ones mask becomes None as in HF's sdpa path (outside
        torch.compile)."""
        if attention_mask is None:
            return None
        if self.sdpa and not _compiling() and bool(torch.all(attention_mask == 1)):
            return None
        m = attention_mask[:, None, None, :].to(dtype)
        return (1.0 - m) * torch.finfo(dtype).min

    def forward(self, input_ids, attention_mask=None, token_type_ids=None):
        x = self.embeddings(input_ids, token_type_ids)
        ext = self.extended_mask(attention_mask, self.attn_dtype or x.dtype)
        h = self.encoder(x, ext)
        return h, (self.pooler(h) if self.pooler is not None else None)


class BertPredictionHeadTransform(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.dense = nn.Linear(cfg.hidden_size, cfg.hidden_size)
        self.act = cfg.hidden_act
        self.LayerNorm = nn.LayerNorm(cfg.hidden_size, eps=cfg.layer_norm_eps)

    def forward(self, h):
        return self.LayerNorm(activation(self.act, self.dense(h)))


class BertLMPredictionHead(nn.Module):
    """The transform, then the decoder: the word embeddings (tied, passed
    in) plus its own bias."""

    def __init__(self, cfg):
        super().__init__()
        self.transform = BertPredictionHeadTransform(cfg)
        self.bias = nn.Parameter(torch.zeros(cfg.vocab_size))

    def forward(self, h, decoder_weight):
        return F.linear(self.transform(h), decoder_weight, self.bias)


class BertOnlyMLMHead(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.predictions = BertLMPredictionHead(cfg)

    def forward(self, h, decoder_weight):
        return self.predictions(h, decoder_weight)


class BertForMaskedLM(nn.Module):
    """HF BertForMaskedLM: parameters bert.* (no pooler) and
    cls.predictions.{transform.*, bias}; the decoder weight is
    bert.embeddings.word_embeddings.weight."""

    def __init__(self, cfg, sdpa=False, attn_dtype=None):
        super().__init__()
        self.config = cfg
        self.bert = BertModel(cfg, add_pooling_layer=False, sdpa=sdpa, attn_dtype=attn_dtype)
        self.cls = BertOnlyMLMHead(cfg)

    def forward(self, input_ids, attention_mask=None, token_type_ids=None, labels=None):
        h, _ = self.bert(input_ids, attention_mask, token_type_ids)
        logits = self.cls(h, self.bert.embeddings.word_embeddings.weight)
        loss = None
        if labels is not None:
            loss = F.cross_entropy(logits.view(-1, self.config.vocab_size), labels.reshape(-1).long(),
                                   ignore_index=IGNORE_INDEX)
        return loss, logits


# ---------------------------------------------------------------------------
# Seeded synthetic weights

_M64 = (1 << 64) - 1
_GAMMA = 0x9E3779B97F4A7C15
_MIX1 = 0xBF58476D1CE4E5B9
_MIX2 = 0x94D049BB133111EB


def fnv1a64(name):
    h = 0xCBF29CE484222325
    for b in name.encode("utf-8"):
        h = ((h ^ b) * 0x100000001B3) & _M64
    return h


def splitmix64(k, start, n):
    """The finalised z_i of key k for i in [start, start+n), as uint64."""
    u64 = np.uint64
    with np.errstate(over="ignore"):
        z = np.arange(start + 1, start + n + 1, dtype=np.uint64) * u64(_GAMMA) + u64(k)
        z = (z ^ (z >> u64(30))) * u64(_MIX1)
        z = (z ^ (z >> u64(27))) * u64(_MIX2)
        z ^= z >> u64(31)
    return z


def synthetic_range(name):
    """(center, half) of the named parameter's values."""
    if name.endswith("LayerNorm.weight"):
        return 1.0, 0.1
    if name.endswith("LayerNorm.bias"):
        return 0.0, 0.05
    if name.endswith(".bias"):
        return 0.0, 0.02
    return 0.0, 0.05


def synthetic_values(name, seed, n, center=None, half=None):
    """The first n values of the named tensor's stream as float32 numpy;
    center and half default to synthetic_range(name)."""
    if center is None or half is None:
        center, half = synthetic_range(name)
    k = (seed ^ fnv1a64(name)) & _M64
    out = np.empty(n, dtype=np.float32)
    chunk = 1 << 22
    for start in range(0, n, chunk):
        m = min(chunk, n - start)
        u = (splitmix64(k, start, m) >> np.uint64(40)).astype(np.float64) / float(1 << 24)
        v = half * (2.0 * u - 1.0)  # rounded, then added: no fused multiply-add
        out[start:start + m] = (center + v).astype(np.float32)
    return out


def synthetic_tensor(name, seed, shape):
    return torch.from_numpy(synthetic_values(name, seed, math.prod(shape))).view(shape)


def strip_bert(name):
    return name[len("bert."):] if name.startswith("bert.") else name


@torch.no_grad()
def synthetic_(module, seed):
    """Fills every parameter of module from the generator, keyed by its HF
    name without a leading "bert.", converted to the parameter's dtype and
    device. Returns module."""
    for name, p in module.named_parameters():
        p.copy_(synthetic_tensor(strip_bert(name), seed, list(p.shape)))
    return module


# Known values, which models/synth's tests assert too.
SELFTEST_NAME = "embeddings.word_embeddings.weight"
SELFTEST_EXPECT = [0x3D28D293, 0xBD482B86, 0x3C54052D, 0xBC81955D]


def self_test(verbose=False):
    """Asserts the generator's known values: FNV-1a and splitmix64 test
    vectors, and the first values of one stream."""
    assert fnv1a64("") == 0xCBF29CE484222325
    assert fnv1a64("a") == 0xAF63DC4C8601EC8C
    assert fnv1a64("foobar") == 0x85944171F73967E8
    # splitmix64 seeded 0: its first outputs.
    assert [int(z) for z in splitmix64(0, 0, 3)] == [0xE220A8397B1DCDAF, 0x6E789E6AA1B965F4, 0x06C45D188009454F]
    k = 1 ^ fnv1a64(SELFTEST_NAME)
    vals = synthetic_values(SELFTEST_NAME, 1, 4, 0.0, 0.05)
    bits = [int(b) for b in vals.view(np.uint32)]
    if verbose:
        print(f"self-test: fnv1a64({SELFTEST_NAME!r}) = {fnv1a64(SELFTEST_NAME):#018x}, key(seed 1) = {k:#018x}")
        print(f"self-test: {SELFTEST_NAME} seed 1 (0, 0.05): "
              + ", ".join(f"{float(v)!r} ({b:#010x})" for v, b in zip(vals, bits)))
    if SELFTEST_EXPECT is not None:
        assert bits == SELFTEST_EXPECT, ([hex(b) for b in bits], [hex(b) for b in SELFTEST_EXPECT])
    # Ranges by name.
    assert synthetic_range("bert.encoder.layer.0.output.LayerNorm.weight") == (1.0, 0.1)
    assert synthetic_range("cls.predictions.transform.LayerNorm.bias") == (0.0, 0.05)
    assert synthetic_range("cls.predictions.bias") == (0.0, 0.02)
    assert synthetic_range("pooler.dense.weight") == (0.0, 0.05)
    # Chunking does not change the stream.
    a = synthetic_values("x", 3, (1 << 22) + 5)
    assert np.array_equal(a[-5:], synthetic_values("x", 3, 5 + (1 << 22))[-5:])
    z = splitmix64((3 ^ fnv1a64("x")) & _M64, (1 << 22) + 1, 2)
    c, h = synthetic_range("x")
    assert a[(1 << 22) + 1] == np.float32(c + h * (2.0 * float(int(z[0]) >> 40) / (1 << 24) - 1.0))
    return vals


# ---------------------------------------------------------------------------
# safetensors

NP_DTYPES = {"F32": "<f4", "I32": "<i4", "I64": "<i8"}


class Tensors:
    """An ordered collection of named tensors and string metadata, written
    as one safetensors file."""

    def __init__(self, meta=None):
        self.tensors = {}  # name -> (st dtype, shape, bytes)
        self.meta = dict(meta or {})

    def put(self, name, t):
        assert name not in self.tensors, name
        if t.dtype == torch.float64:
            assert torch.isfinite(t).all(), name
            t = t.to(torch.float32)
        self.tensors[name] = entry(name, t)

    def serialize(self):
        return serialize(self.tensors, self.meta)


def parse_safetensors(data):
    """(metadata, {name: tensor}) of a safetensors file's bytes."""
    (n,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8:8 + n])
    meta = header.pop("__metadata__", {})
    body = data[8 + n:]
    out = {}
    for name, e in header.items():
        a, b = e["data_offsets"]
        arr = np.frombuffer(body[a:b], dtype=NP_DTYPES[e["dtype"]]).reshape(e["shape"])
        out[name] = torch.from_numpy(arr.copy())
    return meta, out


def std_meta(fmt):
    return {"reference": f"torch {torch.__version__}", "script": SCRIPT, "format": fmt}


def compact(d):
    return json.dumps(d, sort_keys=True, separators=(",", ":"))


# ---------------------------------------------------------------------------
# Goldens


def case_generator(name):
    """A torch generator seeded from the case's name: cases do not shift
    each other's inputs."""
    return torch.Generator().manual_seed((BASE_SEED ^ fnv1a64(name)) & ((1 << 63) - 1))


def make_inputs(gen, cfg, lengths, S):
    """input_ids (random in [0, V), a few 0s and V-1s), attention_mask
    (right padding to lengths) and token_type_ids (0…0 1…1 per row, 0 on
    padding), all int64 [B, S]; padding positions hold id 0."""
    B, V = len(lengths), cfg.vocab_size
    ids = torch.randint(0, V, (B, S), generator=gen)
    edge = torch.rand(B, S, generator=gen)
    ids[edge < 0.05] = 0
    ids[(edge >= 0.05) & (edge < 0.08)] = V - 1
    mask = torch.zeros(B, S, dtype=torch.int64)
    tt = torch.zeros(B, S, dtype=torch.int64)
    for r, L in enumerate(lengths):
        mask[r, :L] = 1
        ids[r, L:] = 0
        if L >= 2:
            split = int(torch.randint(1, L, (1,), generator=gen))
            tt[r, split:L] = 1
    return ids, mask, tt


def tiny_checkpoint(cfg):
    """The BertForPreTraining-style checkpoint of the tiny config."""
    model = synthetic_(BertModel(cfg), TINY_SEED)
    mlm = synthetic_(BertForMaskedLM(cfg), TINY_SEED)
    t = Tensors({"format": "pt"})
    for n, p in model.state_dict().items():
        t.put("bert." + n, p)
    for n, p in mlm.state_dict().items():
        if n.startswith("cls."):
            t.put(n, p)
    H = cfg.hidden_size
    t.put("cls.seq_relationship.weight", synthetic_tensor("cls.seq_relationship.weight", TINY_SEED, [2, H]))
    t.put("cls.seq_relationship.bias", synthetic_tensor("cls.seq_relationship.bias", TINY_SEED, [2]))
    return t


def load_bert(cfg, ckpt):
    """A float64 BertModel with the checkpoint's bert.* tensors."""
    m = BertModel(cfg).double()
    m.load_state_dict({n[5:]: v for n, v in ckpt.items() if n.startswith("bert.")}, strict=True)
    return m.eval()


def load_mlm(cfg, ckpt):
    """A float64 BertForMaskedLM with the checkpoint's bert.* (no pooler)
    and cls.predictions.* tensors."""
    m = BertForMaskedLM(cfg).double()
    sd = {n: v for n, v in ckpt.items()
          if (n.startswith("bert.") and not n.startswith("bert.pooler.")) or n.startswith("cls.predictions.")}
    m.load_state_dict(sd, strict=True)
    return m


def build_tiny(files):
    cfg = BertConfig.from_dict(TINY_CONFIG)
    files[TINY_DIR + "/config.json"] = (json.dumps(TINY_CONFIG, indent=2, sort_keys=True) + "\n").encode("utf-8")
    data = tiny_checkpoint(cfg).serialize()
    files[TINY_WEIGHTS] = data
    _, ckpt = parse_safetensors(data)  # compute from what the file holds

    ids, mask, tt = make_inputs(case_generator("bert-tiny"), cfg, [11, 7, 2], 11)
    inp = Tensors(std_meta("bert-tiny input: input_ids, attention_mask, token_type_ids"))
    inp.put("input_ids", ids)
    inp.put("attention_mask", mask)
    inp.put("token_type_ids", tt)
    files[TINY_DIR + "/input.safetensors"] = inp.serialize()
    with torch.no_grad():
        h, pooled = load_bert(cfg, ckpt)(ids, mask, tt)
    out = Tensors(std_meta("bert-tiny output: BertModel(model.safetensors)(input.safetensors), float64 reference"))
    out.put("last_hidden_state", h)
    out.put("pooler_output", pooled)
    files[TINY_DIR + "/output.safetensors"] = out.serialize()
    return cfg, ckpt


def build_cases(files, tiny_cfg, tiny_ckpt):
    g = Tensors(std_meta(FORMAT))
    tiny = load_bert(tiny_cfg, tiny_ckpt)
    base_cfg = BertConfig.from_dict(BASE_CONFIG)
    base = synthetic_(BertModel(base_cfg).double(), BASE_SEED).eval()
    cases = [
        ("tiny_unpadded", "tiny", [16, 16], 16),
        ("tiny_padded", "tiny", [16, 9, 1], 16),
        ("base_unpadded", "base", [128], 128),
        ("base_padded", "base", [64, 23], 64),
    ]
    for name, which, lengths, S in cases:
        cfg, model = (tiny_cfg, tiny) if which == "tiny" else (base_cfg, base)
        padded = any(L < S for L in lengths)
        params = {"config": which, "padded": padded}
        if which == "tiny":
            params["weights"] = TINY_WEIGHTS
        else:
            params["weights"], params["seed"] = "synthetic", BASE_SEED
        g.meta[name] = compact(params)
        ids, mask, tt = make_inputs(case_generator(name), cfg, lengths, S)
        with torch.no_grad():
            h, pooled = model(ids, mask, tt)
        for role, t in (("input_ids", ids.int()), ("attention_mask", mask.int()), ("token_type_ids", tt.int()),
                        ("last_hidden_state", h), ("pooler_output", pooled)):
            g.put(f"{name}/{role}", t)
    files["testdata/golden/bert.safetensors"] = g.serialize()


TRAIN = {"lr": 1e-3, "beta1": 0.9, "beta2": 0.999, "eps": 1e-8, "weight_decay": 0.01, "steps": 10,
         "mask_id": 3, "decay": "dim>=2"}


def mask_tokens(gen, ids, vocab_size, mask_id):
    """(input, labels) of int64 ids [B, S]: ~15% of the positions of each
    row (at least one) get a label (the original id) and their input
    replaced by mask_id (80%), a random id in [0, vocab_size) (10%) or kept
    (10%); labels are IGNORE_INDEX elsewhere."""
    B, S = ids.shape
    labels = torch.full((B, S), IGNORE_INDEX, dtype=torch.int64)
    inp = ids.clone()
    for r in range(B):
        sel = torch.rand(S, generator=gen) < 0.15
        if not sel.any():
            sel[int(torch.randint(0, S, (1,), generator=gen))] = True
        for j in sel.nonzero().flatten().tolist():
            labels[r, j] = ids[r, j]
            u = float(torch.rand(1, generator=gen))
            if u < 0.8:
                inp[r, j] = mask_id
            elif u < 0.9:
                inp[r, j] = int(torch.randint(0, vocab_size, (1,), generator=gen))
    return inp, labels


def mlm_batch(gen, cfg, B, S, mask_id):
    """Random ids and token types (make_inputs, no padding), masked by
    mask_tokens: (input, token_type_ids, labels)."""
    ids, _, tt = make_inputs(gen, cfg, [S] * B, S)
    inp, labels = mask_tokens(gen, ids, cfg.vocab_size, mask_id)
    return inp, tt, labels


def build_train(files, cfg, ckpt):
    ids, tt, labels = mlm_batch(case_generator("bert-train"), cfg, 4, 16, TRAIN["mask_id"])
    model = load_mlm(cfg, ckpt)
    named = list(model.named_parameters())
    decay = [p for _, p in named if p.dim() >= 2]
    no_decay = [p for _, p in named if p.dim() < 2]
    opt = torch.optim.AdamW(
        [{"params": decay, "weight_decay": TRAIN["weight_decay"]}, {"params": no_decay, "weight_decay": 0.0}],
        lr=TRAIN["lr"], betas=(TRAIN["beta1"], TRAIN["beta2"]), eps=TRAIN["eps"])
    ones = torch.ones_like(ids)
    losses, grads, step1 = [], {}, {}
    for step in range(TRAIN["steps"]):
        opt.zero_grad(set_to_none=True)
        loss, _ = model(ids, ones, tt, labels)
        losses.append(loss.detach())
        loss.backward()
        if step == 0:
            grads = {n: p.grad.detach().clone() for n, p in named}
        opt.step()
        if step == 0:
            step1 = {n: p.detach().clone() for n, p in named}
    meta = std_meta(TRAIN_FORMAT)
    meta["train"] = compact(TRAIN)
    meta["weights"] = TINY_WEIGHTS
    t = Tensors(meta)
    t.put("input_ids", ids.int())
    t.put("token_type_ids", tt.int())
    t.put("labels", labels.int())
    t.put("loss", torch.stack(losses))
    for n, _ in named:
        t.put(f"grad/{n}", grads[n])
        t.put(f"step1/{n}", step1[n])
    files["testdata/golden/bert-train.safetensors"] = t.serialize()
    return losses


# The loss-curve golden: masked-LM training of a 6-layer BERT from synthetic
# weights, in float32 and in bf16 mixed precision.
CURVE_CONFIG = dict(TINY_CONFIG, **{
    "architectures": ["BertForMaskedLM"], "vocab_size": 4096, "hidden_size": 64, "num_hidden_layers": 6,
    "num_attention_heads": 2, "intermediate_size": 256, "max_position_embeddings": 128, "type_vocab_size": 2,
    "hidden_act": "gelu", "layer_norm_eps": 1e-12,
})
CURVE_SEED = 20261126
CURVE_FORMAT = ("zbench-golden/1: tensors input_ids, labels, loss/<precision>; metadata train, config = JSON, "
                "weights, seed")
CURVE_BF16 = ("megatron-style: float32 master parameters; each step copies them (round to nearest even) into a "
              "bfloat16 copy of the whole model, every op in bfloat16; loss = cross-entropy of the bf16 logits "
              "converted to float32; backward through the bf16 model; master grad = the bf16 grad as float32; "
              "AdamW steps the float32 masters")
CURVE = {"lr": 5e-4, "beta1": 0.9, "beta2": 0.999, "eps": 1e-8, "weight_decay": 0.01, "decay": "dim>=2",
         "steps": 200, "batches": 50, "batch": 8, "seq": 32, "mask_id": 103, "zipf_ids": [999, 4095],
         "precisions": ["f32", "bf16"], "bf16_recipe": CURVE_BF16}


def zipf_ids(gen, shape, lo, hi):
    """int64 ids in [lo, hi] drawn iid with p(id) ∝ 1/(id − lo + 1): u =
    torch.rand(shape, float64) from gen, then the first rank r with u <
    cdf[r], cdf the float64 cumulative sum of 1/(r+1) over the total."""
    w = 1.0 / torch.arange(1, hi - lo + 2, dtype=torch.float64)
    cdf = torch.cumsum(w, 0) / w.sum()
    u = torch.rand(shape, dtype=torch.float64, generator=gen)
    r = torch.searchsorted(cdf, u.reshape(-1), right=True).clamp_(max=hi - lo).reshape(shape)
    return r + lo


def curve_batches(cfg):
    """The curve's batches: input_ids, labels int64 [batches, batch, seq];
    per batch, from one generator (case_generator("bert-train-curve")),
    zipf_ids then mask_tokens."""
    gen = case_generator("bert-train-curve")
    lo, hi = CURVE["zipf_ids"]
    ins, labs = [], []
    for _ in range(CURVE["batches"]):
        ids = zipf_ids(gen, (CURVE["batch"], CURVE["seq"]), lo, hi)
        inp, labels = mask_tokens(gen, ids, cfg.vocab_size, CURVE["mask_id"])
        ins.append(inp)
        labs.append(labels)
    return torch.stack(ins), torch.stack(labs)


def curve_optimizer(named):
    decay = [p for _, p in named if p.dim() >= 2]
    no_decay = [p for _, p in named if p.dim() < 2]
    return torch.optim.AdamW(
        [{"params": decay, "weight_decay": CURVE["weight_decay"]}, {"params": no_decay, "weight_decay": 0.0}],
        lr=CURVE["lr"], betas=(CURVE["beta1"], CURVE["beta2"]), eps=CURVE["eps"])


def curve_train(cfg, inputs, labels, precision):
    """The loss of each step (before its update) of training
    synthetic_(BertForMaskedLM(cfg), CURVE_SEED) in precision "f32" or
    "bf16" (CURVE_BF16), as float32 [steps]."""
    master = synthetic_(BertForMaskedLM(cfg), CURVE_SEED)
    named = list(master.named_parameters())
    opt = curve_optimizer(named)
    if precision == "bf16":
        model = synthetic_(BertForMaskedLM(cfg), CURVE_SEED).to(torch.bfloat16)
        pairs = list(zip([p for _, p in named], model.parameters()))
    else:
        assert precision == "f32", precision
        model, pairs = master, None
    V = cfg.vocab_size
    ones = torch.ones_like(inputs[0])
    losses = []
    for step in range(CURVE["steps"]):
        ids, lab = inputs[step % len(inputs)], labels[step % len(labels)]
        opt.zero_grad(set_to_none=True)
        if pairs is not None:
            with torch.no_grad():
                for pm, pb in pairs:
                    pb.copy_(pm)
                    pb.grad = None
        _, logits = model(ids, ones)
        loss = F.cross_entropy(logits.float().view(-1, V), lab.reshape(-1), ignore_index=IGNORE_INDEX)
        losses.append(loss.detach().float())
        loss.backward()
        if pairs is not None:
            for pm, pb in pairs:
                pm.grad = pb.grad.float()
        opt.step()
    return torch.stack(losses)


def build_curve(files):
    cfg = BertConfig.from_dict(CURVE_CONFIG)
    inputs, labels = curve_batches(cfg)
    meta = std_meta(CURVE_FORMAT)
    meta["train"] = compact(CURVE)
    meta["config"] = compact(CURVE_CONFIG)
    meta["weights"] = "synthetic"
    meta["seed"] = str(CURVE_SEED)
    t = Tensors(meta)
    t.put("input_ids", inputs.int())
    t.put("labels", labels.int())
    curves = {}
    for precision in CURVE["precisions"]:
        curves[precision] = curve_train(cfg, inputs, labels, precision)
        assert torch.isfinite(curves[precision]).all(), precision
        t.put(f"loss/{precision}", curves[precision])
    files["testdata/golden/bert-train-curve.safetensors"] = t.serialize()
    return curves


def build():
    """{repo-relative path: bytes} of every file this script writes."""
    torch.manual_seed(BASE_SEED)
    torch.set_num_threads(1)
    torch.use_deterministic_algorithms(True)
    files = {}
    cfg, ckpt = build_tiny(files)
    build_train(files, cfg, ckpt)
    build_cases(files, cfg, ckpt)
    build_curve(files)
    return files


def main():
    self_test(verbose=True)
    return golden_files.main(__doc__, build, REPO, SCRIPT)



if __name__ == "__main__":
    sys.exit(main())
