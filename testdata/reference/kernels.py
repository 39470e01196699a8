#!/usr/bin/env python3
"""Independent PyTorch reference for the operations of zbench's kernels.Ops,
kernels.Decoder and kernels.Vision.

Writes testdata/golden/kernels.safetensors, which bench_test/golden_test.go
checks every backend against, testdata/golden/decoder.safetensors, which
bench_test/decoder_golden_test.go checks every backend that implements
kernels.Decoder against, and testdata/golden/vision.safetensors, for the
backends that implement kernels.Vision. The semantics follow the
documentation in kernels/ops.go, kernels/decoder.go and kernels/vision.go;
nothing here is derived from the Go implementations.

Layout of kernels.safetensors:

  tensors   "<case>/<role>": inputs (a, b, c, bias, x, gamma, beta, q, k, v,
            ids, table, logits, targets, keylens, dy, mean, rstd, y, param,
            grad, m, v) stored in the case's dtype (F32, F16 or BF16, and I32
            for swap_axes; ids, targets and keylens I32; mean and rstd F32),
            and expected outputs (out, mean, rstd, dx, dgamma, dbeta, dq, dk,
            dv, dtable, loss, dlogits, param_out, m_out, v_out) stored F32.
            The expected outputs are computed in float64 from the exact
            (rounded) inputs that the file holds.
  metadata  "<case>": the case's parameters as compact JSON, always with "op"
            and "dtype" (f32, f16, bf16; i32 for swap_axes); plus "reference"
            (torch version), "script", "seed" and "format". Parameters by op:
              matmul              trans_a, trans_b, alpha, beta (role c, the
                                  initial out, iff beta != 0), bias (role
                                  bias iff true), act
              scale               s
              act, act_backward   act (relu, gelu, gelu_tanh, silu, tanh)
              layernorm           eps, has_beta (role beta iff true)
              layernorm_backward  eps (mean and rstd are inputs)
              rmsnorm             eps
              softmax, attention, attention_backward
                                  scale (0: 1 for softmax, 1/sqrt(D) for
                                  attention), causal, keylens (role keylens
                                  iff true)
              cross_entropy_backward  scale
              adamw               lr, beta1, beta2, eps, weight_decay, step
                                  (torch.optim.AdamW; param, m and v are the
                                  state before the update, param_out, m_out
                                  and v_out after it)
              add, sumrows, softmax_backward, embedding,
              embedding_backward, cross_entropy, swap_axes   none

Layout of decoder.safetensors (the same format, its own seed):

  tensors   "<case>/<role>": float inputs in the case's dtype (F32, F16 or
            BF16), inv_freq F32 whatever the dtype, pos, start, lens I32;
            float expected outputs F32 computed in float64 from the stored
            inputs, argmax's out I32.
  metadata  "<case>": compact JSON with "op" and "dtype", plus "reference",
            "script", "seed" and "format". By op:
              rope              x [B, S, H, D], pos I32 [B, S], inv_freq F32
                                [D/2] -> out [B, S, H, D] (x after the
                                in-place op): HF's q·cos + rotate_half(q)·sin
                                with cos and sin of the float32 angle
                                float32(pos)·inv_freq (in float64 from
                                there), emb = cat(angles, angles);
                                parameters rope_theta and rope_scaling (null,
                                linear or llama3 as in an HF config: how
                                llama.py's LlamaConfig.inv_freq made
                                inv_freq; the op reads only the tensor)
              swiglu            gate, up -> out = silu(gate)·up
              cache_write       cache [B, H, T, D] (before), x [B, S, H, D],
                                start I32 [B] -> out [B, H, T, D] (the cache
                                after: cache[b, h, start[b]+s] = x[b, s, h];
                                exact)
              cached_attention  q [B, Hq, Sq, D], k and v [B, Hkv, T, D],
                                lens I32 [B] -> out [B, Hq, Sq, D];
                                parameter scale (0: 1/sqrt(D)); query s of
                                sequence b at position lens[b] − Sq + s sees
                                keys 0 … its position, query head h reads KV
                                head h // (Hq/Hkv); positions from lens[b] on
                                hold large garbage that must not be read
              argmax            x [rows…, V] -> out I32 [rows…]: torch.argmax
                                (the first maximum on ties, the first NaN if
                                any; exact)

Layout of vision.safetensors (the same format, its own seed). Tensors stay
in torch's layout, images NCHW (kernels.Vision works in NHWC: a reader
transposes): float inputs in the case's dtype (F32, F16 or BF16), expected
outputs F32 computed in float64 from the stored inputs.

  tensors   "<case>/<role>" by op:
              conv2d            x [N, Ci, H, W], w [Co, Ci/G, Kh, Kw] (torch's
                                filter layout), bias [Co] (optional),
                                residual [N, Co, Ho, Wo] (optional) -> out
                                [N, Co, Ho, Wo] = act(conv2d(x, w, stride,
                                padding, dilation, groups) + bias +
                                residual): torch.nn.functional.conv2d, zero
                                padding, Ho = ⌊(H + 2·ph − dh·(Kh−1) − 1)/sh⌋
                                + 1 (Wo likewise); bias and residual take
                                part iff their role is in the file
              max_pool2d        x [N, C, H, W] -> out [N, C, Ho, Wo]:
                                torch.nn.functional.max_pool2d (floor
                                rounding; padding never wins); one case,
                                max_pool2d_f32_nan_inf, holds NaN and ±inf
                                in x and NaN and ±inf in out
              global_avg_pool   x [N, C, H, W] -> out [N, C]: the mean over H
                                and W (adaptive_avg_pool2d to 1×1, flattened)
  metadata  "<case>": compact JSON with "op" and "dtype", plus "reference",
            "script", "seed" and "format". By op:
              conv2d            stride [sh, sw], padding [ph, pw], dilation
                                [dh, dw], groups, act (none, relu, gelu as
                                kernels.Activation)
              max_pool2d        kernel [kh, kw], stride, padding, dilation;
                                "nan" (the NaN case only): what torch 1.13
                                does, which its out holds — a window holding
                                a NaN gives NaN wherever the NaN is in it, +inf
                                beats numbers, a window of −inf values gives
                                −inf (padding aside)
              global_avg_pool   none

The files are written in the safetensors format by safetensors_file.py here
(the python safetensors package is not needed), with the reference
implementation's layout: tensors ordered by decreasing dtype alignment then
name, "__metadata__" first, header padded with spaces to 8 bytes. The
decoder cases, then the vision cases, are built after, and each from a seed
apart from, the kernels cases, which they leave byte for byte as they were.

Deterministic: a fixed seed, one thread, deterministic algorithms.
Requires torch (1.13 tested, CPU only) and numpy. Run from anywhere:

  /usr/bin/python3 testdata/reference/kernels.py            # write the goldens
  /usr/bin/python3 testdata/reference/kernels.py --check    # verify they are current
"""

import argparse
import json
import math
import os
import sys

import numpy as np
import torch
import torch.nn.functional as F

from llama import LlamaConfig
from golden_files import is_current, write_file
from safetensors_file import entry, serialize

SEED = 20240611
DECODER_SEED = 20261125
VISION_SEED = 20261202
SCRIPT = "testdata/reference/kernels.py"
FORMAT = "zbench-golden/1: tensors <case>/<role>, metadata <case> = JSON params"
REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DEFAULT_OUT = os.path.join(REPO, "testdata", "golden", "kernels.safetensors")
DEFAULT_DECODER_OUT = os.path.join(REPO, "testdata", "golden", "decoder.safetensors")
DEFAULT_VISION_OUT = os.path.join(REPO, "testdata", "golden", "vision.safetensors")

DTYPES = {"f32": torch.float32, "f16": torch.float16, "bf16": torch.bfloat16}
ACTS = ["relu", "gelu", "gelu_tanh", "silu", "tanh"]
IGNORE_INDEX = -100


def act_fn(name, x):
    """The activations of kernels.Activation, in float64."""
    if name == "none":
        return x
    if name == "relu":
        return F.relu(x)
    if name == "gelu":
        return F.gelu(x)  # exact, with erf
    if name == "gelu_tanh":
        return F.gelu(x, approximate="tanh")
    if name == "silu":
        return F.silu(x)
    if name == "tanh":
        return torch.tanh(x)
    raise ValueError(name)


class Golden:
    """Collects cases and writes them as one safetensors file."""

    def __init__(self, seed=SEED):
        self.seed = seed
        self.tensors = {}  # name -> (st dtype, shape, bytes)
        self.params = {}  # case -> params dict

    def _put(self, name, t):
        assert name not in self.tensors, name
        self.tensors[name] = entry(name, t)

    def case(self, name, params, inputs, outputs, finite=True):
        """Adds a case. inputs are stored as given (already rounded to their
        storage dtype); outputs (float64) are stored as F32, int32 outputs
        (indices) as they are. Float outputs must be finite unless finite
        is False (a case about NaN and infinities)."""
        assert name not in self.params, name
        assert "/" not in name and "op" in params and "dtype" in params, name
        self.params[name] = params
        for role, t in inputs.items():
            self._put(f"{name}/{role}", t)
        for role, t in outputs.items():
            if t.dtype == torch.int32:
                self._put(f"{name}/{role}", t)
                continue
            assert t.dtype == torch.float64, (name, role, t.dtype)
            assert not finite or torch.isfinite(t).all(), (name, role)
            self._put(f"{name}/{role}", t.to(torch.float32))

    def serialize(self):
        meta = {
            "reference": f"torch {torch.__version__}",
            "script": SCRIPT,
            "seed": str(self.seed),
            "format": FORMAT,
        }
        for name, p in self.params.items():
            meta[name] = json.dumps(p, sort_keys=True, separators=(",", ":"))
        return serialize(self.tensors, meta)


# ---------------------------------------------------------------------------
# Inputs


def randn(shape, dtype, scale=1.0, shift=0.0):
    """Normal values rounded to dtype: what the file stores and the
    reference computes from."""
    return (torch.randn(shape, dtype=torch.float32) * scale + shift).to(dtype)


def d64(t):
    return t.to(torch.float64)


def i32(values):
    return torch.tensor(values, dtype=torch.int32)


def f32(v):
    """v rounded to float32, as a Go float32 parameter holds it."""
    return float(np.float32(v))


# ---------------------------------------------------------------------------
# Reference semantics, float64


def matmul_ref(a, b, c, bias, p):
    A = a.transpose(-1, -2) if p["trans_a"] else a
    B = b.transpose(-1, -2) if p["trans_b"] else b
    r = p["alpha"] * torch.matmul(A, B)
    if p["beta"] != 0:
        r = r + p["beta"] * c
    if bias is not None:
        r = r + bias
    return act_fn(p["act"], r)


def allowed_mask(x_shape, causal, keylens):
    """Boolean mask broadcastable to x [B, ..., Sq, Sk]: True where query i
    may attend key j (kernels.AttentionParams)."""
    B, Sq, Sk = x_shape[0], x_shape[-2], x_shape[-1]
    i = torch.arange(Sq).view(Sq, 1)
    j = torch.arange(Sk).view(1, Sk)
    m = torch.ones(B, Sq, Sk, dtype=torch.bool)
    if causal:
        m = m & (j <= i + (Sk - Sq)).unsqueeze(0)  # bottom-right aligned
    if keylens is not None:
        m = m & (j.unsqueeze(0) < keylens.to(torch.int64).view(B, 1, 1))
    return m.view([B] + [1] * (len(x_shape) - 3) + [Sq, Sk])


def masked_softmax(s, allowed):
    """Softmax over the last axis where allowed; rows with nothing allowed
    give zeros (and zero gradients, no NaN)."""
    if allowed is None:
        return torch.softmax(s, -1)
    allowed = allowed.expand(s.shape)
    live = allowed.any(-1, keepdim=True)
    s = s.masked_fill(~allowed, float("-inf"))
    s = torch.where(live, s, torch.zeros_like(s))
    return torch.softmax(s, -1) * live


def attention_ref(q, k, v, p, keylens):
    Hq, Hkv, D = q.shape[1], k.shape[1], q.shape[-1]
    g = Hq // Hkv
    k = k.repeat_interleave(g, dim=1)  # query head h reads KV head h // g
    v = v.repeat_interleave(g, dim=1)
    scale = p["scale"] if p["scale"] != 0 else 1 / math.sqrt(D)
    s = scale * torch.matmul(q, k.transpose(-1, -2))
    allowed = None
    if p["causal"] or keylens is not None:
        allowed = allowed_mask(s.shape, p["causal"], keylens)
    return torch.matmul(masked_softmax(s, allowed), v)


# ---------------------------------------------------------------------------
# Cases


def matmul_cases(g):
    def add(name, dtype, M, K, N, batch=(), trans_a=False, trans_b=False, alpha=1.0, beta=0.0,
            bias=False, act="none", shared_b=False):
        dt = DTYPES[dtype]
        p = {"op": "matmul", "dtype": dtype, "trans_a": trans_a, "trans_b": trans_b,
             "alpha": alpha, "beta": beta, "bias": bias, "act": act}
        batch = list(batch)
        a = randn(batch + ([K, M] if trans_a else [M, K]), dt)
        bshape = [N, K] if trans_b else [K, N]
        b = randn(bshape if shared_b else batch + bshape, dt, scale=0.5)
        inputs = {"a": a, "b": b}
        c = bb = None
        if beta != 0:
            c = inputs["c"] = randn(batch + [M, N], dt)
        if bias:
            bb = inputs["bias"] = randn([N], dt)
        out = matmul_ref(d64(a), d64(b), None if c is None else d64(c), None if bb is None else d64(bb), p)
        g.case(name, p, inputs, {"out": out})

    add("matmul_f32_plain", "f32", 17, 31, 9)
    add("matmul_f32_trans_a", "f32", 17, 31, 9, trans_a=True)
    add("matmul_f32_trans_b", "f32", 17, 31, 9, trans_b=True)
    add("matmul_f32_trans_ab", "f32", 5, 19, 11, trans_a=True, trans_b=True)
    add("matmul_f32_alpha", "f32", 13, 29, 7, alpha=-0.75)
    add("matmul_f32_alpha_beta", "f32", 13, 29, 7, alpha=0.5, beta=-1.25)
    add("matmul_f32_beta_one", "f32", 6, 33, 10, trans_b=True, beta=1.0)
    add("matmul_f32_bias", "f32", 17, 31, 9, bias=True)
    add("matmul_f32_bias_relu", "f32", 17, 31, 9, bias=True, act="relu")
    add("matmul_f32_bias_gelu", "f32", 17, 31, 9, trans_b=True, bias=True, act="gelu")
    add("matmul_f32_gelu_tanh", "f32", 9, 23, 15, act="gelu_tanh")
    add("matmul_f32_silu", "f32", 9, 23, 15, bias=True, act="silu")
    add("matmul_f32_all", "f32", 7, 18, 5, trans_b=True, alpha=0.25, beta=0.5, bias=True, act="gelu")
    add("matmul_f32_batched", "f32", 17, 31, 9, batch=[3])
    add("matmul_f32_batched_trans", "f32", 5, 12, 7, batch=[2], trans_a=True, trans_b=True, beta=2.0)
    add("matmul_f32_batched_4d", "f32", 5, 7, 4, batch=[2, 3], trans_b=True, bias=True)
    add("matmul_f32_shared_b", "f32", 17, 31, 9, batch=[3], shared_b=True)
    add("matmul_f32_linear", "f32", 5, 31, 9, batch=[2, 3], trans_b=True, shared_b=True, bias=True, act="gelu_tanh")
    add("matmul_f32_gemv", "f32", 1, 67, 1)
    add("matmul_f32_m1", "f32", 1, 40, 17, trans_b=True, bias=True)
    add("matmul_f32_pooler_tanh", "f32", 3, 48, 48, trans_b=True, bias=True, act="tanh")
    for dt in ("f16", "bf16"):
        add(f"matmul_{dt}_plain", dt, 17, 31, 9)
        add(f"matmul_{dt}_trans_b_bias_gelu", dt, 17, 31, 9, trans_b=True, bias=True, act="gelu")
        add(f"matmul_{dt}_batched_beta", dt, 6, 20, 11, batch=[2], alpha=0.5, beta=-1.0)
        add(f"matmul_{dt}_linear", dt, 3, 40, 8, batch=[2], trans_b=True, shared_b=True, bias=True, act="silu")
        add(f"matmul_{dt}_pooler_tanh", dt, 2, 32, 32, trans_b=True, bias=True, act="tanh")


def elementwise_cases(g):
    for name, bshape in (("same", [4, 7, 13]), ("bcast_row", [13]), ("bcast_suffix", [7, 13])):
        a, b = randn([4, 7, 13], torch.float32), randn(bshape, torch.float32)
        g.case(f"add_f32_{name}", {"op": "add", "dtype": "f32"}, {"a": a, "b": b}, {"out": d64(a) + d64(b)})
    a, b = randn([3, 37], torch.float16), randn([37], torch.float16)
    g.case("add_f16_bcast_row", {"op": "add", "dtype": "f16"}, {"a": a, "b": b}, {"out": d64(a) + d64(b)})

    x = randn([5, 31], torch.float32)
    g.case("scale_f32", {"op": "scale", "dtype": "f32", "s": -0.375}, {"x": x}, {"out": -0.375 * d64(x)})

    for act in ACTS:
        x = randn([3, 37], torch.float32, scale=2.0)
        g.case(f"act_f32_{act}", {"op": "act", "dtype": "f32", "act": act}, {"x": x}, {"out": act_fn(act, d64(x))})
    for dt in ("f16", "bf16"):
        for act in ("gelu", "gelu_tanh", "tanh"):
            x = randn([5, 29], DTYPES[dt], scale=2.0)
            g.case(f"act_{dt}_{act}", {"op": "act", "dtype": dt, "act": act}, {"x": x}, {"out": act_fn(act, d64(x))})

    for act in ACTS:
        x, dy = randn([4, 19], torch.float32, scale=2.0), randn([4, 19], torch.float32)
        xg = d64(x).requires_grad_()
        act_fn(act, xg).backward(d64(dy))
        g.case(f"act_backward_f32_{act}", {"op": "act_backward", "dtype": "f32", "act": act},
               {"dy": dy, "x": x}, {"dx": xg.grad})

    for name, shape in (("3d", [3, 5, 17]), ("2d", [31, 9]), ("1row", [1, 23])):
        x = randn(shape, torch.float32)
        g.case(f"sumrows_f32_{name}", {"op": "sumrows", "dtype": "f32"}, {"x": x},
               {"out": d64(x).reshape(-1, shape[-1]).sum(0)})


def norm_cases(g):
    def layernorm(name, dtype, shape, eps, beta=True, shift=0.0):
        dt = DTYPES[dtype]
        D = shape[-1]
        x = randn(shape, dt, shift=shift)
        gamma = randn([D], dt, scale=0.5, shift=1.0)
        inputs = {"x": x, "gamma": gamma}
        b64 = None
        if beta:
            inputs["beta"] = randn([D], dt, scale=0.5)
            b64 = d64(inputs["beta"])
        x64 = d64(x)
        out = F.layer_norm(x64, (D,), d64(gamma), b64, eps)
        mean = x64.mean(-1).reshape(-1)
        rstd = (x64.var(-1, unbiased=False) + eps).rsqrt().reshape(-1)
        g.case(name, {"op": "layernorm", "dtype": dtype, "eps": eps, "has_beta": beta}, inputs,
               {"out": out, "mean": mean, "rstd": rstd})

    layernorm("layernorm_f32", "f32", [2, 3, 17], 1e-5)
    layernorm("layernorm_f32_nobeta", "f32", [5, 31], 1e-6, beta=False)
    layernorm("layernorm_f32_shifted", "f32", [4, 64], 1e-5, shift=3.0)
    layernorm("layernorm_f32_1row", "f32", [1, 7], 1e-5)
    layernorm("layernorm_f16", "f16", [4, 33], 1e-5)
    layernorm("layernorm_bf16", "bf16", [4, 33], 1e-5)

    def layernorm_backward(name, shape, eps):
        D = shape[-1]
        x, gamma = randn(shape, torch.float32), randn([D], torch.float32, scale=0.5, shift=1.0)
        beta, dy = randn([D], torch.float32), randn(shape, torch.float32)
        x64, g64, b64 = d64(x).requires_grad_(), d64(gamma).requires_grad_(), d64(beta).requires_grad_()
        F.layer_norm(x64, (D,), g64, b64, eps).backward(d64(dy))
        with torch.no_grad():
            mean = d64(x).mean(-1).reshape(-1)
            rstd = (d64(x).var(-1, unbiased=False) + eps).rsqrt().reshape(-1)
        g.case(name, {"op": "layernorm_backward", "dtype": "f32", "eps": eps},
               {"dy": dy, "x": x, "gamma": gamma, "mean": mean.float(), "rstd": rstd.float()},
               {"dx": x64.grad, "dgamma": g64.grad, "dbeta": b64.grad})

    layernorm_backward("layernorm_backward_f32", [6, 17], 1e-5)
    layernorm_backward("layernorm_backward_f32_3d", [2, 3, 31], 1e-5)

    for name, shape, eps in (("rmsnorm_f32", [3, 5, 17], 1e-6), ("rmsnorm_f32_wide", [2, 96], 1e-5)):
        x, gamma = randn(shape, torch.float32), randn([shape[-1]], torch.float32, scale=0.5, shift=1.0)
        x64 = d64(x)
        out = x64 * (x64.pow(2).mean(-1, keepdim=True) + eps).rsqrt() * d64(gamma)
        g.case(name, {"op": "rmsnorm", "dtype": "f32", "eps": eps}, {"x": x, "gamma": gamma}, {"out": out})
    x, gamma = randn([3, 40], torch.bfloat16), randn([40], torch.bfloat16, scale=0.5, shift=1.0)
    x64 = d64(x)
    g.case("rmsnorm_bf16", {"op": "rmsnorm", "dtype": "bf16", "eps": 1e-6}, {"x": x, "gamma": gamma},
           {"out": x64 * (x64.pow(2).mean(-1, keepdim=True) + 1e-6).rsqrt() * d64(gamma)})


def softmax_cases(g):
    def softmax(name, dtype, shape, scale=0.0, causal=False, keylens=None, xscale=1.0):
        x = randn(shape, DTYPES[dtype], scale=xscale)
        p = {"op": "softmax", "dtype": dtype, "scale": scale, "causal": causal, "keylens": keylens is not None}
        inputs = {"x": x}
        allowed = None
        if keylens is not None:
            inputs["keylens"] = i32(keylens)
        if causal or keylens is not None:
            allowed = allowed_mask(list(shape), causal, None if keylens is None else inputs["keylens"])
        s = d64(x) * (scale if scale != 0 else 1.0)  # 0 means 1 for Softmax
        g.case(name, p, inputs, {"out": masked_softmax(s, allowed)})

    softmax("softmax_f32", "f32", [7, 31])
    softmax("softmax_f32_scale", "f32", [3, 17], scale=0.125)
    softmax("softmax_f32_large", "f32", [4, 33], xscale=40.0)  # exp overflows without the max
    softmax("softmax_f32_1col", "f32", [5, 1])
    softmax("softmax_f32_causal", "f32", [2, 3, 9, 9], causal=True)
    softmax("softmax_f32_causal_decode", "f32", [2, 2, 3, 11], causal=True, scale=0.5)
    softmax("softmax_f32_keylens", "f32", [3, 2, 5, 13], keylens=[13, 4, 1])
    softmax("softmax_f32_causal_keylens", "f32", [2, 1, 6, 6], causal=True, keylens=[3, 0])
    for dt in ("f16", "bf16"):
        softmax(f"softmax_{dt}", dt, [5, 37], xscale=3.0)
        softmax(f"softmax_{dt}_causal", dt, [1, 2, 7, 7], causal=True, scale=0.25)

    for name, shape in (("softmax_backward_f32", [6, 29]), ("softmax_backward_f32_4d", [2, 3, 4, 9])):
        y = torch.softmax(randn(shape, torch.float32, scale=2.0), -1)
        dy = randn(shape, torch.float32)
        dx = torch._softmax_backward_data(d64(dy), d64(y), -1, torch.float64)
        g.case(name, {"op": "softmax_backward", "dtype": "f32"}, {"dy": dy, "y": y}, {"dx": dx})


def attention_cases(g):
    def attention(name, dtype, B, Hq, Hkv, Sq, Sk, D, scale=0.0, causal=False, keylens=None, backward=False):
        dt = DTYPES[dtype]
        q, k, v = randn([B, Hq, Sq, D], dt), randn([B, Hkv, Sk, D], dt), randn([B, Hkv, Sk, D], dt)
        p = {"op": "attention_backward" if backward else "attention", "dtype": dtype,
             "scale": scale, "causal": causal, "keylens": keylens is not None}
        inputs = {"q": q, "k": k, "v": v}
        kl = None
        if keylens is not None:
            kl = inputs["keylens"] = i32(keylens)
        if not backward:
            g.case(name, p, inputs, {"out": attention_ref(d64(q), d64(k), d64(v), p, kl)})
            return
        dy = inputs["dy"] = randn([B, Hq, Sq, D], dt)
        q64, k64, v64 = (d64(t).requires_grad_() for t in (q, k, v))
        attention_ref(q64, k64, v64, p, kl).backward(d64(dy))
        g.case(name, p, inputs, {"dq": q64.grad, "dk": k64.grad, "dv": v64.grad})

    attention("attention_f32_mha", "f32", 2, 3, 3, 7, 7, 16)
    attention("attention_f32_gqa_causal", "f32", 1, 4, 2, 9, 9, 8, causal=True)
    attention("attention_f32_causal_scale", "f32", 2, 2, 2, 11, 11, 12, scale=0.3, causal=True)
    attention("attention_f32_decode", "f32", 2, 4, 2, 1, 13, 16, causal=True)
    attention("attention_f32_decode_chunk", "f32", 1, 2, 1, 3, 10, 8, causal=True)
    attention("attention_f32_cross", "f32", 1, 2, 2, 5, 17, 8)
    attention("attention_f32_keylens", "f32", 3, 2, 2, 9, 9, 8, keylens=[9, 5, 0])
    attention("attention_f32_causal_keylens", "f32", 2, 4, 2, 6, 6, 8, causal=True, keylens=[6, 3])
    attention("attention_f32_decode_keylens", "f32", 2, 2, 1, 1, 12, 16, causal=True, keylens=[12, 7])
    for dt in ("f16", "bf16"):
        attention(f"attention_{dt}_gqa_causal", dt, 2, 4, 2, 8, 8, 16, causal=True)
        attention(f"attention_{dt}_decode", dt, 1, 4, 2, 1, 19, 32, causal=True)

    attention("attention_backward_f32_mha", "f32", 1, 2, 2, 7, 7, 8, causal=True, backward=True)
    attention("attention_backward_f32_plain", "f32", 2, 2, 2, 5, 6, 8, backward=True)
    attention("attention_backward_f32_gqa", "f32", 2, 4, 2, 5, 5, 8, causal=True, keylens=[5, 2], backward=True)
    attention("attention_backward_f32_decode", "f32", 1, 2, 1, 2, 9, 16, causal=True, scale=0.2, backward=True)
    attention("attention_backward_f32_keylens_zero", "f32", 2, 2, 2, 4, 4, 8, keylens=[3, 0], backward=True)


def embedding_cases(g):
    for name, V, D, ids in (
        ("embedding_f32", 11, 7, [[3, 0, 10, 3, 5], [1, 1, 9, 2, 0], [7, 4, 3, 8, 6]]),
        ("embedding_f32_1d", 5, 33, [4, 0, 2, 4]),
    ):
        table, ids = randn([V, D], torch.float32), i32(ids)
        g.case(name, {"op": "embedding", "dtype": "f32"}, {"table": table, "ids": ids},
               {"out": F.embedding(ids.long(), d64(table))})

    V, D = 10, 5
    ids = i32([[1, 3, 3, 0, 9, 1], [3, 3, 5, 0, 1, 8], [2, 3, 1, 1, 0, 9], [5, 5, 5, 2, 8, 0]])  # 4, 6, 7 unused
    dy = randn(list(ids.shape) + [D], torch.float32)
    table = torch.zeros(V, D, dtype=torch.float64, requires_grad=True)
    F.embedding(ids.long(), table).backward(d64(dy))
    g.case("embedding_backward_f32", {"op": "embedding_backward", "dtype": "f32"}, {"dy": dy, "ids": ids},
           {"dtable": table.grad})


def cross_entropy_cases(g):
    def ce(name, dtype, N, V, ignored, backward=False, scale=1.0, xscale=2.0):
        logits = randn([N, V], DTYPES[dtype], scale=xscale)
        t = torch.randint(0, V, (N,), dtype=torch.int64)
        t[ignored] = IGNORE_INDEX
        targets = t.to(torch.int32)
        x64 = d64(logits).requires_grad_()
        loss = F.cross_entropy(x64, t, reduction="none", ignore_index=IGNORE_INDEX)
        inputs = {"logits": logits, "targets": targets}
        if not backward:
            g.case(name, {"op": "cross_entropy", "dtype": dtype}, inputs, {"loss": loss.detach()})
            return
        loss.backward(torch.full_like(loss, scale))
        g.case(name, {"op": "cross_entropy_backward", "dtype": dtype, "scale": scale}, inputs,
               {"dlogits": x64.grad})

    ce("cross_entropy_f32", "f32", 6, 37, [1, 4])
    ce("cross_entropy_f32_large", "f32", 3, 50, [], xscale=30.0)
    ce("cross_entropy_bf16", "bf16", 4, 40, [2])
    ce("cross_entropy_backward_f32", "f32", 5, 23, [3], backward=True, scale=0.25)
    ce("cross_entropy_backward_f32_sum", "f32", 4, 17, [0, 2], backward=True, scale=1.0)


def layout_cases(g):
    for name, dtype, shape in (
        ("swap_axes_f32", "f32", [2, 5, 3, 4]),
        ("swap_axes_f32_heads", "f32", [2, 7, 4, 8]),  # [batch, seq, heads, hdim]
        ("swap_axes_f32_d1", "f32", [3, 2, 5, 1]),
        ("swap_axes_f16", "f16", [1, 3, 6, 5]),
        ("swap_axes_bf16", "bf16", [2, 4, 3, 6]),
    ):
        x = randn(shape, DTYPES[dtype], scale=3.0)
        g.case(name, {"op": "swap_axes", "dtype": dtype}, {"x": x}, {"out": d64(x).transpose(1, 2)})
    # I32 values of up to 2^24 in magnitude, exact in the F32 output.
    x = torch.randint(-(1 << 24), (1 << 24) + 1, (2, 3, 4, 2), dtype=torch.int32)
    g.case("swap_axes_i32", {"op": "swap_axes", "dtype": "i32"}, {"x": x}, {"out": d64(x).transpose(1, 2)})


def optim_cases(g):
    def adamw(name, shape, steps, lr, betas, eps, weight_decay):
        """Runs torch.optim.AdamW in float64 for steps updates, each with a
        new gradient, and stores the last one: the state before it (param,
        m, v, rounded to F32, the values the update is computed from) and
        its gradient as inputs, the state after it as outputs."""
        lr, beta1, beta2, eps, weight_decay = (f32(v) for v in (lr, *betas, eps, weight_decay))
        p = torch.nn.Parameter(d64(randn(shape, torch.float32)))
        opt = torch.optim.AdamW([p], lr=lr, betas=(beta1, beta2), eps=eps, weight_decay=weight_decay)
        for step in range(1, steps + 1):
            grad = randn(shape, torch.float32)
            p.grad = d64(grad)
            if step == steps:
                st = opt.state[p]
                param = p.detach().float()
                m = st["exp_avg"].float() if st else torch.zeros(shape)
                v = st["exp_avg_sq"].float() if st else torch.zeros(shape)
                with torch.no_grad():
                    p.copy_(d64(param))
                    if st:
                        st["exp_avg"].copy_(d64(m))
                        st["exp_avg_sq"].copy_(d64(v))
            opt.step()
        st = opt.state[p]
        assert int(st["step"].item()) == steps, (name, st["step"])
        params = {"op": "adamw", "dtype": "f32", "lr": lr, "beta1": beta1, "beta2": beta2, "eps": eps,
                  "weight_decay": weight_decay, "step": steps}
        g.case(name, params, {"param": param, "grad": grad, "m": m, "v": v},
               {"param_out": p.detach().clone(), "m_out": st["exp_avg"].clone(), "v_out": st["exp_avg_sq"].clone()})

    adamw("adamw_f32_step1", [5, 7], 1, 1e-3, (0.9, 0.999), 1e-8, 1e-2)  # torch's defaults
    adamw("adamw_f32_step2", [5, 7], 2, 0.1, (0.9, 0.999), 1e-8, 0.1)
    adamw("adamw_f32_step10", [2, 3, 11], 10, 0.05, (0.8, 0.99), 1e-6, 0.0)


# ---------------------------------------------------------------------------
# Decoder ops (kernels.Decoder), float64


def rotate_half(x):
    half = x.shape[-1] // 2
    return torch.cat((-x[..., half:], x[..., :half]), dim=-1)


def rope_ref(x, pos, inv_freq):
    """x [B, S, H, D] float64 rotated as HF's apply_rotary_pos_emb: the
    angles float32(pos)·inv_freq in float32, their cos and sin in float64."""
    ang = (pos.to(torch.float32)[:, :, None] * inv_freq[None, None, :]).to(torch.float64)
    emb = torch.cat((ang, ang), dim=-1)[:, :, None, :]  # [B, S, 1, D]
    return x * emb.cos() + rotate_half(x) * emb.sin()


def cached_attention_ref(q, k, v, lens, scale):
    """softmax(scale·q·kᵀ)·v of each sequence's Sq queries, the last of its
    lens[b] positions, against its first lens[b] cached keys, causal."""
    B, Hq, Sq, D = q.shape
    g = Hq // k.shape[1]
    scale = scale if scale != 0 else 1 / math.sqrt(D)
    out = torch.empty_like(q)
    for b in range(B):
        n = int(lens[b])
        kb = k[b, :, :n].repeat_interleave(g, dim=0)  # query head h reads KV head h // g
        vb = v[b, :, :n].repeat_interleave(g, dim=0)
        s = scale * torch.matmul(q[b], kb.transpose(-1, -2))  # [Hq, Sq, n]
        qpos = torch.arange(n - Sq, n).view(Sq, 1)
        s = s.masked_fill(torch.arange(n).view(1, n) > qpos, float("-inf"))
        out[b] = torch.matmul(torch.softmax(s, -1), vb)
    return out


def rope_inv_freq(D, theta, scaling):
    """inv_freq [D/2] float32 as the Llama reference computes it from an HF
    config's rope_theta and rope_scaling."""
    cfg = {"hidden_size": D, "num_attention_heads": 1, "head_dim": D, "rope_theta": theta, "rope_scaling": scaling}
    return LlamaConfig.from_dict(cfg).inv_freq()


def decoder_cases(g):
    def rope(name, dtype, pos, H, D, theta=10000.0, scaling=None):
        pos = i32(pos)
        B, S = pos.shape
        x = randn([B, S, H, D], DTYPES[dtype])
        inv = rope_inv_freq(D, theta, scaling)
        p = {"op": "rope", "dtype": dtype, "rope_theta": theta, "rope_scaling": scaling}
        g.case(name, p, {"x": x, "pos": pos, "inv_freq": inv}, {"out": rope_ref(d64(x), pos, inv)})

    llama3 = {"factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
              "original_max_position_embeddings": 32, "rope_type": "llama3"}
    llama31 = dict(llama3, original_max_position_embeddings=8192)
    # Positions as generate makes them: 0, 1, ... and 1 at left padding.
    rope("rope_f32", "f32", [[0, 1, 2, 3, 4], [1, 1, 0, 1, 2]], 3, 16)
    rope("rope_f32_long", "f32", [[127, 128, 1000, 2047]], 2, 64)  # TinyLlama's head_dim and context
    rope("rope_f32_llama3", "f32", [[0, 5, 17, 31, 64, 200], [1, 0, 1, 2, 3, 4]], 4, 24, scaling=llama3)
    rope("rope_f32_llama31", "f32", [[0, 8191, 20000]], 1, 128, theta=500000.0, scaling=llama31)
    rope("rope_f32_linear", "f32", [[0, 3, 9, 40]], 2, 8, scaling={"type": "linear", "factor": 2.0})
    for dt in ("f16", "bf16"):
        rope(f"rope_{dt}", dt, [[0, 1, 2, 3, 4, 5, 6], [1, 1, 1, 0, 1, 2, 3]], 2, 32)
        rope(f"rope_{dt}_llama3", dt, [[3, 40, 100]], 4, 24, scaling=llama3)

    for name, dt, shape in (("swiglu_f32", "f32", [3, 5, 37]), ("swiglu_f32_ffn", "f32", [2, 172]),
                            ("swiglu_f16", "f16", [4, 43]), ("swiglu_bf16", "bf16", [4, 43])):
        gate, up = randn(shape, DTYPES[dt], scale=3.0), randn(shape, DTYPES[dt])
        g.case(name, {"op": "swiglu", "dtype": dt}, {"gate": gate, "up": up},
               {"out": F.silu(d64(gate)) * d64(up)})

    def cache_write(name, dtype, B, S, H, T, D, start):
        cache, x, start = randn([B, H, T, D], DTYPES[dtype]), randn([B, S, H, D], DTYPES[dtype]), i32(start)
        out = d64(cache).clone()
        for b in range(B):
            out[b, :, int(start[b]):int(start[b]) + S] = d64(x[b]).transpose(0, 1)
        g.case(name, {"op": "cache_write", "dtype": dtype}, {"cache": cache, "x": x, "start": start}, {"out": out})

    cache_write("cache_write_f32", "f32", 2, 4, 3, 10, 8, [0, 6])  # 6 = T − S: the last slot
    cache_write("cache_write_f32_decode", "f32", 3, 1, 2, 7, 16, [6, 0, 3])
    cache_write("cache_write_f16", "f16", 2, 3, 2, 9, 8, [5, 1])
    cache_write("cache_write_bf16", "bf16", 1, 2, 4, 5, 16, [2])

    def cached_attention(name, dtype, Hq, Hkv, Sq, T, D, lens, scale=0.0):
        dt, B = DTYPES[dtype], len(lens)
        q, k, v = randn([B, Hq, Sq, D], dt), randn([B, Hkv, T, D], dt), randn([B, Hkv, T, D], dt)
        for b, n in enumerate(lens):  # garbage past each sequence's length
            k[b, :, n:] = randn([Hkv, T - n, D], dt, scale=50.0, shift=20.0)
            v[b, :, n:] = randn([Hkv, T - n, D], dt, scale=50.0, shift=-20.0)
        lens = i32(lens)
        g.case(name, {"op": "cached_attention", "dtype": dtype, "scale": scale},
               {"q": q, "k": k, "v": v, "lens": lens},
               {"out": cached_attention_ref(d64(q), d64(k), d64(v), lens, scale)})

    # Prefill (Sq > 1): an empty cache, and 5 new tokens after 4 cached.
    cached_attention("cached_attention_f32_prefill_gqa", "f32", 4, 2, 5, 12, 16, [5, 9])
    # Decode (Sq = 1) at lengths 20 (a full cache), 7 and 1.
    cached_attention("cached_attention_f32_decode_gqa", "f32", 8, 2, 1, 20, 16, [20, 7, 1])
    cached_attention("cached_attention_f32_mqa_scale", "f32", 4, 1, 3, 9, 24, [9], scale=0.3)
    cached_attention("cached_attention_f32_mha", "f32", 3, 3, 2, 6, 8, [2, 6])
    # TinyLlama's heads (32 query, 4 KV, head_dim 64) after 128 tokens.
    cached_attention("cached_attention_f32_tinyllama_decode", "f32", 32, 4, 1, 130, 64, [129])
    for dt in ("f16", "bf16"):
        cached_attention(f"cached_attention_{dt}_decode_gqa", dt, 4, 2, 1, 19, 32, [19, 11])
        cached_attention(f"cached_attention_{dt}_prefill_mqa", dt, 4, 1, 4, 10, 16, [4, 10])

    def argmax(name, dtype, x):
        x = x.to(DTYPES[dtype])
        g.case(name, {"op": "argmax", "dtype": dtype}, {"x": x}, {"out": d64(x).argmax(-1).to(torch.int32)})

    x = randn([2, 3, 37], torch.float32)
    x[0, 0, 5] = x[0, 0, 30] = 9.0  # a tie: the first
    x[0, 1, 3], x[0, 1, 7], x[0, 1, 20] = float("inf"), float("nan"), float("nan")  # NaN wins, the first
    x[0, 2, :] = float("-inf")  # all -inf: 0
    x[1, 0, :] = 0.5  # all equal: 0
    x[1, 1, 36] = 10.0  # the last
    argmax("argmax_f32", "f32", x)
    argmax("argmax_f32_vocab", "f32", randn([1, 32000], torch.float32))  # TinyLlama's vocabulary
    argmax("argmax_f16", "f16", randn([3, 129], torch.float32))
    argmax("argmax_bf16_ties", "bf16", randn([4, 300], torch.float32, scale=0.01, shift=1.0))  # ties by rounding


# ---------------------------------------------------------------------------
# Vision ops (kernels.Vision), float64, in torch's NCHW layout


def pair(v):
    return list(v) if isinstance(v, (tuple, list)) else [v, v]


def vision_cases(g):
    def conv(name, dtype, N, Ci, H, W, Co, kernel, stride=1, padding=0, dilation=1, groups=1, bias=False,
             residual=False, act="none"):
        dt = DTYPES[dtype]
        kh, kw = pair(kernel)
        p = {"op": "conv2d", "dtype": dtype, "stride": pair(stride), "padding": pair(padding),
             "dilation": pair(dilation), "groups": groups, "act": act}
        x = randn([N, Ci, H, W], dt)
        w = randn([Co, Ci // groups, kh, kw], dt, scale=1 / math.sqrt(Ci // groups * kh * kw))
        inputs = {"x": x, "w": w}
        b = None
        if bias:
            b = inputs["bias"] = randn([Co], dt, scale=0.5)
        y = F.conv2d(d64(x), d64(w), None if b is None else d64(b), p["stride"], p["padding"], p["dilation"], groups)
        if residual:
            r = inputs["residual"] = randn(list(y.shape), dt)
            y = y + d64(r)
        g.case(name, p, inputs, {"out": act_fn(act, y)})

    # ResNet's convolutions (BatchNorm folded into a bias): the stem, the
    # basic block's 3×3s, the bottleneck's 1×1s, the downsample.
    conv("conv2d_f32_stem_7x7_s2_p3_bias_relu", "f32", 2, 3, 23, 29, 16, 7, stride=2, padding=3, bias=True, act="relu")
    conv("conv2d_f32_3x3_s1_p1_bias_relu", "f32", 2, 8, 9, 11, 12, 3, padding=1, bias=True, act="relu")
    conv("conv2d_f32_3x3_s1_p1", "f32", 1, 5, 6, 7, 3, 3, padding=1)
    conv("conv2d_f32_3x3_s2_p1", "f32", 2, 8, 11, 9, 16, 3, stride=2, padding=1)
    conv("conv2d_f32_3x3_s2_p1_bias_relu_even", "f32", 1, 4, 8, 10, 8, 3, stride=2, padding=1, bias=True, act="relu")
    conv("conv2d_f32_3x3_p1_residual_relu", "f32", 2, 8, 7, 6, 8, 3, padding=1, bias=True, residual=True, act="relu")
    conv("conv2d_f32_3x3_residual_no_bias", "f32", 1, 6, 5, 5, 4, 3, padding=1, residual=True)
    conv("conv2d_f32_3x3_ci64", "f32", 1, 64, 6, 6, 16, 3, padding=1, bias=True, act="relu")  # K = 64·3·3 = 576
    conv("conv2d_f32_3x3_p1_on_1x1", "f32", 3, 16, 1, 1, 8, 3, padding=1, bias=True)  # layer4 at 32×32: the centre tap
    conv("conv2d_f32_3x3_valid", "f32", 2, 3, 6, 9, 5, 3)  # no padding
    conv("conv2d_f32_7x7_to_1x1", "f32", 2, 4, 7, 7, 6, 7, bias=True)  # the window fills the image
    conv("conv2d_f32_1x1", "f32", 2, 16, 7, 5, 24, 1)
    conv("conv2d_f32_1x1_bias", "f32", 2, 16, 7, 5, 24, 1, bias=True)
    conv("conv2d_f32_1x1_bias_relu", "f32", 1, 32, 4, 4, 8, 1, bias=True, act="relu")
    conv("conv2d_f32_1x1_residual_relu", "f32", 2, 8, 5, 6, 32, 1, bias=True, residual=True, act="relu")
    conv("conv2d_f32_1x1_s2_downsample", "f32", 2, 16, 9, 7, 32, 1, stride=2, bias=True)
    # Grouped (ResNeXt: 4 groups, Co/G ≠ Ci/G when widening), depthwise
    # (groups = channels) and depthwise with a channel multiplier of 2.
    conv("conv2d_f32_grouped_3x3_g4", "f32", 2, 16, 6, 7, 16, 3, padding=1, groups=4, bias=True, act="relu")
    conv("conv2d_f32_grouped_3x3_g4_s2_widen", "f32", 1, 16, 9, 8, 32, 3, stride=2, padding=1, groups=4)
    conv("conv2d_f32_grouped_1x1_g2", "f32", 2, 8, 3, 4, 6, 1, groups=2, bias=True)
    conv("conv2d_f32_depthwise_3x3", "f32", 2, 12, 7, 9, 12, 3, padding=1, groups=12, bias=True)
    conv("conv2d_f32_depthwise_3x3_multiplier2", "f32", 1, 6, 8, 5, 12, 3, stride=2, padding=1, groups=6)
    # Dilation, non-square kernels, strides and padding.
    conv("conv2d_f32_3x3_dilation2_p2", "f32", 2, 6, 9, 10, 7, 3, padding=2, dilation=2, bias=True)
    conv("conv2d_f32_3x3_dilation2_p0", "f32", 1, 4, 8, 7, 5, 3, dilation=2)
    conv("conv2d_f32_k3x5_s2x1_p1x2", "f32", 2, 5, 9, 8, 6, (3, 5), stride=(2, 1), padding=(1, 2), bias=True)
    conv("conv2d_f32_k5x2_s1x3_p2x0_d1x2", "f32", 1, 3, 7, 13, 4, (5, 2), stride=(1, 3), padding=(2, 0),
         dilation=(1, 2), residual=True, act="relu")
    conv("conv2d_f32_3x3_p1_bias_gelu", "f32", 2, 6, 5, 7, 9, 3, padding=1, bias=True, act="gelu")
    for dt in ("f16", "bf16"):
        conv(f"conv2d_{dt}_stem_7x7_s2_p3_bias_relu", dt, 1, 3, 23, 29, 16, 7, stride=2, padding=3, bias=True,
             act="relu")
        conv(f"conv2d_{dt}_3x3_p1_residual_relu", dt, 2, 16, 6, 5, 16, 3, padding=1, bias=True, residual=True,
             act="relu")
        conv(f"conv2d_{dt}_grouped_3x3_g4_s2", dt, 1, 16, 7, 7, 16, 3, stride=2, padding=1, groups=4, bias=True)
        conv(f"conv2d_{dt}_1x1_s2_downsample", dt, 2, 16, 7, 9, 32, 1, stride=2, bias=True)

    def max_pool(name, dtype, x, kernel, stride, padding=0, dilation=1, nan=None):
        p = {"op": "max_pool2d", "dtype": dtype, "kernel": pair(kernel), "stride": pair(stride),
             "padding": pair(padding), "dilation": pair(dilation)}
        if nan is not None:
            p["nan"] = nan
        out = F.max_pool2d(d64(x), p["kernel"], p["stride"], p["padding"], p["dilation"])
        g.case(name, p, {"x": x}, {"out": out}, finite=bool(torch.isfinite(x).all()))

    # ResNet's, on the output shape of the stem case above (12×15).
    max_pool("max_pool2d_f32_3x3_s2_p1", "f32", randn([2, 8, 12, 15], torch.float32), 3, 2, 1)
    max_pool("max_pool2d_f32_3x3_s2_p1_odd", "f32", randn([1, 5, 11, 9], torch.float32), 3, 2, 1)
    # All negative: the padding (−inf, never zero) must not win.
    max_pool("max_pool2d_f32_3x3_s2_p1_negative", "f32", randn([2, 3, 6, 7], torch.float32, shift=-4.0), 3, 2, 1)
    max_pool("max_pool2d_f32_2x2_s2", "f32", randn([2, 4, 8, 10], torch.float32), 2, 2)
    # Floor rounding: the last row and column are dropped.
    max_pool("max_pool2d_f32_2x2_s2_floor", "f32", randn([1, 3, 9, 11], torch.float32), 2, 2)
    max_pool("max_pool2d_f32_3x3_s1_p1_d2", "f32", randn([2, 3, 9, 8], torch.float32), 3, 1, 1, 2)
    max_pool("max_pool2d_f32_k2x3_s1x2_p1x1", "f32", randn([1, 4, 6, 9], torch.float32), (2, 3), (1, 2), (1, 1))
    max_pool("max_pool2d_f32_1x1_to_1x1", "f32", randn([3, 6, 1, 1], torch.float32), 3, 2, 1)  # one pixel, padded
    # NaN and infinities. torch 1.13's CPU max_pool2d (float32 and float64,
    # NCHW and channels_last alike) returns NaN for every window holding a
    # NaN, wherever the NaN is in it; +inf wins over numbers; a window
    # whose only values are −inf (padding aside) gives −inf.
    nan, inf = float("nan"), float("inf")
    x = randn([2, 3, 8, 9], torch.float32)
    x[0, 0, 0, 0] = nan  # a corner: in the first window only (after the padding)
    x[0, 1, 3, 4] = nan  # inside: in several windows
    x[0, 1, 7, 8] = inf
    x[0, 2, 2, 2] = 100.0
    x[0, 2, 2, 3] = nan  # after a larger value in the same window
    x[1, 0, 4, 4] = -inf
    x[1, 1, :, :] = -inf  # a whole channel: every window −inf
    x[1, 2, 0:4, 0:4] = -inf  # the top-left windows −inf, next to numbers
    x[1, 2, 5, 5] = nan
    x[1, 2, 6, 5] = inf  # NaN beats +inf
    max_pool("max_pool2d_f32_nan_inf", "f32", x, 3, 2, 1,
             nan="a window holding a NaN gives NaN (propagates, whatever else it holds); +inf wins over numbers; "
                 "a window of -inf values gives -inf; padding never wins")
    for dt in ("f16", "bf16"):
        max_pool(f"max_pool2d_{dt}_3x3_s2_p1", dt, randn([2, 4, 10, 13], DTYPES[dt]), 3, 2, 1)

    def global_avg_pool(name, dtype, shape, shift=0.0):
        x = randn(shape, DTYPES[dtype], shift=shift)
        g.case(name, {"op": "global_avg_pool", "dtype": dtype}, {"x": x},
               {"out": F.adaptive_avg_pool2d(d64(x), 1).flatten(1)})

    global_avg_pool("global_avg_pool_f32_7x7", "f32", [2, 64, 7, 7])  # ResNet at 224×224
    global_avg_pool("global_avg_pool_f32_1x1", "f32", [3, 16, 1, 1])  # ResNet at 32×32: a copy
    global_avg_pool("global_avg_pool_f32_2x2", "f32", [2, 24, 2, 2])
    global_avg_pool("global_avg_pool_f32_3x5", "f32", [1, 5, 3, 5])
    global_avg_pool("global_avg_pool_f32_28x28_shifted", "f32", [1, 8, 28, 28], shift=10.0)  # 784 values of mean ~10
    global_avg_pool("global_avg_pool_f16_7x7", "f16", [2, 32, 7, 7])
    global_avg_pool("global_avg_pool_bf16_7x7", "bf16", [2, 32, 7, 7])


def build():
    torch.manual_seed(SEED)
    torch.set_num_threads(1)
    torch.use_deterministic_algorithms(True)
    g = Golden()
    matmul_cases(g)
    elementwise_cases(g)
    norm_cases(g)
    softmax_cases(g)
    attention_cases(g)
    embedding_cases(g)
    cross_entropy_cases(g)
    layout_cases(g)
    optim_cases(g)
    return g


def build_decoder():
    torch.manual_seed(DECODER_SEED)
    torch.set_num_threads(1)
    torch.use_deterministic_algorithms(True)
    g = Golden(DECODER_SEED)
    decoder_cases(g)
    return g


def build_vision():
    torch.manual_seed(VISION_SEED)
    torch.set_num_threads(1)
    torch.use_deterministic_algorithms(True)
    g = Golden(VISION_SEED)
    vision_cases(g)
    return g


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", default=DEFAULT_OUT, help="output path of the kernels cases (default: %(default)s)")
    ap.add_argument("--decoder-out", default=DEFAULT_DECODER_OUT,
                    help="output path of the decoder cases (default: %(default)s)")
    ap.add_argument("--vision-out", default=DEFAULT_VISION_OUT,
                    help="output path of the vision cases (default: %(default)s)")
    ap.add_argument("--check", action="store_true", help="exit 1 unless the outputs already hold exactly this output")
    args = ap.parse_args()
    status = 0
    for path, g in ((args.out, build()), (args.decoder_out, build_decoder()), (args.vision_out, build_vision())):
        data = g.serialize()
        if args.check:
            if not is_current(path, data):
                print(f"{path} is stale: regenerate with /usr/bin/python3 {SCRIPT}", file=sys.stderr)
                status = 1
                continue
            print(f"{path} is current ({len(g.params)} cases, {len(data)} bytes)")
            continue
        write_file(path, data)
        print(f"wrote {path}: {len(g.params)} cases, {len(g.tensors)} tensors, {len(data)} bytes")
    return status


if __name__ == "__main__":
    sys.exit(main())
