#!/usr/bin/env python3
"""Independent reference GGUF v3 writer for zbench's Llama (models/gguf).

Written from the GGUF format's rules (ggml-org/llama.cpp's docs/gguf.md,
ggml's block layouts in ggml-common.h and their reference quantizers in
ggml-quants.c, the conventions of llama.cpp's convert_hf_to_gguf.py), with
numpy alone: nothing of gguf-py is used.

Usage (run from anywhere; torch and numpy are needed for the shared
synthetic-weight generator, so use Debian's /usr/bin/python3):

  /usr/bin/python3 testdata/reference/gguf.py synth --model tinyllama|tiny \\
      --type F32|F16|BF16|Q8_0|Q4_0 --out FILE.gguf [--alignment N]
        writes one model as a GGUF file that llama.cpp loads:
          tinyllama  llama.TinyLlama()'s config (TinyLlama-1.1B-Chat-v1.0)
                     with the seeded synthetic weights of bench_test's Llama
                     benchmarks (seed 20261125, llama.py's synthetic_), and
                     Llama 2's tokenizer from
                     .cache/tokenizer-ref/llama2/tokenizer.json
                     (scripts/install-tokenizer-ref.sh makes it; the
                     variable ZBENCH_TOKENIZER_REF moves .cache/tokenizer-ref)
          tiny       testdata/golden/llama-tiny: its config.json,
                     model.safetensors and tokenizer.model
  /usr/bin/python3 testdata/reference/gguf.py            # write the goldens
  /usr/bin/python3 testdata/reference/gguf.py --check    # verify they are current

Files written (the goldens):

  testdata/golden/llama-tiny-gguf/model-f32.gguf    llama-tiny in F32
  testdata/golden/llama-tiny-gguf/model-f16.gguf    in F16, with
                                                    general.alignment 64
  testdata/golden/llama-tiny-gguf/model-q8_0.gguf   in Q8_0
  testdata/golden/llama-tiny-gguf/model-q4_0.gguf   in Q4_0

What a file holds (the conventions of llama.cpp's converter):

  header     magic "GGUF", version 3, tensor count, metadata count (u64)
  metadata   general.architecture "llama", general.name,
             general.alignment (u32, only when --alignment is not the
             default 32), general.file_type (llama_ftype: ALL_F32 0,
             MOSTLY_F16 1, MOSTLY_Q4_0 2, MOSTLY_Q8_0 7, MOSTLY_BF16 32),
             general.quantization_version 2;
             llama.vocab_size, context_length, embedding_length,
             block_count, feed_forward_length, rope.dimension_count (the
             head dimension), attention.head_count, attention.head_count_kv
             (u32), attention.layer_norm_rms_epsilon, rope.freq_base (f32),
             attention.key_length and value_length (u32, when head_dim is
             not hidden/heads), rope.scaling.type and rope.scaling.factor
             (linear rope scaling only; llama3 scaling raises);
             tokenizer.ggml.model "llama", tokenizer.ggml.pre "default",
             tokens (string array), scores (f32 array), token_type (i32
             array: 1 normal, 2 unknown, 3 control, 4 user-defined, 5
             unused, 6 byte), bos_token_id, eos_token_id, unknown_token_id
             (u32), add_bos_token true, add_eos_token false
  tensors    token_embd, blk.N.{attn_norm, attn_q, attn_k, attn_v,
             attn_output, ffn_norm, ffn_gate, ffn_up, ffn_down},
             output_norm, output (absent when tied), each ".weight"; dims
             are ggml's ne, innermost first (a torch [out, in] weight has
             ne [in, out]); 1-D tensors F32, 2-D ones in --type, except that
             a 2-D tensor whose rows (ne[0]) are not a multiple of the
             type's block size falls back to F16, as the converter does
             (llama-tiny's ffn_down, 172 wide, in Q8_0 and Q4_0); q and k
             rows permuted as the converter permutes them (per head, the two
             rotary halves interleaved: reshape [heads, 2, D/2, in], swap
             the middle axes; k with the KV heads); data offsets relative to
             the data section, each a multiple of the alignment, padding
             zero bytes

Tokenizers: tiny's tokenizer.model is read field by field (pieces, scores
and types as they are). Llama 2's tokenizer.json has no scores; they are
made so that SentencePiece, which merges the highest-scoring piece first,
merges in the merges list's order: when the list merges pieces in the order
of their ids, the score of normal piece i is the one SentencePiece's BPE
trainer writes, −(i − first normal id) (as in llama-tiny's
tokenizer.model); otherwise (Llama 2, whose whitespace-run pieces such as
"▁▁" merge last) a piece scores −(the rank of the first merge making it),
and pieces no merge makes −(merges + i − first normal id). <unk> is
unknown, the other special added tokens control, the <0xNN> tokens bytes,
all with score 0.

Quantizers (ggml's reference ones, in float32 as C computes them):

  Q8_0  blocks of 32: f16 d, int8 q[32]; d = amax/127, q = roundf(x/d·)
        (x·(1/d), halves away from zero); value = d·q
  Q4_0  blocks of 32: f16 d, u8 qs[16]; m = the first element of largest
        |x|, d = m/−8, q = min(15, trunc(x·(1/d) + 8.5)); qs[j] holds
        element j in its low nibble and j+16 in its high one;
        value = d·(q − 8) (dequantize_q4_0, which llama.py's
        tinyllama_q4_0 golden case rounds its weights through)
  F16   IEEE half, round to nearest even; BF16 the top 16 bits of the
        float32, rounded to nearest even (ggml's fp32→bf16)

Deterministic: the same inputs give the same bytes (the goldens are checked
with --check).
"""

import argparse
import io
import json
import math
import os
import struct
import sys

import numpy as np

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import golden_files  # noqa: E402

SCRIPT = "testdata/reference/gguf.py"
TINY_DIR = "testdata/golden/llama-tiny"
GOLDEN_DIR = "testdata/golden/llama-tiny-gguf"
TINYLLAMA_SEED = 20261125  # bench_test's llamaSeed
DEFAULT_ALIGNMENT = 32

# GGUF metadata value types.
UINT8, INT8, UINT16, INT16, UINT32, INT32, FLOAT32, BOOL, STRING, ARRAY, UINT64, INT64, FLOAT64 = range(13)
SCALAR_FORMATS = {UINT8: "<B", INT8: "<b", UINT16: "<H", INT16: "<h", UINT32: "<I", INT32: "<i",
                  FLOAT32: "<f", BOOL: "<?", UINT64: "<Q", INT64: "<q", FLOAT64: "<d"}

# ggml types: (ggml_type id, block size in elements, bytes per block,
# llama_ftype of a file mostly in the type).
GGML_TYPES = {
    "F32": (0, 1, 4, 0),
    "F16": (1, 1, 2, 1),
    "Q4_0": (2, 32, 18, 2),
    "Q8_0": (8, 32, 34, 7),
    "BF16": (30, 1, 2, 32),
}

# Token types (llama.cpp's llama_token_type, SentencePiece's piece types).
NORMAL, UNKNOWN, CONTROL, USER_DEFINED, UNUSED, BYTE = 1, 2, 3, 4, 5, 6


# ---------------------------------------------------------------------------
# Quantizers: float32 rows [n, k] to the bytes of the type.


def round_away(x):
    """C's roundf on float32: halves away from zero (exact: |x| − floor|x|
    is exact in float32 below 2²³)."""
    a = np.abs(x)
    f = np.floor(a)
    r = f + (a - f >= np.float32(0.5)).astype(np.float32)
    return np.copysign(r, x)


def quantize_q8_0(x):
    b = x.reshape(-1, 32).astype(np.float32)
    amax = np.abs(b).max(axis=1)
    d = (amax / np.float32(127)).astype(np.float32)
    with np.errstate(divide="ignore"):
        inv = np.where(d != 0, np.float32(1) / d, np.float32(0)).astype(np.float32)
    q = round_away(b * inv[:, None]).astype(np.int8)
    out = np.empty((b.shape[0], 34), dtype=np.uint8)
    out[:, :2] = d.astype("<f2").view(np.uint8).reshape(-1, 2)
    out[:, 2:] = q.view(np.uint8)
    return out.tobytes()


def quantize_q4_0(x):
    b = x.reshape(-1, 32).astype(np.float32)
    idx = np.abs(b).argmax(axis=1)  # the first of the largest
    m = b[np.arange(b.shape[0]), idx]
    d = (m / np.float32(-8)).astype(np.float32)
    with np.errstate(divide="ignore"):
        inv = np.where(d != 0, np.float32(1) / d, np.float32(0)).astype(np.float32)
    q = np.minimum(np.trunc(b * inv[:, None] + np.float32(8.5)), 15).astype(np.uint8)
    out = np.empty((b.shape[0], 18), dtype=np.uint8)
    out[:, :2] = d.astype("<f2").view(np.uint8).reshape(-1, 2)
    out[:, 2:] = q[:, :16] | (q[:, 16:] << 4)
    return out.tobytes()


def dequantize_q4_0(data):
    """The float32 values of Q4_0 blocks' bytes: d·(q − 8), element j of a
    block in byte j's low nibble and element j+16 in its high one (exact
    in float32: an f16 d times a 4-bit integer)."""
    b = np.frombuffer(data, dtype=np.uint8).reshape(-1, 18)
    d = b[:, :2].copy().view("<f2").astype(np.float32)
    q = np.concatenate([b[:, 2:] & 0xF, b[:, 2:] >> 4], axis=1).astype(np.float32) - np.float32(8)
    return (d * q).reshape(-1)


def to_bf16(x):
    u = np.ascontiguousarray(x, dtype=np.float32).view(np.uint32)
    with np.errstate(over="ignore"):
        r = ((u + (np.uint32(0x7FFF) + ((u >> 16) & 1))) >> 16).astype(np.uint16)
    nan = np.isnan(x)
    if nan.any():
        r[nan] = ((u[nan] >> 16) | 64).astype(np.uint16)
    return r.astype("<u2").tobytes()


def encode(x, typ):
    """The bytes of float32 array x (row-major, rows of ne[0]) in typ."""
    x = np.ascontiguousarray(x, dtype=np.float32)
    if typ == "F32":
        return x.astype("<f4").tobytes()
    if typ == "F16":
        return x.astype("<f2").tobytes()
    if typ == "BF16":
        return to_bf16(x)
    if typ == "Q8_0":
        return quantize_q8_0(x)
    if typ == "Q4_0":
        return quantize_q4_0(x)
    raise ValueError(f"unknown type {typ}")


def nbytes(ne, typ):
    _, block, size, _ = GGML_TYPES[typ]
    n = math.prod(ne)
    assert ne[0] % block == 0, (ne, typ)
    return n // block * size


# ---------------------------------------------------------------------------
# The GGUF writer


def gguf_string(s):
    b = s.encode("utf-8")
    return struct.pack("<Q", len(b)) + b


def gguf_value(typ, v):
    if typ == STRING:
        return gguf_string(v)
    if typ == ARRAY:
        et, items = v
        body = b"".join(gguf_value(et, i) for i in items)
        return struct.pack("<IQ", et, len(items)) + body
    return struct.pack(SCALAR_FORMATS[typ], v)


class Writer:
    """A GGUF v3 file being described: metadata (key, type, value) and
    tensors (name, ne, type, a function returning the float32 values in
    row-major order), written in the order they were added."""

    def __init__(self, alignment=DEFAULT_ALIGNMENT):
        self.alignment = alignment
        self.kv = []
        self.tensors = []

    def add(self, key, typ, value):
        assert all(k != key for k, _, _ in self.kv), key
        self.kv.append((key, typ, value))

    def add_tensor(self, name, ne, typ, values):
        assert all(t[0] != name for t in self.tensors), name
        self.tensors.append((name, list(ne), typ, values))

    def write(self, f):
        pad = lambda n: (-n) % self.alignment  # noqa: E731
        head = io.BytesIO()
        head.write(b"GGUF" + struct.pack("<IQQ", 3, len(self.tensors), len(self.kv)))
        for key, typ, value in self.kv:
            head.write(gguf_string(key) + struct.pack("<I", typ) + gguf_value(typ, value))
        off = 0
        for name, ne, typ, _ in self.tensors:
            head.write(gguf_string(name) + struct.pack("<I", len(ne)))
            head.write(struct.pack(f"<{len(ne)}Q", *ne))
            head.write(struct.pack("<IQ", GGML_TYPES[typ][0], off))
            off += nbytes(ne, typ)
            off += pad(off)
        h = head.getvalue()
        f.write(h + b"\0" * pad(len(h)))
        for name, ne, typ, values in self.tensors:
            x = values()
            assert x.size == math.prod(ne), name
            data = encode(x, typ)
            assert len(data) == nbytes(ne, typ), name
            f.write(data + b"\0" * pad(len(data)))


# ---------------------------------------------------------------------------
# Models


def permute(w, heads):
    """llama.cpp's converter's q/k row order: per head, the rotary halves
    interleaved. w is [heads·D, in]."""
    return w.reshape(heads, 2, w.shape[0] // heads // 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)


def storage_type(ne, typ):
    """The type a tensor of dims ne is stored in, for a file of type typ."""
    if len(ne) == 1:
        return "F32"
    if ne[0] % GGML_TYPES[typ][1]:
        return "F16"
    return typ


def llama_file(cfg, name, tensor, vocab, typ, alignment):
    """A Writer of an HF Llama config dict, its tensors (tensor(hf_name) →
    float32 numpy of the HF shape) and vocab (tokens, scores, types, bos,
    eos, unk), in typ."""
    rs = cfg.get("rope_scaling")
    H, heads = cfg["hidden_size"], cfg["num_attention_heads"]
    kv_heads = cfg.get("num_key_value_heads") or heads
    head_dim = cfg.get("head_dim") or H // heads
    w = Writer(alignment)
    w.add("general.architecture", STRING, "llama")
    w.add("general.name", STRING, name)
    if alignment != DEFAULT_ALIGNMENT:
        w.add("general.alignment", UINT32, alignment)
    w.add("general.file_type", UINT32, GGML_TYPES[typ][3])
    w.add("general.quantization_version", UINT32, 2)
    w.add("llama.vocab_size", UINT32, cfg["vocab_size"])
    w.add("llama.context_length", UINT32, cfg["max_position_embeddings"])
    w.add("llama.embedding_length", UINT32, H)
    w.add("llama.block_count", UINT32, cfg["num_hidden_layers"])
    w.add("llama.feed_forward_length", UINT32, cfg["intermediate_size"])
    w.add("llama.rope.dimension_count", UINT32, head_dim)
    w.add("llama.attention.head_count", UINT32, heads)
    w.add("llama.attention.head_count_kv", UINT32, kv_heads)
    w.add("llama.attention.layer_norm_rms_epsilon", FLOAT32, cfg["rms_norm_eps"])
    w.add("llama.rope.freq_base", FLOAT32, cfg.get("rope_theta", 10000.0))
    if head_dim != H // heads:
        w.add("llama.attention.key_length", UINT32, head_dim)
        w.add("llama.attention.value_length", UINT32, head_dim)
    if rs is not None:
        kind = rs.get("rope_type", rs.get("type"))
        if kind != "linear":
            raise ValueError(f"rope_scaling {kind!r}: only linear is written")
        w.add("llama.rope.scaling.type", STRING, "linear")
        w.add("llama.rope.scaling.factor", FLOAT32, rs["factor"])
    tokens, scores, types, bos, eos, unk = vocab
    if len(tokens) != cfg["vocab_size"]:
        raise ValueError(f"{len(tokens)} tokens for vocab_size {cfg['vocab_size']}")
    w.add("tokenizer.ggml.model", STRING, "llama")
    w.add("tokenizer.ggml.pre", STRING, "default")
    w.add("tokenizer.ggml.tokens", ARRAY, (STRING, tokens))
    w.add("tokenizer.ggml.scores", ARRAY, (FLOAT32, scores))
    w.add("tokenizer.ggml.token_type", ARRAY, (INT32, types))
    w.add("tokenizer.ggml.bos_token_id", UINT32, bos)
    w.add("tokenizer.ggml.eos_token_id", UINT32, eos)
    w.add("tokenizer.ggml.unknown_token_id", UINT32, unk)
    w.add("tokenizer.ggml.add_bos_token", BOOL, True)
    w.add("tokenizer.ggml.add_eos_token", BOOL, False)

    def put(gname, hf, shape, fix=None):
        ne = list(reversed(shape))

        def values():
            x = tensor(hf)
            assert list(x.shape) == shape, (hf, x.shape, shape)
            return fix(x) if fix else x
        w.add_tensor(gname, ne, storage_type(ne, typ), values)

    I, V = cfg["intermediate_size"], cfg["vocab_size"]
    put("token_embd.weight", "model.embed_tokens.weight", [V, H])
    for i in range(cfg["num_hidden_layers"]):
        p, b = f"model.layers.{i}.", f"blk.{i}."
        put(b + "attn_norm.weight", p + "input_layernorm.weight", [H])
        put(b + "attn_q.weight", p + "self_attn.q_proj.weight", [heads * head_dim, H], lambda x: permute(x, heads))
        put(b + "attn_k.weight", p + "self_attn.k_proj.weight", [kv_heads * head_dim, H],
            lambda x: permute(x, kv_heads))
        put(b + "attn_v.weight", p + "self_attn.v_proj.weight", [kv_heads * head_dim, H])
        put(b + "attn_output.weight", p + "self_attn.o_proj.weight", [H, heads * head_dim])
        put(b + "ffn_norm.weight", p + "post_attention_layernorm.weight", [H])
        put(b + "ffn_gate.weight", p + "mlp.gate_proj.weight", [I, H])
        put(b + "ffn_up.weight", p + "mlp.up_proj.weight", [I, H])
        put(b + "ffn_down.weight", p + "mlp.down_proj.weight", [H, I])
    put("output_norm.weight", "model.norm.weight", [H])
    if not cfg.get("tie_word_embeddings", False):
        put("output.weight", "lm_head.weight", [V, H])
    return w


# ---------------------------------------------------------------------------
# Tokenizers


def varint(b, i):
    r, s = 0, 0
    while True:
        c = b[i]
        i += 1
        r |= (c & 0x7F) << s
        s += 7
        if c < 0x80:
            return r, i


def proto_fields(b):
    """(field number, value) of each field of a protobuf message: an int for
    varints, bytes otherwise."""
    i = 0
    while i < len(b):
        tag, i = varint(b, i)
        num, wt = tag >> 3, tag & 7
        if wt == 0:
            v, i = varint(b, i)
        elif wt == 1:
            v, i = b[i:i + 8], i + 8
        elif wt == 5:
            v, i = b[i:i + 4], i + 4
        elif wt == 2:
            n, i = varint(b, i)
            v, i = b[i:i + n], i + n
        else:
            raise ValueError(f"protobuf wire type {wt}")
        yield num, v


def sentencepiece_vocab(path):
    """(tokens, scores, types, bos, eos, unk) of a SentencePiece
    tokenizer.model (ModelProto.pieces: piece 1, score 2, type 3)."""
    with open(path, "rb") as f:
        data = f.read()
    tokens, scores, types = [], [], []
    for num, v in proto_fields(data):
        if num != 1:
            continue
        piece, score, typ = "", 0.0, NORMAL
        for n2, v2 in proto_fields(v):
            if n2 == 1:
                piece = v2.decode("utf-8")
            elif n2 == 2:
                (score,) = struct.unpack("<f", v2)
            elif n2 == 3:
                typ = v2
        tokens.append(piece)
        scores.append(score)
        types.append(typ)
    return tokens, scores, types, tokens.index("<s>"), tokens.index("</s>"), types.index(UNKNOWN)


def hf_llama_vocab(path):
    """(tokens, scores, types, bos, eos, unk) of a Llama tokenizer.json
    (byte-fallback BPE), with SentencePiece's BPE scores (see the
    docstring)."""
    with open(path, encoding="utf-8") as f:
        d = json.load(f)
    model = d["model"]
    vocab = model["vocab"]
    tokens = [None] * len(vocab)
    for t, i in vocab.items():
        tokens[i] = t
    special = {a["id"] for a in d.get("added_tokens", []) if a.get("special")}
    unk = vocab[model["unk_token"]]
    types = []
    for i, t in enumerate(tokens):
        if i == unk:
            types.append(UNKNOWN)
        elif i in special:
            types.append(CONTROL)
        elif model.get("byte_fallback") and len(t) == 6 and t.startswith("<0x") and t.endswith(">"):
            types.append(BYTE)
        else:
            types.append(NORMAL)
    first = types.index(NORMAL)
    rank = {}
    for r, m in enumerate(model["merges"]):
        a, b = m.split(" ", 1) if isinstance(m, str) else m
        rank.setdefault(vocab[a + b], r)
    merged = [rank[i] for i in range(len(tokens)) if types[i] == NORMAL and i in rank]
    by_id = all(x < y for x, y in zip(merged, merged[1:]))
    scores = []
    for i, typ in enumerate(types):
        if typ != NORMAL:
            scores.append(0.0)
        elif by_id:
            scores.append(-float(i - first))
        elif i in rank:
            scores.append(-float(rank[i]))
        else:
            scores.append(-float(len(model["merges"]) + i - first))
    return tokens, scores, types, vocab["<s>"], vocab["</s>"], unk


# ---------------------------------------------------------------------------
# The two models


def tiny_file(typ, alignment):
    from bert import parse_safetensors
    with open(os.path.join(REPO, TINY_DIR, "config.json")) as f:
        cfg = json.load(f)
    with open(os.path.join(REPO, TINY_DIR, "model.safetensors"), "rb") as f:
        _, sd = parse_safetensors(f.read())
    vocab = sentencepiece_vocab(os.path.join(REPO, TINY_DIR, "tokenizer.model"))
    return llama_file(cfg, "zbench llama-tiny", lambda n: sd[n].numpy(), vocab, typ, alignment)


def tinyllama_file(typ, alignment):
    from llama import TINYLLAMA_CONFIG, synthetic_tensor
    ref = os.environ.get("ZBENCH_TOKENIZER_REF") or os.path.join(REPO, ".cache", "tokenizer-ref")
    path = os.path.join(ref, "llama2", "tokenizer.json")
    if not os.path.exists(path):
        raise SystemExit(f"gguf.py: no {path}: run scripts/install-tokenizer-ref.sh")
    vocab = hf_llama_vocab(path)
    cfg = dict(TINYLLAMA_CONFIG)
    shapes = llama_shapes(cfg)
    name = f"TinyLlama-1.1B synthetic seed {TINYLLAMA_SEED}"
    return llama_file(cfg, name, lambda n: synthetic_tensor(n, TINYLLAMA_SEED, shapes[n]).numpy(), vocab, typ,
                      alignment)


def llama_shapes(cfg):
    """{HF name: shape} of a Llama config dict's parameters."""
    H, I, V = cfg["hidden_size"], cfg["intermediate_size"], cfg["vocab_size"]
    heads = cfg["num_attention_heads"]
    kv = cfg.get("num_key_value_heads") or heads
    D = cfg.get("head_dim") or H // heads
    s = {"model.embed_tokens.weight": [V, H], "model.norm.weight": [H], "lm_head.weight": [V, H]}
    for i in range(cfg["num_hidden_layers"]):
        p = f"model.layers.{i}."
        s.update({p + "input_layernorm.weight": [H], p + "post_attention_layernorm.weight": [H],
                  p + "self_attn.q_proj.weight": [heads * D, H], p + "self_attn.k_proj.weight": [kv * D, H],
                  p + "self_attn.v_proj.weight": [kv * D, H], p + "self_attn.o_proj.weight": [H, heads * D],
                  p + "mlp.gate_proj.weight": [I, H], p + "mlp.up_proj.weight": [I, H],
                  p + "mlp.down_proj.weight": [H, I]})
    return s


MODELS = {"tiny": tiny_file, "tinyllama": tinyllama_file}

GOLDENS = (("model-f32.gguf", "F32", DEFAULT_ALIGNMENT), ("model-f16.gguf", "F16", 64),
           ("model-q8_0.gguf", "Q8_0", DEFAULT_ALIGNMENT), ("model-q4_0.gguf", "Q4_0", DEFAULT_ALIGNMENT))


def build():
    """{repo-relative path: bytes} of the goldens."""
    files = {}
    for fname, typ, alignment in GOLDENS:
        buf = io.BytesIO()
        tiny_file(typ, alignment).write(buf)
        files[f"{GOLDEN_DIR}/{fname}"] = buf.getvalue()
    return files


def synth(argv):
    ap = argparse.ArgumentParser(prog="gguf.py synth", description="write a model as a GGUF file")
    ap.add_argument("--model", required=True, choices=sorted(MODELS))
    ap.add_argument("--type", required=True, choices=sorted(GGML_TYPES))
    ap.add_argument("--out", required=True, help="the .gguf file to write")
    ap.add_argument("--alignment", type=int, default=DEFAULT_ALIGNMENT,
                    help="general.alignment: a power of two (default 32, not written)")
    args = ap.parse_args(argv)
    if args.alignment <= 0 or args.alignment & (args.alignment - 1):
        ap.error(f"--alignment {args.alignment} is not a power of two")
    w = MODELS[args.model](args.type, args.alignment)
    tmp = args.out + ".tmp"
    with open(tmp, "wb") as f:
        w.write(f)
    os.replace(tmp, args.out)
    print(f"wrote {args.out}: {os.path.getsize(args.out)} bytes")
    return 0


def main():
    if len(sys.argv) > 1 and sys.argv[1] == "synth":
        return synth(sys.argv[2:])
    return golden_files.main(__doc__, build, REPO, SCRIPT)


if __name__ == "__main__":
    sys.exit(main())
