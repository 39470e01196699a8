#!/usr/bin/env python3
"""Independent PyTorch reference for zbench's quantized Llama checkpoints
(models/llama/quantized.go): tiny Llamas quantized as llm-compressor
quantizes them and stored in compressed-tensors' layouts as vLLM reads
them, with the logits they must give.

The quantization follows compressed-tensors (neuralmagic/compressed-tensors
0.12: quantization/utils/helpers.py calculate_qparams and calculate_range,
quantization/lifecycle/forward.py _quantize, compressors/quantized_
compressors/{naive_quantized,pack_quantized}.py), written anew here, not
zbench's own rule (which is amax/127 in [-127, 127]):

  symmetric minmax weights, in the model's dtype as llm-compressor computes
  them: q_min, q_max = -2^(b-1), 2^(b-1) - 1 (int8 [-128, 127], int4
  [-8, 7]); amax = max|w| over the output channel (int8) or over each
  group of 32 inputs (int4); scale = amax / ((q_max - q_min) / 2), that is
  amax/127.5 or amax/7.5, computed and stored in the model's dtype
  (clamped below by float32's eps); code = round(clamp(w / scale, q_min,
  q_max)), the division in the model's dtype, rounding half to even. The
  most negative code (-128, -8) occurs wherever a row's (group's) amax is
  a negative weight and w/scale reaches -127.5 (-7.5): asserted present.

Schemes (one checkpoint each; every linear module of every decoder layer,
q_proj ... down_proj, quantized; embed_tokens, the norms and lm_head in the
model's dtype; quantization_config "ignore": ["lm_head"]):

  w8a8   "int-quantized", weights int8 channel, input_activations int8
         token dynamic; model dtype bfloat16: X.weight I8 [out, in],
         X.weight_scale BF16 [out, 1], no input_scale
  w8a16  "pack-quantized", weights int8 channel; model dtype float16:
         X.weight_packed I32 [out, in/4] (four codes a word, each code+128,
         from the low byte up: pack_to_int32), X.weight_scale F16 [out, 1],
         X.weight_shape I64 [2] = [out, in] (torch.tensor(weight.shape))
  w4a16  "pack-quantized", weights int4 group 32; model dtype float32:
         X.weight_packed I32 [out, in/8] (eight codes a word, each code+8,
         from the low nibble up), X.weight_scale F32 [out, in/32],
         X.weight_shape I64 [2]

  fp8    llm-compressor's FP8_DYNAMIC, "float-quantized" (the naive
         compressor, FloatQuantizationCompressor), weights E4M3 channel,
         input_activations E4M3 token dynamic; model dtype bfloat16:
         X.weight F8_E4M3 [out, in] (the bytes of the codes; torch 1.13
         has no float8 dtype, so they come from fp8.py's E4M3 table),
         X.weight_scale BF16 [out, 1], no input_scale. Quantized by
         compressed-tensors' float rule: amax = max|w| over the output
         channel, scale = amax / 448 (FP8_E4M3_MAX; (q_max - q_min)/2 with
         q_min, q_max = -448, 448) in bfloat16, code = float8_e4m3fn(
         clamp(w / scale, -448, 448)), the division in bfloat16, then round
         to nearest, ties to even. Codes ±448 (0x7e, 0xfe) occur wherever a
         row's amax divides to 448 (or past it, clamped): asserted present.

And one bitsandbytes checkpoint, as Hugging Face transformers saves a model
loaded with BitsAndBytesConfig(load_in_4bit=True, bnb_4bit_quant_type=
"nf4", bnb_4bit_use_double_quant=False) (bitsandbytes-foundation/
bitsandbytes: functional.py get_4bit_type, quantize_4bit and
QuantState.as_dict(packed=True), utils.py pack_dict_to_tensor,
backends/default/ops.py quantize_4bit, nn/modules.py Linear4bit
_save_to_state_dict), written anew here:

  nf4    model dtype bfloat16; its own config, intermediate 128 instead of
         96 (zbench reads NF4 blocks only within a row, so in_features
         must be a multiple of the blocksize, 64; bitsandbytes' blocks
         run over the flattened weight); every decoder linear module X:
         X.weight U8 [out*in/2, 1] (the codes of the flattened weight, two
         a byte, the first in the high nibble), X.weight.absmax F32
         [out*in/64], X.weight.quant_map F32 [16] (the NF4 levels in
         float32), X.weight.quant_state.bitsandbytes__nf4 U8 (the UTF-8
         JSON, json.dumps' default separators, of {"quant_type": "nf4",
         "blocksize": 64, "dtype": "bfloat16", "shape": [out, in]});
         llm_int8_skip_modules null, as transformers leaves lm_head
         unconverted by default. The quantization, as the CPU kernel
         computes it in float32: absmax = max|w| per block of 64 of the
         flattened weight; scaled = clamp(w * (1/absmax), -1, 1); code =
         the number of midpoints of consecutive NF4 levels below scaled
         (torch.bucketize, a value on a midpoint taking the lower code).
         Codes 0 (-1) and 15 (+1) are asserted present in both nibbles.

Files written (under testdata/golden/llama-quant):

  <scheme>/config.json        an HF LlamaConfig (vocab 97, hidden 64,
                              intermediate 96, 2 layers, 8 heads of 8, 2 KV
                              heads, llama3 rope scaling, untied, torch_dtype
                              the model's dtype) with the quantization_config
                              llm-compressor writes for the scheme
  <scheme>/model.safetensors  the checkpoint (synthetic seed 21, the
                              generator of llama.py, rounded to the model's
                              dtype before quantizing), metadata
                              {"format": "pt"}
  logits.safetensors          "input_ids" I32 [10] (random in [3, 97), see
                              below); "<scheme>/logits" F32 [10, 97], the
                              logits of every position; metadata "<scheme>"
                              = JSON {"dir", "scheme", "format",
                              "torch_dtype", "scale_dtype", "weight_bits",
                              "group_size", "min_code", "max_code",
                              "min_code_count" (of "codes"), "seed", "ids",
                              "quant_rel_err" (‖these logits − the
                              unquantized model's‖/‖…‖, both float64: how
                              much quantizing changed them), and for w8a8
                              "inputs", "closest_tie", "float32_deviation"
                              (below)}, plus "reference", "script", "format"

  nf4/config.json, nf4/model.safetensors, and "nf4/logits" and metadata
  "nf4" in logits.safetensors likewise (the same input_ids; "codes",
  "min_code_count" and "max_code_count" are those of codes 0 and 15, and
  "high_nibble" and "low_nibble" their counts by nibble)

  fp8/config.json, fp8/model.safetensors, and "fp8/logits" and metadata
  "fp8" likewise, but on its own ids, "fp8/input_ids" I32 [10] (below);
  "max_code_count" and "min_code_count" count codes 0x7e and 0xfe,
  "weight_dtype" ("F8_E4M3") stands for "weight_bits", and "inputs",
  "closest_tie", "float32_deviation" and "tie_unit" are as below

Expected logits are computed in float64 (llama.py's LlamaForCausalLM) from
the checkpoint as stored: the float tensors widened exactly, each quantized
module's weight dequantized exactly (code · scale; for nf4 quant_map[code]
· absmax of its block, both float32 widened; bitsandbytes' own
dequantize_4bit rounds that product to the model's dtype, which this
reference does not). For w8a8 each quantized module's input is also
fake-quantized per token (row) as zbench's int8 kernels quantize it
(kernels.Quant; the scale is that of vLLM's dynamic per-token int8 kernel
too): s = max|x_row| / 127 (1 for a zero row),
x -> clamp(round(x / s), -127, 127) · s, rounding half to even, in float64.
For fp8 each quantized module's input is cast per token (row) to E4M3
as zbench's FP8 kernels cast it (kernels.FP8's CastFP8Rows): a =
fl32(max|x_row|), s = fl32(448 / a), code = E4M3(fl32(x · s)) (round to
nearest, ties to even, satfinite), x -> code · fl32(1 / s) (fake_fp8_tokens);
the weights are code · scale, the scale as stored (bfloat16-rounded).
Weight-only schemes run the float inputs against the dequantized weights.

A float32 run rounds an input x/s the other way when x/s lies closer to a
rounding midpoint than float32's error in it, and one such code moves the
logits by about 1e-3 relative. The input ids are therefore the first of 64
candidate sequences (torch.randint with llama.py's case_generator of
"llama-quant/<k>") whose w8a8 inputs all lie TIE_MARGIN = 2e-4 code units
or more from a midpoint ("closest_tie"), asserted more than twice the
largest difference of any x/s between a float32 and a float64 run of the
same model here ("float32_deviation", about 7e-5).

fp8 likewise: a float32 run moves a value cast, y = fl32(x · s), by an
absolute part (float32's error in x, relative to the row's amax, which s
maps to 448) and a part relative to y (s's), about 1e-4 · (1 + |y|/128)
in all. Its ids are the first of 256 candidate sequences ("llama-quant-fp8/
<k>") whose fp8 inputs all lie FP8_TIE_MARGIN = 3e-4 units of 1 + |y|/128
or more from a midpoint of neighbouring E4M3 values ("closest_tie", 4.3e-4
for candidate 40), asserted more than twice the largest difference of any
y between a float32 and a float64 run, in those units ("float32_deviation",
about 1e-4; "tie_unit"). The w8a8 ids do not qualify; fp8's are stored as
"fp8/input_ids", leaving "input_ids" as it was.

Deterministic: fixed seeds, one thread. Requires torch (1.13 tested, CPU)
and numpy; takes about two seconds. Run from anywhere:

  /usr/bin/python3 testdata/reference/llama_quant.py            # write the goldens
  /usr/bin/python3 testdata/reference/llama_quant.py --check    # verify they are current
"""

import json
import os
import sys

import numpy as np
import torch

import golden_files
import safetensors_file
from bert import Tensors, compact
from fp8 import E4M3
from llama import LlamaConfig, LlamaForCausalLM, case_generator, synthetic_
from safetensors_file import entry, serialize

SCRIPT = "testdata/reference/llama_quant.py"
FORMAT = "zbench-golden/1: tensors input_ids, <scheme>/logits; metadata <scheme> = JSON params"
REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DIR = "testdata/golden/llama-quant"
SEED = 21
N_IDS = 10
# The ids: the first of CANDIDATES random sequences whose w8a8 inputs lie
# TIE_MARGIN code units or more from a rounding midpoint (choose_ids).
CANDIDATES = 64
TIE_MARGIN = 2e-4
# fp8's own ids (fp8/input_ids): the first of FP8_CANDIDATES sequences
# (case_generator "llama-quant-fp8/<k>") whose inputs cast to E4M3 lie
# FP8_TIE_MARGIN or more from a midpoint, in units of 1 + |y|/128 of the
# value y = fl32(x·s) cast (choose_fp8_ids).
FP8_CANDIDATES = 256
FP8_TIE_MARGIN = 3e-4

# safetensors_file.py predates int8 tensors: I8's rank in the reference
# implementation's Dtype enum (after U8), and its encoding.
safetensors_file.ST_RANK.setdefault("I8", 5)
safetensors_file.ENCODINGS.setdefault(torch.int8, ("I8", "i1"))
# And F8_E4M3's rank (after I8, F8_E5M2), for the fp8 codes, which torch
# 1.13 has no dtype for: they are written as their bytes (fp8_checkpoint).
safetensors_file.ST_RANK.setdefault("F8_E4M3", 7)

CONFIG = {
    "architectures": ["LlamaForCausalLM"],
    "attention_bias": False,
    "attention_dropout": 0.0,
    "bos_token_id": 1,
    "eos_token_id": 2,
    "head_dim": 8,
    "hidden_act": "silu",
    "hidden_size": 64,
    "initializer_range": 0.02,
    "intermediate_size": 96,
    "max_position_embeddings": 64,
    "mlp_bias": False,
    "model_type": "llama",
    "num_attention_heads": 8,
    "num_hidden_layers": 2,
    "num_key_value_heads": 2,
    "pretraining_tp": 1,
    "rms_norm_eps": 1e-05,
    "rope_scaling": {"factor": 4.0, "high_freq_factor": 4.0, "low_freq_factor": 1.0,
                     "original_max_position_embeddings": 16, "rope_type": "llama3"},
    "rope_theta": 10000.0,
    "tie_word_embeddings": False,
    "transformers_version": "4.46.0",
    "use_cache": True,
    "vocab_size": 97,
}

# The bitsandbytes nf4 checkpoint: its config (in_features multiples of
# the blocksize), blocksize and model dtype.
NF4_CONFIG = dict(CONFIG, intermediate_size=128)
NF4_BLOCK = 64
NF4_DTYPE = torch.bfloat16
# get_4bit_type("nf4"): the NF4 levels, float32, increasing.
NF4_LEVELS = torch.tensor([
    -1.0, -0.6961928009986877, -0.5250730514526367, -0.39491748809814453,
    -0.28444138169288635, -0.18477343022823334, -0.09105003625154495, 0.0,
    0.07958029955625534, 0.16093020141124725, 0.24611230194568634, 0.33791524171829224,
    0.44070982933044434, 0.5626170039176941, 0.7229568362236023, 1.0], dtype=torch.float32)

# The fp8 checkpoint: llm-compressor's FP8_DYNAMIC, compressed-tensors'
# "float-quantized" format, in a bfloat16 model (so bfloat16 scales).
FP8_FORMAT = "float-quantized"
FP8_DTYPE = torch.bfloat16

DTYPE_NAMES = {torch.float32: "float32", torch.bfloat16: "bfloat16", torch.float16: "float16"}

# scheme: (format, weight bits, group size or None for per channel,
# dynamic per-token int8 inputs, the model's dtype)
SCHEMES = {
    "w8a8": ("int-quantized", 8, None, True, torch.bfloat16),
    "w8a16": ("pack-quantized", 8, None, False, torch.float16),
    "w4a16": ("pack-quantized", 4, 32, False, torch.float32),
}

MODULES = ("self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj", "self_attn.o_proj",
           "mlp.gate_proj", "mlp.up_proj", "mlp.down_proj")


def quant_args(bits, strategy, group, dynamic=False, observer="minmax", typ="int"):
    """A QuantizationArgs as llm-compressor dumps it into config.json."""
    return {"actorder": None, "block_structure": None, "dynamic": dynamic, "group_size": group,
            "num_bits": bits, "observer": observer, "observer_kwargs": {}, "strategy": strategy,
            "symmetric": True, "type": typ}


def quantization_config(fmt, bits, group, act):
    weights = quant_args(bits, "group" if group else "channel", group)
    inputs = quant_args(8, "token", None, dynamic=True, observer=None) if act else None
    return {
        "config_groups": {"group_0": {"format": fmt, "input_activations": inputs, "output_activations": None,
                                      "targets": ["Linear"], "weights": weights}},
        "format": fmt,
        "global_compression_ratio": None,
        "ignore": ["lm_head"],
        "kv_cache_scheme": None,
        "quant_method": "compressed-tensors",
        "quantization_status": "compressed",
        "sparsity_config": {},
    }


# ---------------------------------------------------------------------------
# compressed-tensors' quantization, packing and unpacking


def quantize_weight(w, bits, group):
    """Codes (int8 [out, in]) and scales ([out, in/group] or [out, 1], in
    w's dtype) of w (the model's dtype), symmetric minmax as
    compressed-tensors computes them, in w's dtype."""
    out, inp = w.shape
    g = group or inp
    q_min, q_max = -(1 << (bits - 1)), (1 << (bits - 1)) - 1
    wg = w.reshape(out, inp // g, g)
    lo = torch.minimum(wg.amin(-1), torch.zeros((), dtype=w.dtype))
    hi = torch.maximum(wg.amax(-1), torch.zeros((), dtype=w.dtype))
    amax = torch.maximum(lo.abs(), hi.abs())
    scale = amax / (float(q_max - q_min) / 2)
    # torch 1.13 has no CPU clamp or round for float16: both are exact in
    # float32 (the eps bound never binds here; the clamped values and the
    # integers are float16's), so they run there, the division in w's dtype.
    assert (scale.float() > torch.finfo(torch.float32).eps).all()
    scale = scale.float().clamp(min=torch.finfo(torch.float32).eps).to(w.dtype)
    v = (wg / scale[..., None]).float()
    codes = torch.round(torch.clamp(v, q_min, q_max)).to(torch.int8).reshape(out, inp)
    return codes, scale


def pack_int32(codes, bits):
    """pack_to_int32: codes (int8 [rows, cols], cols a multiple of 32/bits)
    offset to unsigned and packed from the low bits of each int32 up."""
    u = (codes.numpy().astype(np.int64) + (1 << (bits - 1))).astype(np.uint32)
    per = 32 // bits
    rows, cols = u.shape
    assert cols % per == 0
    u = u.reshape(rows, cols // per, per)
    words = np.zeros((rows, cols // per), dtype=np.uint32)
    for i in range(per):
        words |= u[:, :, i] << np.uint32(bits * i)
    return torch.from_numpy(words.view(np.int32))


def unpack_int32(words, bits, cols):
    """unpack_from_int32, element by element: the inverse of pack_int32."""
    w = words.numpy().view(np.uint32)
    per = 32 // bits
    out = np.empty((w.shape[0], cols), dtype=np.int64)
    for c in range(cols):
        out[:, c] = (w[:, c // per] >> np.uint32(bits * (c % per))) & ((1 << bits) - 1)
    return torch.from_numpy(out - (1 << (bits - 1))).to(torch.int8)


def fake_quant_tokens(x):
    """x (float [..., K]) quantized per row to int8 as zbench's kernels do
    (with the scale of vLLM's dynamic per-token kernel), and back, in x's
    dtype; also x/s, the values rounded, in float64."""
    amax = x.abs().amax(-1, keepdim=True)
    s = torch.where(amax == 0, torch.ones_like(amax), amax / 127)
    v = x / s
    return torch.clamp(torch.round(v), -127, 127) * s, v.double()


def closest_tie(vs):
    """The smallest distance of any of the values vs from a rounding
    midpoint, in code units."""
    return min(float(((v - v.floor()) - 0.5).abs().min()) for v in vs)


# ---------------------------------------------------------------------------
# bitsandbytes' NF4


def bnb_quantization_config():
    """BitsAndBytesConfig(load_in_4bit=True, bnb_4bit_quant_type="nf4",
    bnb_4bit_compute_dtype=torch.bfloat16).to_dict() as transformers writes
    it into config.json."""
    return {
        "_load_in_4bit": True,
        "_load_in_8bit": False,
        "bnb_4bit_compute_dtype": "bfloat16",
        "bnb_4bit_quant_storage": "uint8",
        "bnb_4bit_quant_type": "nf4",
        "bnb_4bit_use_double_quant": False,
        "llm_int8_enable_fp32_cpu_offload": False,
        "llm_int8_has_fp16_weight": False,
        "llm_int8_skip_modules": None,
        "llm_int8_threshold": 6.0,
        "load_in_4bit": True,
        "load_in_8bit": False,
        "quant_method": "bitsandbytes",
    }


def quantize_nf4(w):
    """The NF4 codes (int64 [out*in], of the flattened weight) and absmax
    (float32 [out*in/NF4_BLOCK]) of w (the model's dtype), in float32 as
    bitsandbytes' CPU quantize_4bit computes them."""
    flat = w.reshape(-1).float()
    assert flat.numel() % NF4_BLOCK == 0
    blocks = flat.reshape(-1, NF4_BLOCK)
    absmax = blocks.abs().amax(-1)
    assert (absmax > 1e-38).all()  # bitsandbytes' clamp does not bind
    scaled = torch.clamp(blocks * (1.0 / absmax)[:, None], -1, 1).reshape(-1)
    mid = (NF4_LEVELS[:-1] + NF4_LEVELS[1:]) / 2
    codes = (scaled[:, None] > mid[None, :]).sum(-1)  # bucketize, right=False
    return codes, absmax


def pack_nf4(codes):
    """Two codes a byte, the first in the high nibble: U8 [n/2, 1]."""
    q = codes.to(torch.uint8)
    return ((q[0::2] << 4) | q[1::2])[:, None]


def unpack_nf4(packed):
    """dequantize_4bit's reading of packed: the inverse of pack_nf4."""
    b = packed.reshape(-1).to(torch.int64)
    codes = torch.empty(2 * b.numel(), dtype=torch.int64)
    codes[0::2] = b >> 4
    codes[1::2] = b & 0xF
    return codes


def nf4_checkpoint(sd):
    """The nf4 checkpoint of the float weights sd (of NF4_CONFIG): as
    checkpoint returns, its stats those of codes 0 and 15."""
    quantized = quantized_names(NF4_CONFIG)
    tensors, state = {}, {}
    high, low = torch.zeros(16, dtype=torch.int64), torch.zeros(16, dtype=torch.int64)
    for n, w in sd.items():
        w = w.to(NF4_DTYPE)
        mod = n[:-len(".weight")]
        if mod not in quantized:
            tensors[n] = entry(n, w)
            state[n] = w.double()
            continue
        out, inp = w.shape
        assert inp % NF4_BLOCK == 0, n
        codes, absmax = quantize_nf4(w)
        packed = pack_nf4(codes)
        assert packed.shape == (out * inp // 2, 1)
        assert torch.equal(unpack_nf4(packed), codes), n
        high += torch.bincount(codes[0::2], minlength=16)
        low += torch.bincount(codes[1::2], minlength=16)
        qs = json.dumps({"quant_type": "nf4", "blocksize": NF4_BLOCK, "dtype": DTYPE_NAMES[NF4_DTYPE],
                         "shape": [out, inp]}).encode("utf-8")
        tensors[n] = entry(n, packed)
        tensors[n + ".absmax"] = entry(n + ".absmax", absmax)
        tensors[n + ".quant_map"] = entry(n + ".quant_map", NF4_LEVELS)
        tensors[n + ".quant_state.bitsandbytes__nf4"] = entry(
            n + ".quant_state.bitsandbytes__nf4", torch.tensor(list(qs), dtype=torch.uint8))
        deq = NF4_LEVELS.double()[codes].reshape(-1, NF4_BLOCK) * absmax.double()[:, None]
        state[n] = deq.reshape(out, inp)
    # Both extremes in both nibbles: a block's absmax reaches +1 (15) or
    # -1 (0).
    for nib in (high, low):
        assert nib[0] > 0 and nib[15] > 0, (high, low)
    total = high + low
    stats = {"min_code": 0, "max_code": 15, "min_code_count": int(total[0]), "max_code_count": int(total[15]),
             "codes": int(total.sum()), "high_nibble": [int(high[0]), int(high[15])],
             "low_nibble": [int(low[0]), int(low[15])]}
    return tensors, state, stats


# ---------------------------------------------------------------------------
# llm-compressor's FP8_DYNAMIC ("float-quantized")


def fp8_quantization_config():
    """The quantization_config llm-compressor writes for the FP8_DYNAMIC
    preset scheme (compressed-tensors quant_scheme.py) with ignore
    ["lm_head"]."""
    weights = quant_args(8, "channel", None, typ="float")
    inputs = quant_args(8, "token", None, dynamic=True, observer=None, typ="float")
    return {
        "config_groups": {"group_0": {"format": FP8_FORMAT, "input_activations": inputs,
                                      "output_activations": None, "targets": ["Linear"], "weights": weights}},
        "format": FP8_FORMAT,
        "global_compression_ratio": None,
        "ignore": ["lm_head"],
        "kv_cache_scheme": None,
        "quant_method": "compressed-tensors",
        "quantization_status": "compressed",
        "sparsity_config": {},
    }


def quantize_fp8_weight(w):
    """The E4M3 codes (uint8 numpy [out, in]) and scales ([out, 1], in w's
    dtype) of w (the model's dtype), as compressed-tensors computes them:
    scale = amax / 448 and w / scale in w's dtype, clamped to ±448, then
    cast to float8_e4m3fn (round to nearest even)."""
    lo = torch.minimum(w.amin(-1, keepdim=True), torch.zeros((), dtype=w.dtype))
    hi = torch.maximum(w.amax(-1, keepdim=True), torch.zeros((), dtype=w.dtype))
    amax = torch.maximum(lo.abs(), hi.abs())
    scale = amax / (float(E4M3.max - -E4M3.max) / 2)
    # The eps clamp never binds here; clamp (exact: ±448 and the values are
    # w's dtype's) runs in float32, which torch 1.13's CPU has for every
    # dtype.
    assert (scale.float() > torch.finfo(torch.float32).eps).all()
    v = torch.clamp((w / scale).float(), -E4M3.max, E4M3.max)
    return E4M3.encode(v.double().numpy()), scale


def fp8_checkpoint(sd):
    """The fp8 checkpoint of the float weights sd (of CONFIG), as
    checkpoint returns; its stats those of codes ±448 (0x7e, 0xfe)."""
    tensors, state = {}, {}
    quantized = quantized_names()
    counts = np.zeros(256, dtype=np.int64)
    for n, w in sd.items():
        w = w.to(FP8_DTYPE)
        mod = n[:-len(".weight")]
        if mod not in quantized:
            tensors[n] = entry(n, w)
            state[n] = w.double()
            continue
        codes, scale = quantize_fp8_weight(w)
        out, inp = codes.shape
        assert scale.shape == (out, 1) and scale.dtype == FP8_DTYPE
        counts += np.bincount(codes.reshape(-1), minlength=256)
        tensors[n] = ("F8_E4M3", [out, inp], codes.tobytes())
        tensors[mod + ".weight_scale"] = entry(mod + ".weight_scale", scale)
        state[n] = torch.from_numpy(E4M3.values[codes]) * scale.double()
    assert counts[0x7f] == 0 and counts[0xff] == 0  # no NaN
    # ±448, both signs: a row's amax w/scale rounds (in bfloat16) to or
    # past 448.
    assert counts[0x7e] > 0 and counts[0xfe] > 0, (counts[0x7e], counts[0xfe])
    stats = {"max_code": "0x7e", "min_code": "0xfe", "max_code_count": int(counts[0x7e]),
             "min_code_count": int(counts[0xfe]), "codes": int(counts.sum())}
    return tensors, state, stats


def fake_fp8_tokens(x):
    """x (float [..., K]) cast per row to E4M3 as zbench's kernels do
    (kernels.FP8's CastFP8Rows) and back, in x's dtype: a = fl32(max|x|),
    s = fl32(448 / a), code = E4M3(fl32(x · s)), x -> code · fl32(1 / s);
    also the values fl32(x · s) cast, float64."""
    xn = x.detach().numpy()
    a = np.abs(xn).max(-1, keepdims=True).astype(np.float32)
    assert (a > 0).all() and np.isfinite(a).all()
    s = np.float32(E4M3.max) / a  # float32 division, rounded once
    y = (xn.astype(np.float64) * s.astype(np.float64)).astype(np.float32).astype(np.float64)
    codes = E4M3.encode(y)
    inv = (np.float32(1) / s).astype(np.float64)
    return torch.from_numpy(E4M3.values[codes] * inv).to(x.dtype), torch.from_numpy(y)


def fp8_units(y):
    """FP8_UNIT of the values y cast (float64 numpy): 1 + |y|/128."""
    return 1 + np.minimum(np.abs(y), E4M3.max) / 128


def closest_fp8_tie(ys):
    """The smallest distance of any of the values ys cast (fl32(x·s)) from a
    midpoint of neighbouring E4M3 values (464, past 448, saturates), in
    FP8_UNITs."""
    y = np.concatenate([v.numpy().ravel() for v in ys])
    a = np.minimum(np.abs(y), E4M3.max)
    i = np.searchsorted(E4M3.pos, a, side="right") - 1
    hi = np.minimum(i + 1, E4M3.maxcode)
    mid = (E4M3.pos[i] + E4M3.pos[hi]) / 2
    d = np.where(i == E4M3.maxcode, np.inf, np.abs(a - mid))
    return float((d / fp8_units(y)).min())


def fp8_deviation(y64, y32):
    """The largest difference between the values y64 and y32 cast by a
    float64 and a float32 run, in FP8_UNITs."""
    a = np.concatenate([v.numpy().ravel() for v in y64])
    b = np.concatenate([v.numpy().ravel() for v in y32])
    return float((np.abs(a - b) / fp8_units(a)).max())


def choose_fp8_ids(state):
    """fp8's input ids: the first of the candidate sequences whose fp8
    inputs (state is fp8's) all lie FP8_TIE_MARGIN FP8_UNITs or more from
    an E4M3 midpoint, as choose_ids (the same return values)."""
    V = CONFIG["vocab_size"]
    for k in range(FP8_CANDIDATES):
        ids = torch.randint(3, V, (N_IDS,), generator=case_generator(f"llama-quant-fp8/{k}"))
        _, y64 = forward(state, ids, True, fq=fake_fp8_tokens)
        tie = closest_fp8_tie(y64)
        if tie < FP8_TIE_MARGIN:
            continue
        _, y32 = forward(state, ids, True, torch.float32, fq=fake_fp8_tokens)
        dev = fp8_deviation(y64, y32)
        assert tie > 2 * dev, (k, tie, dev)
        return ids, k, tie, dev
    raise AssertionError(f"no candidate of {FP8_CANDIDATES} has its fp8 inputs {FP8_TIE_MARGIN} from a tie")


# ---------------------------------------------------------------------------
# Goldens


def float_weights(config=CONFIG):
    """The synthetic float32 state dict (HF names) of config."""
    cfg = LlamaConfig.from_dict(config)
    return synthetic_(LlamaForCausalLM(cfg), SEED).state_dict()


def quantized_names(config=CONFIG):
    return [f"model.layers.{i}.{m}" for i in range(config["num_hidden_layers"]) for m in MODULES]


def checkpoint(name, sd):
    """Scheme name's checkpoint from the float weights sd: its tensors (for
    serialize), the state dict it stands for (float64: the float tensors
    as stored, the quantized weights dequantized) and its codes' range."""
    fmt, bits, group, _, dtype = SCHEMES[name]
    quantized = quantized_names()
    tensors, state, codes_all = {}, {}, []
    for n, w in sd.items():
        w = w.to(dtype)
        mod = n[:-len(".weight")]
        if mod not in quantized:
            tensors[n] = entry(n, w)
            state[n] = w.double()
            continue
        codes, scale = quantize_weight(w, bits, group)
        codes_all.append(codes.flatten())
        out, inp = codes.shape
        if group is None:
            assert scale.shape == (out, 1)
        if fmt == "int-quantized":
            tensors[n] = entry(n, codes)
        else:
            packed = pack_int32(codes, bits)
            assert packed.shape == (out, inp * bits // 32)
            assert torch.equal(unpack_int32(packed, bits, inp), codes), n
            tensors[mod + ".weight_packed"] = entry(mod + ".weight_packed", packed)
            tensors[mod + ".weight_shape"] = entry(mod + ".weight_shape", torch.tensor(w.shape))
        tensors[mod + ".weight_scale"] = entry(mod + ".weight_scale", scale)
        g = group or inp
        deq = codes.double().reshape(out, inp // g, g) * scale.double()[..., None]
        state[n] = deq.reshape(out, inp)
    codes_all = torch.cat(codes_all)
    lo = int(codes_all.min())
    assert lo == -(1 << (bits - 1)), (name, lo)  # the full range is exercised
    stats = {"min_code": lo, "max_code": int(codes_all.max()), "min_code_count": int((codes_all == lo).sum()),
             "codes": int(codes_all.numel())}
    return tensors, state, stats


@torch.no_grad()
def forward(state, ids, act, dtype=torch.float64, config=CONFIG, fq=fake_quant_tokens):
    """The logits [N, V] of the model (of config) of state on ids, in dtype,
    each quantized module's input fake-quantized per token by fq (int8 by
    default; fake_fp8_tokens) when act; and the values those inputs
    rounded (x/s, or fl32(x·s) for fp8)."""
    model = LlamaForCausalLM(LlamaConfig.from_dict(config)).to(dtype)
    model.load_state_dict({n: w.to(dtype) for n, w in state.items()})
    vs = []
    if act:
        def pre_hook(_module, args):
            xq, v = fq(args[0])
            vs.append(v)
            return (xq,) + args[1:]
        for mod in quantized_names():
            model.get_submodule(mod).register_forward_pre_hook(pre_hook)
    return model(ids[None])[0], vs


def choose_ids(state):
    """The input ids: the first of the candidate sequences whose w8a8 inputs
    (state is w8a8's) all lie at least TIE_MARGIN code units from a rounding
    midpoint, so that a float32 run rounds them as float64 does. Returns
    the ids, the candidate's index, its closest tie and the largest
    difference of x/s between float32 and float64 runs of this model."""
    V = CONFIG["vocab_size"]
    for k in range(CANDIDATES):
        ids = torch.randint(3, V, (N_IDS,), generator=case_generator(f"llama-quant/{k}"))
        _, v64 = forward(state, ids, True)
        tie = closest_tie(v64)
        if tie < TIE_MARGIN:
            continue
        _, v32 = forward(state, ids, True, torch.float32)
        dev = max(float((a - b).abs().max()) for a, b in zip(v64, v32))
        assert tie > 2 * dev, (k, tie, dev)
        return ids, k, tie, dev
    raise AssertionError(f"no candidate of {CANDIDATES} has its w8a8 inputs {TIE_MARGIN} from a tie")


def build():
    """{repo-relative path: bytes} of every file this script writes."""
    torch.manual_seed(SEED)
    torch.set_num_threads(1)
    files = {}
    sd = float_weights()
    ckpts = {name: checkpoint(name, sd) for name in SCHEMES}
    ids, k, tie, dev = choose_ids(ckpts["w8a8"][1])
    t = Tensors({"reference": f"torch {torch.__version__}", "script": SCRIPT, "format": FORMAT})
    t.put("input_ids", ids.to(torch.int32))
    for name, (tensors, state, stats) in ckpts.items():
        fmt, bits, group, act, dtype = SCHEMES[name]
        d = f"{DIR}/{name}"
        conf = dict(CONFIG, torch_dtype=DTYPE_NAMES[dtype],
                    quantization_config=quantization_config(fmt, bits, group, act))
        files[d + "/config.json"] = (json.dumps(conf, indent=2, sort_keys=True) + "\n").encode()
        files[d + "/model.safetensors"] = serialize(tensors, {"format": "pt"})

        logits, vs = forward(state, ids, act)
        float_logits, _ = forward({n: w.to(dtype).double() for n, w in sd.items()}, ids, False)
        qerr = float((logits - float_logits).norm() / float_logits.norm())
        meta = dict(stats, dir=d, scheme=name, format=fmt, torch_dtype=DTYPE_NAMES[dtype],
                    scale_dtype=safetensors_file.ENCODINGS[dtype][0], weight_bits=bits, group_size=group,
                    seed=SEED, ids=f"candidate {k}", quant_rel_err=float(f"{qerr:.3g}"))
        if act:
            assert len(vs) == len(quantized_names()) and closest_tie(vs) == tie
            meta["inputs"] = "int8 per token, amax/127, [-127, 127], ties to even"
            meta["closest_tie"] = float(f"{tie:.3g}")
            meta["float32_deviation"] = float(f"{dev:.3g}")
        t.put(f"{name}/logits", logits)
        t.meta[name] = compact(meta)

    nsd = float_weights(NF4_CONFIG)
    tensors, state, stats = nf4_checkpoint(nsd)
    d = f"{DIR}/nf4"
    conf = dict(NF4_CONFIG, torch_dtype=DTYPE_NAMES[NF4_DTYPE], quantization_config=bnb_quantization_config())
    files[d + "/config.json"] = (json.dumps(conf, indent=2, sort_keys=True) + "\n").encode()
    files[d + "/model.safetensors"] = serialize(tensors, {"format": "pt"})
    logits, _ = forward(state, ids, False, config=NF4_CONFIG)
    float_logits, _ = forward({n: w.to(NF4_DTYPE).double() for n, w in nsd.items()}, ids, False,
                              config=NF4_CONFIG)
    qerr = float((logits - float_logits).norm() / float_logits.norm())
    meta = dict(stats, dir=d, scheme="nf4", format="bitsandbytes", torch_dtype=DTYPE_NAMES[NF4_DTYPE],
                scale_dtype="F32", weight_bits=4, group_size=NF4_BLOCK,
                intermediate_size=NF4_CONFIG["intermediate_size"], seed=SEED, ids=f"candidate {k}",
                quant_rel_err=float(f"{qerr:.3g}"))
    t.put("nf4/logits", logits)
    t.meta["nf4"] = compact(meta)

    tensors, state, stats = fp8_checkpoint(sd)
    fids, fk, ftie, fdev = choose_fp8_ids(state)
    d = f"{DIR}/fp8"
    conf = dict(CONFIG, torch_dtype=DTYPE_NAMES[FP8_DTYPE], quantization_config=fp8_quantization_config())
    files[d + "/config.json"] = (json.dumps(conf, indent=2, sort_keys=True) + "\n").encode()
    files[d + "/model.safetensors"] = serialize(tensors, {"format": "pt"})
    logits, vs = forward(state, fids, True, fq=fake_fp8_tokens)
    assert len(vs) == len(quantized_names()) and closest_fp8_tie(vs) == ftie
    float_logits, _ = forward({n: w.to(FP8_DTYPE).double() for n, w in sd.items()}, fids, False)
    qerr = float((logits - float_logits).norm() / float_logits.norm())
    meta = dict(stats, dir=d, scheme="fp8", format=FP8_FORMAT, torch_dtype=DTYPE_NAMES[FP8_DTYPE],
                scale_dtype=safetensors_file.ENCODINGS[FP8_DTYPE][0], weight_dtype="F8_E4M3", group_size=None,
                seed=SEED, ids=f"fp8 candidate {fk}", quant_rel_err=float(f"{qerr:.3g}"),
                inputs="E4M3 per token: s = fl32(448/fl32(amax)), E4M3(fl32(x*s)) * fl32(1/s), ties to even",
                closest_tie=float(f"{ftie:.3g}"), float32_deviation=float(f"{fdev:.3g}"),
                tie_unit="1 + |y|/128, y = fl32(x*s)")
    t.put("fp8/input_ids", fids.to(torch.int32))
    t.put("fp8/logits", logits)
    t.meta["fp8"] = compact(meta)
    files[DIR + "/logits.safetensors"] = t.serialize()
    return files


def main():
    return golden_files.main(__doc__, build, REPO, SCRIPT)


if __name__ == "__main__":
    sys.exit(main())
