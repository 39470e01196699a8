#!/usr/bin/env python3
"""Independent PyTorch reference for zbench's LoRA fine-tuning of Llama
(models/llama's LoRA).

LoRA as Hugging Face PEFT defines it (peft is not installable here: our
own module, with PEFT's semantics and saved names), over llama.py's
LlamaForCausalLM, trained as transformers' Trainer trains an adapter, and
the writer of the LoRA golden. Importing this file has no side effects:
baselines/peers/torch_bench.py imports the module and the helpers.

Modules and helpers (dtype and device agnostic):

  LoraLinear       PEFT's lora.Linear around a frozen nn.Linear W [out, in]
                   (base_layer): lora_A nn.Linear(in, r) (weight A [r, in]),
                   lora_B nn.Linear(r, out) (weight B [out, r]), no biases,
                   lora_dropout (nn.Dropout(p), nn.Identity when p = 0);
                   forward(x) = base_layer(x) + lora_B(lora_A(dropout(x)))
                   · scaling, x cast to A's dtype for the adapter's path and
                   the sum cast back to the base result's dtype, as PEFT
                   does; scaling = lora_alpha / r, or lora_alpha / √r with
                   use_rslora; .disabled = True gives base_layer(x) alone
                   (PEFT's disable_adapter)
  inject           replaces the target linears of a LlamaForCausalLM
                   (q_proj k_proj v_proj o_proj under self_attn, gate_proj
                   up_proj down_proj under mlp) by LoraLinears, freezes
                   every base parameter (requires_grad False); returns
                   {PEFT saved name: parameter}, ordered by layer, then
                   target in the order above, A before B
  peft_name        "model.layers.0.self_attn.q_proj", "A" ->
                   "base_model.model.model.layers.0.self_attn.q_proj
                   .lora_A.weight" (PEFT's saved adapter names: its state
                   names without the adapter name ".default")
  adapter_shapes   {PEFT saved name: shape} in inject's order, from the
                   config alone
  init_adapter     the initial adapter: every A uniform in ±1/√in (PEFT's
                   kaiming_uniform_(a=√5)), every B uniform in ±0.02 (PEFT
                   initialises B to zero; nonzero here so that A has a
                   gradient at the first step), drawn in inject's order
                   from a torch.Generator (torch.rand in float64, ·2 − 1,
                   ·bound, rounded to float32)
  causal_lm_loss   HF LlamaForCausalLM's: logits[:, :-1] against
                   labels[:, 1:], cross entropy mean over labels ≠ −100
  lr_lambda        transformers' get_cosine_schedule_with_warmup and
                   get_constant_schedule_with_warmup: with k the number of
                   completed updates (0 for the first), k < warmup:
                   k / max(1, warmup); else cosine 0.5·(1 + cos(π·(k −
                   warmup) / max(1, total − warmup))) (at least 0),
                   constant 1. With warmup > 0 the first update has lr 0
                   (as in HF), and still advances AdamW's step count and
                   moments.
  set_lora_dtype   casts the adapter parameters to a dtype (float32
                   adapters over bfloat16 base weights, as PEFT's
                   autocast_adapter_dtype keeps them)

One training step (train): forward of the batch with attention_mask =
input_ids ≠ 0 (right padding: the mask changes no real position's logits,
asserted), causal_lm_loss, backward, torch.nn.utils.clip_grad_norm_(adapter
parameters, max_grad_norm) (the global 2-norm of all adapter gradients; if
max_norm / (norm + 1e-6) < 1, every gradient is multiplied by it), then
torch.optim.AdamW over the adapter parameters only (one group: lr, betas,
eps and weight_decay on every adapter tensor; decoupled decay p ·= 1 −
lr·wd, then Adam with bias correction), the LambdaLR schedule's step, and
zero_grad(set_to_none=True).

Base weights: llama.py's seeded synthetic weights (float32 values, keyed by
the HF checkpoint name, llama.py's ranges). The golden computation is in
float64 throughout: the float32 base weights and the float32 initial
adapter cast to float64, dropout 0 (llama.py's float64 semantics: RMSNorm
and softmax in float64, rotary angles in float32).

Batches: one fresh batch per step from the case's batch generator; row by
row: L = randint(S/2, S+1) (real length in [S/2, S], S/2 floored), the
row's ids randint(3, V, (L,)), P = randint(1, L/2+1) (prompt length in [1,
L/2], L/2 floored); input_ids = the ids, right-padded with 0 to S; labels =
input_ids, with −100 on the first P positions and on the padding.

Generators (torch.Generator().manual_seed(s), s = (seed XOR fnv1a64(tag)) &
(2^63 − 1), seed the case's synthetic seed): tag "<case>/batches" for the
batches, "<case>/init" for the initial adapter.

Cases (10 steps each):

  tiny         testdata/golden/llama-tiny/config.json, synthetic seed
               20261205, batch 3, seq 24; r 4, lora_alpha 8, use_rslora
               (scaling 8/√4 = 4), all seven targets; AdamW lr 1e-3, betas
               (0.9, 0.999), eps 1e-8, weight_decay 0.01; warmup 2, cosine
               over 10 steps; max_grad_norm 1.0. (Its first update has lr
               0: step1 equals init.)
  tinyllama2l  TinyLlama-1.1B's config (llama.py's TINYLLAMA_CONFIG) with
               num_hidden_layers 2, synthetic seed 20261206, batch 2, seq
               40; r 8, lora_alpha 32, no rslora (scaling 4), q_proj and
               v_proj; AdamW lr 1e-3, betas (0.9, 0.999), eps 1e-8,
               weight_decay 0; warmup 0, constant; max_grad_norm 1.0

File written: testdata/golden/lora.safetensors, per case C (names in "/"
form, as the other goldens; <peft> is a PEFT saved name, e.g.
base_model.model.model.layers.0.self_attn.q_proj.lora_A.weight):

  C/input_ids     I32 [10, B, S]  each step's batch (0 = padding)
  C/labels        I32 [10, B, S]  −100 on the prompt and on the padding
  C/init/<peft>   F32             the initial adapter (load it instead of
                                  an own initialisation)
  C/loss          F64 [10]        the loss of each step, before its update
  C/grad_norm     F64 [10]        the global gradient norm, before clipping
  C/lr            F64 [10]        the learning rate of each update
  C/grad/<peft>   F64             step 1's gradients (raw, before clipping)
  C/step1/<peft>  F64             the adapter after update 1
  C/final/<peft>  F64             the adapter after update 10

metadata "C" = JSON {"config": the HF config dict, "seed", "lora": {"r",
"lora_alpha", "lora_dropout": 0.0, "target_modules", "use_rslora"},
"optim": {"lr", "betas", "eps", "weight_decay", "warmup_steps", "schedule":
"cosine" or "constant", "max_grad_norm", "steps"}, "batch", "seq"}, plus
"reference", "script", "format". F64 is safetensors' dtype of that name
(8-byte little-endian IEEE doubles). The file is about 3.2 MB.

Self-checks (asserted, each case, on step 1's batch): the LoRA model with
every B = 0 gives exactly the base model's logits; the merged weights W +
scaling·B·A with the adapter disabled give the adapter's logits (final
adapter) within 1e-12 relative; the loss without the attention mask is the
loss with it.

Deterministic: fixed seeds, one thread, deterministic algorithms (the same
bytes on every run). Requires torch (1.13 tested, CPU) and numpy; about a
minute on one core, most of it tinyllama2l's float64 training (its 220
million synthetic weights: about 1.8 GB as float64). Run from anywhere:

  /usr/bin/python3 testdata/reference/lora.py            # write the golden
  /usr/bin/python3 testdata/reference/lora.py --check    # verify it is current
"""

import json
import math
import os
import sys

import torch
import torch.nn as nn
import torch.nn.functional as F

from bert import compact, fnv1a64
import golden_files
import llama
from llama import LlamaConfig, LlamaForCausalLM
from safetensors_file import entry, serialize

SCRIPT = "testdata/reference/lora.py"
FORMAT = ("zbench-golden/1: tensors <case>/{input_ids,labels,loss,grad_norm,lr}, "
          "<case>/{init,grad,step1,final}/<peft name>; metadata <case> = JSON params")
REPO = llama.REPO
GOLDEN = "testdata/golden/lora.safetensors"
IGNORE_INDEX = -100
STEPS = 10

# PEFT's target names, in inject's order, and the submodule holding each.
TARGETS = ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj")
PARENT = {"q_proj": "self_attn", "k_proj": "self_attn", "v_proj": "self_attn", "o_proj": "self_attn",
          "gate_proj": "mlp", "up_proj": "mlp", "down_proj": "mlp"}

# ---------------------------------------------------------------------------
# LoRA, as PEFT's lora.Linear


class LoraLinear(nn.Module):
    """PEFT's LoRA Linear: base_layer(x) + lora_B(lora_A(dropout(x)))·scaling
    (see the module docstring)."""

    def __init__(self, base, r, lora_alpha, dropout=0.0, use_rslora=False):
        super().__init__()
        self.base_layer = base
        self.lora_A = nn.Linear(base.in_features, r, bias=False, device=base.weight.device, dtype=base.weight.dtype)
        self.lora_B = nn.Linear(r, base.out_features, bias=False, device=base.weight.device, dtype=base.weight.dtype)
        self.lora_dropout = nn.Dropout(dropout) if dropout > 0 else nn.Identity()
        self.scaling = lora_alpha / math.sqrt(r) if use_rslora else lora_alpha / r
        self.disabled = False

    def forward(self, x):
        out = self.base_layer(x)
        if self.disabled:
            return out
        dt = out.dtype
        a = x.to(self.lora_A.weight.dtype)
        return (out + self.lora_B(self.lora_A(self.lora_dropout(a))) * self.scaling).to(dt)


def peft_name(module_path, which):
    """PEFT's saved name of a target's lora_A ("A") or lora_B ("B") weight."""
    return f"base_model.model.{module_path}.lora_{which}.weight"


def inject(model, r, lora_alpha, target_modules, dropout=0.0, use_rslora=False):
    """Wraps the target linears of model (llama.py's LlamaForCausalLM) in
    LoraLinears and freezes the base. Returns {PEFT saved name: parameter}
    in layer, target (TARGETS order), A-then-B order."""
    unknown = set(target_modules) - set(TARGETS)
    if unknown:
        raise ValueError(f"unknown LoRA target modules {sorted(unknown)}")
    for p in model.parameters():
        p.requires_grad_(False)
    params = {}
    for i, layer in enumerate(model.model.layers):
        for t in TARGETS:
            if t not in target_modules:
                continue
            parent = getattr(layer, PARENT[t])
            lora = LoraLinear(getattr(parent, t), r, lora_alpha, dropout, use_rslora)
            setattr(parent, t, lora)
            path = f"model.layers.{i}.{PARENT[t]}.{t}"
            params[peft_name(path, "A")] = lora.lora_A.weight
            params[peft_name(path, "B")] = lora.lora_B.weight
    return params


def lora_modules(model):
    return [m for m in model.modules() if isinstance(m, LoraLinear)]


def set_lora_dtype(model, dtype):
    """Casts every adapter parameter to dtype (in place: the parameter
    objects stay)."""
    for m in lora_modules(model):
        m.lora_A.to(dtype)
        m.lora_B.to(dtype)


def adapter_shapes(cfg, r, target_modules):
    """{PEFT saved name: shape} of the adapter of a LlamaConfig, in
    inject's order, without making the model."""
    H, I, D = cfg.hidden_size, cfg.intermediate_size, cfg.head_dim
    q, kv = cfg.num_attention_heads * D, cfg.num_key_value_heads * D
    dims = {"q_proj": (H, q), "k_proj": (H, kv), "v_proj": (H, kv), "o_proj": (q, H),
            "gate_proj": (H, I), "up_proj": (H, I), "down_proj": (I, H)}  # (in, out)
    out = {}
    for i in range(cfg.num_hidden_layers):
        for t in TARGETS:
            if t in target_modules:
                path = f"model.layers.{i}.{PARENT[t]}.{t}"
                n_in, n_out = dims[t]
                out[peft_name(path, "A")] = (r, n_in)
                out[peft_name(path, "B")] = (n_out, r)
    return out


def init_adapter(shapes, gen, b_bound=0.02):
    """The initial adapter values, float32 CPU tensors {name: tensor}, for
    shapes ({PEFT saved name: shape}, e.g. adapter_shapes'): A uniform
    ±1/√in, B uniform ±b_bound, drawn in shapes' order from gen."""
    out = {}
    for name, shape in shapes.items():
        bound = 1.0 / math.sqrt(shape[1]) if ".lora_A." in name else b_bound
        u = torch.rand(tuple(shape), generator=gen, dtype=torch.float64)
        out[name] = ((u * 2 - 1) * bound).to(torch.float32)
    return out


@torch.no_grad()
def load_adapter(params, values):
    for name, p in params.items():
        p.copy_(values[name])


def causal_lm_loss(logits, labels):
    """HF LlamaForCausalLM's loss: position t's logits predict labels[t+1];
    mean cross entropy over the labels that are not −100. Logits below
    float32 are upcast to float32, as HF does."""
    if logits.dtype not in (torch.float32, torch.float64):
        logits = logits.float()
    V = logits.shape[-1]
    return F.cross_entropy(logits[:, :-1].reshape(-1, V), labels[:, 1:].reshape(-1), ignore_index=IGNORE_INDEX)


def lr_lambda(schedule, warmup, total):
    """transformers' schedule multipliers as a function of k, the number of
    completed updates."""
    def cosine(k):
        if k < warmup:
            return float(k) / float(max(1, warmup))
        progress = float(k - warmup) / float(max(1, total - warmup))
        return max(0.0, 0.5 * (1.0 + math.cos(math.pi * progress)))

    def constant(k):
        if k < warmup:
            return float(k) / float(max(1.0, warmup))
        return 1.0

    return {"cosine": cosine, "constant": constant}[schedule]


# ---------------------------------------------------------------------------
# Goldens

CASES = {
    "tiny": {
        "config": None,  # testdata/golden/llama-tiny/config.json
        "seed": 20261205, "batch": 3, "seq": 24,
        "lora": {"r": 4, "lora_alpha": 8, "lora_dropout": 0.0, "target_modules": list(TARGETS), "use_rslora": True},
        "optim": {"lr": 1e-3, "betas": [0.9, 0.999], "eps": 1e-8, "weight_decay": 0.01, "warmup_steps": 2,
                  "schedule": "cosine", "max_grad_norm": 1.0, "steps": STEPS},
    },
    "tinyllama2l": {
        "config": dict(llama.TINYLLAMA_CONFIG, num_hidden_layers=2),
        "seed": 20261206, "batch": 2, "seq": 40,
        "lora": {"r": 8, "lora_alpha": 32, "lora_dropout": 0.0, "target_modules": ["q_proj", "v_proj"],
                 "use_rslora": False},
        "optim": {"lr": 1e-3, "betas": [0.9, 0.999], "eps": 1e-8, "weight_decay": 0.0, "warmup_steps": 0,
                  "schedule": "constant", "max_grad_norm": 1.0, "steps": STEPS},
    },
}


def generator(seed, tag):
    return torch.Generator().manual_seed((seed ^ fnv1a64(tag)) & ((1 << 63) - 1))


def make_batch(gen, B, S, V):
    """One step's input_ids and labels, int64 [B, S] (see the docstring)."""
    ids = torch.zeros(B, S, dtype=torch.int64)
    labels = torch.full((B, S), IGNORE_INDEX, dtype=torch.int64)
    for b in range(B):
        L = int(torch.randint(S // 2, S + 1, (1,), generator=gen))
        row = torch.randint(3, V, (L,), generator=gen)
        P = int(torch.randint(1, L // 2 + 1, (1,), generator=gen))
        ids[b, :L] = row
        labels[b, P:L] = row[P:]
    return ids, labels


@torch.no_grad()
def base_model64(cfg_dict, seed):
    """llama.py's LlamaForCausalLM with the seeded synthetic weights
    (float32 values) in float64, made one tensor at a time."""
    model = LlamaForCausalLM(LlamaConfig.from_dict(cfg_dict))
    for name, p in model.named_parameters():
        p.data = llama.synthetic_tensor(name, seed, list(p.shape)).double()
    return model


def put(tensors, name, t):
    assert name not in tensors, name
    t = t.detach().cpu()
    if t.dtype == torch.float64:
        assert torch.isfinite(t).all(), name
        tensors[name] = ("F64", list(t.shape), t.contiguous().numpy().astype("<f8").tobytes())
    else:
        tensors[name] = entry(name, t)


def rel(a, b):
    return float((a - b).norm() / b.norm())


@torch.no_grad()
def self_check(case, model, params, ids, mask, loss_fn):
    """The asserts of the docstring on one batch: B = 0 is the base model,
    the merged weights are the adapter, the mask changes no loss."""
    mods = lora_modules(model)
    logits = model(ids, mask)
    # Merged: W + scaling·B·A, adapter disabled.
    saved = [m.base_layer.weight.clone() for m in mods]
    for m in mods:
        m.base_layer.weight += m.scaling * (m.lora_B.weight @ m.lora_A.weight)
        m.disabled = True
    merged = model(ids, mask)
    for m, w in zip(mods, saved):
        m.base_layer.weight.copy_(w)
    e = rel(merged, logits)
    assert e < 1e-12, f"{case}: merged weights' logits differ from the adapter's: rel {e:.3g}"
    base = model(ids, mask)
    for m in mods:
        m.disabled = False
    # B = 0: exactly the base model.
    saved = [m.lora_B.weight.clone() for m in mods]
    for m in mods:
        m.lora_B.weight.zero_()
    zero = model(ids, mask)
    for m, b in zip(mods, saved):
        m.lora_B.weight.copy_(b)
    assert torch.equal(zero, base), f"{case}: LoRA with B = 0 differs from the base model"
    # Right padding: the attention mask changes no real position's logits.
    with_mask, without = loss_fn(logits), loss_fn(model(ids))
    assert torch.equal(with_mask, without), f"{case}: the loss depends on the attention mask"


def train_case(case, spec):
    cfg_dict = spec["config"]
    seed, B, S = spec["seed"], spec["batch"], spec["seq"]
    lo, op = spec["lora"], spec["optim"]
    V = cfg_dict["vocab_size"]

    gen = generator(seed, f"{case}/batches")
    batches = [make_batch(gen, B, S, V) for _ in range(op["steps"])]

    model = base_model64(cfg_dict, seed)
    params = inject(model, lo["r"], lo["lora_alpha"], lo["target_modules"], lo["lora_dropout"], lo["use_rslora"])
    shapes = adapter_shapes(model.cfg, lo["r"], lo["target_modules"])
    assert shapes == {n: tuple(p.shape) for n, p in params.items()}, case
    init = init_adapter(shapes, generator(seed, f"{case}/init"))
    load_adapter(params, init)
    model.train()

    named = list(params.items())
    plist = [p for _, p in named]
    opt = torch.optim.AdamW(plist, lr=op["lr"], betas=tuple(op["betas"]), eps=op["eps"],
                            weight_decay=op["weight_decay"])
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lr_lambda(op["schedule"], op["warmup_steps"], op["steps"]))
    losses, norms, lrs, grads, step1 = [], [], [], {}, {}
    for step, (ids, labels) in enumerate(batches):
        logits = model(ids, (ids != 0).long())
        loss = causal_lm_loss(logits, labels)
        del logits
        loss.backward()
        losses.append(loss.detach())
        if step == 0:
            grads = {n: p.grad.detach().clone() for n, p in named}
        norms.append(torch.nn.utils.clip_grad_norm_(plist, op["max_grad_norm"]).detach())
        lrs.append(opt.param_groups[0]["lr"])
        opt.step()
        sched.step()
        opt.zero_grad(set_to_none=True)
        if step == 0:
            step1 = {n: p.detach().clone() for n, p in named}
    final = {n: p.detach().clone() for n, p in named}

    ids0, labels0 = batches[0]
    self_check(case, model, params, ids0, (ids0 != 0).long(), lambda lg: causal_lm_loss(lg, labels0))

    tensors = {}
    put(tensors, f"{case}/input_ids", torch.stack([b[0] for b in batches]).to(torch.int32))
    put(tensors, f"{case}/labels", torch.stack([b[1] for b in batches]).to(torch.int32))
    put(tensors, f"{case}/loss", torch.stack(losses))
    put(tensors, f"{case}/grad_norm", torch.stack(norms))
    put(tensors, f"{case}/lr", torch.tensor(lrs, dtype=torch.float64))
    for n, _ in named:
        put(tensors, f"{case}/init/{n}", init[n])
        put(tensors, f"{case}/grad/{n}", grads[n])
        put(tensors, f"{case}/step1/{n}", step1[n])
        put(tensors, f"{case}/final/{n}", final[n])
    meta = {"config": cfg_dict, "seed": seed, "lora": lo, "optim": op, "batch": B, "seq": S}
    print(f"{case}: loss {losses[0].item():.6f} -> {losses[-1].item():.6f}, grad_norm[0] {norms[0].item():.4f}, "
          f"lr {lrs}", file=sys.stderr)
    return tensors, compact(meta)


def build():
    """{repo-relative path: bytes} of every file this script writes."""
    torch.manual_seed(CASES["tiny"]["seed"])
    torch.set_num_threads(1)
    torch.use_deterministic_algorithms(True)
    with open(os.path.join(REPO, "testdata", "golden", "llama-tiny", "config.json")) as f:
        tiny_config = json.load(f)
    tensors = {}
    meta = {"reference": f"torch {torch.__version__}", "script": SCRIPT, "format": FORMAT}
    for case, spec in CASES.items():
        spec = dict(spec)
        if spec["config"] is None:
            spec["config"] = tiny_config
        t, m = train_case(case, spec)
        tensors.update(t)
        meta[case] = m
    return {GOLDEN: serialize(tensors, meta)}


def main():
    return golden_files.main(__doc__, build, REPO, SCRIPT)


if __name__ == "__main__":
    sys.exit(main())
