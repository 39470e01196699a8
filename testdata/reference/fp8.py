#!/usr/bin/env python3
"""Independent reference for zbench's FP8 (E4M3, E5M2) conversions, scaled
FP8 GEMM and FP8 scaling recipes.

Writes testdata/golden/fp8.safetensors, which kernels/fp8_golden_test.go
checks kernels.E4M3ToFloat32 / E5M2ToFloat32 / E4M3FromFloat32 /
E5M2FromFloat32 against. torch 1.13 has no FP8 dtype, so every FP8 value
here comes from the bit fields of the OCP 8-bit floating point
specification (OFP8, revision 1.0), in float64, and is asserted against
the values the specification lists; nothing here is derived from the Go
implementation.

Formats (OFP8 1.0):
  E4M3  bias 7, no infinities, only S.1111.111 is NaN; max normal
        S.1111.110 = ±448, min normal S.0001.000 = 2^-6, subnormals
        S.0000.mmm = m·2^-9 (max 0.875·2^-6, min 2^-9).
  E5M2  bias 15, IEEE-like: S.11111.00 = ±Inf, S.11111.{01,10,11} NaN; max
        normal S.11110.11 = ±57344, min normal 2^-14, subnormals m·2^-16
        (max 0.75·2^-14, min 2^-16).

Encoding ("satfinite", CUDA's __nv_cvt_float_to_fp8(x, __NV_SATFINITE, ·),
cuda_fp8.hpp): round to nearest, ties to the even code, onto the finite
values; |x| beyond the largest finite value, ±Inf included, gives ±max; the
sign is kept (−0 → 0x80, a negative value rounding to zero → 0x80); NaN →
0x7f | sign bit (zbench's convention, kernels/dtype.go's encode; both are
NaN in OFP8. CUDA itself canonicalises every NaN to 0x7f, dropping the
sign: cuda_fp8.hpp replaces a NaN input by 0x7fffffff before converting).
The encoder here searches the table of values with exact float64 midpoints,
and is checked for every non-NaN input against a port of CUDA's
__nv_cvt_double_to_fp8 bit manipulation (satfinite), which agrees.

Layout of fp8.safetensors (U8 codes are the raw FP8 bytes, stored with the
safetensors dtype U8; Go reads them with Tensor.Int32):

  tensors   "<case>/<role>", by op:
    fp8_values      cases "e4m3", "e5m2": values F32 [256], the value of
                    every code 0..255 (NaN codes hold a quiet NaN with the
                    code's sign, 0x7fc00000 or 0xffc00000; 0x80 is −0)
    fp8_encode      cases "encode_e4m3", "encode_e5m2": x F32 [n], codes U8
                    [n] = the satfinite encoding of x (above). The inputs, in
                    this order: ±0; every finite code's value, both signs;
                    every midpoint between neighbouring finite values and
                    the float32 on either side of it, both signs; values
                    around half the smallest subnormal; float32 subnormals;
                    max, its float32 neighbours, the overflow midpoint (max
                    + ½ulp: 464, 61440) and its neighbours, 2·max, 1e30,
                    FLT_MAX, ±Inf; NaNs (±quiet, a signalling and a
                    payload NaN); then RANDOM values ±2^u, u uniform over
                    the metadata's "log2_range" (underflow to saturation)
    fp8_gemm        cases "gemm_<fa>_<fb>_<M>x<N>x<K>": a U8 [M, K] (format
                    fa), b U8 [N, K] (format fb), a_scale_inv F32 [1],
                    b_scale_inv F32 [1], bias F32 [N], out F32 [M, N] =
                      fl32( Σ_k (dec(a[m,k])·a_scale_inv)·(dec(b[n,k])·
                            b_scale_inv) + bias[n] )
                    computed EXACTLY (integer dot products of the codes'
                    values, rational arithmetic) and rounded once to float32,
                    ties to even. The codes are finite (no NaN, no Inf):
                    float32 normals quantized by current scaling (below).
                    An implementation in float32 (exact products of the
                    codes' values scaled after the sum, or products of the
                    dequantized values; any order of summation) differs
                    from out by at most (K+5)·2^-24·(Σ_k|a_si·b_si·dec(a)·
                    dec(b)| + |bias|) + ulp(out)/2 to first order
                    ("f32_bound"; the cases here stay under 4·2^-24 of that
                    sum with sequential float32 sums)
    delayed_scaling cases "delayed_h<L>_<algo>_m<margin>_<fmt>[_unfused]":
                    amax F32 [T] (step t's amax, with zeros, one +Inf,
                    spikes and one subnormal), scale F32 [T] (the scale step
                    t quantizes with), scale_next F32 [T] (the scale after
                    step t's update; scale[t+1] = scale_next[t])
    current_scaling cases "current_<fmt>[_zeros|_tiny]": x F32 [n], amax
                    F32 [1], scale F32 [1], scale_inv F32 [1], codes U8 [n]
    block_act       case "block_act": x F32 [M, K], codes U8 [M, K] (E4M3),
                    scales F32 [M, K/128]
    block_weight    case "block_weight": w F32 [N, K], codes U8 [N, K]
                    (E4M3), scales F32 [N/128, K/128]
  metadata  "<case>": compact JSON with "op" and the case's parameters
            ("format", "semantics" in words, sources); plus "reference"
            (torch version), "script", "seed" and "format".

Delayed scaling (Transformer Engine's DelayedScaling recipe,
transformer_engine/common/recipe/__init__.py; the update is
transformer_engine/common/recipe/delayed_scaling.cu, kernel_bulk, which
FP8GlobalStateManager.reduce_and_update_fp8_tensors calls through
tex.fused_amax_and_scale_update_after_reduction; TE commit d0067d0d):
state: amax_history F32 [L] of zeros, scale F32 = 1
(DelayedScalingRecipeState). Step t: quantizes with scale[t]; its amax a_t
is recorded in history[0]; then, at the end of the forward (or backward)
pass, the update:
  - if a_t != 0: the history is rolled one place (history[i] ← history[i+1],
    history[L-1] ← a_t, history[0] ← 0) and amax = max(history[1..L-1],
    a_t) ("max": the L most recent amaxes, a_t included) or a_t
    ("most_recent");
  - if a_t == 0 (fused path only): no roll, and amax = 0;
  - scale_next = fl32(fl32(fp8_max·2^-margin) / amax) if amax is finite and
    > 0, else the previous scale (so an Inf in a "max" window freezes the
    scale for L steps); an infinite quotient becomes FLT_MAX.
The "_unfused" case is TE's Python path (NVTE_UNFUSED_FP8_UPDATE=1, or a
callable algorithm; quantization.py _amax_and_scale_update): the same but
a zero amax IS rolled in (the history always rolls) and scale_next =
fl32(fl32(fp8_max / amax) / 2^margin).
HYBRID (the default fp8_format) is E4M3 (max 448) forward and E5M2 (max
57344) backward.

Current scaling (TE Float8CurrentScaling, defaults amax_epsilon 0,
power_2_scale False; transformer_engine/common/recipe/recipe_common.cuh
compute_scale_from_amax, cast/fp8/quantize_fp8.cuh): amax = max|x|
(float32); scale = 1 if amax is 0, Inf or NaN, else __fdiv_rn(fp8_max,
amax) (IEEE float32 division), FLT_MAX where that is Inf (float32 input);
codes[i] = satfinite(fl32(x[i]·scale)) (the product rounded to float32,
then to FP8: double rounding, as TE's kernels do); scale_inv =
__frcp_rn(scale) = fl32(1/scale).

Block quantization (DeepSeek-V3 inference/kernel.py act_quant_kernel, commit
9b4e9788, scale_fmt None): per block, amax = max(max|x_block|, fl32(1e-4))
(the clamp as it stands since commit adecc0e, 2025-08-27; the first
release, 4c2fdb8, had none, so a block of zeros divided 0 by 0), s =
fl32(amax / 448), y = fl32(x / s) (a DIVISION, not a multiplication by
1/s: "reciprocal_differs" in the metadata counts the codes that
multiplying by fl32(1/s) would change; both divisions are taken as IEEE
float32 divisions, round to nearest), code = E4M3 of y, round to nearest
even (triton's float8e4nv cast; |y| exceeds 448 by a float32 rounding at
most, so saturation cannot matter). Activations: 1×128 blocks along K.
Weights: 128×128 blocks, scales [N/128, K/128] as the checkpoints'
"weight_scale_inv", which weight_dequant multiplies back: w ≈
fl32(dec(code)·s). DeepSeek does not publish its weight quantizer; the
weight blocks here use act_quant's formula.

Deterministic: a fixed seed, one torch generator drawn in a fixed order
(cases added later draw after the earlier ones, which keep their values).
Requires torch (1.13 tested, CPU only) and numpy. Run from anywhere:

  /usr/bin/python3 testdata/reference/fp8.py            # write the golden
  /usr/bin/python3 testdata/reference/fp8.py --check    # verify it is current
"""

import json
import math
import os
import struct
import sys
from fractions import Fraction

import numpy as np
import torch

import golden_files
from safetensors_file import entry, serialize

SEED = 20270114
SCRIPT = "testdata/reference/fp8.py"
FORMAT = "zbench-golden/1: tensors <case>/<role>, metadata <case> = JSON params"
REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
GOLDEN = "testdata/golden/fp8.safetensors"

FLT_MAX = float(np.finfo(np.float32).max)
TE_COMMIT = "d0067d0da6cb01811b8072a7d304f0e00344ce2b"
DEEPSEEK_COMMIT = "9b4e9788e4a3a731f7567338ed15d3ec549ce03b"
OFP8 = "OCP 8-bit Floating Point Specification (OFP8) v1.0"
# The roles that may hold non-finite float32 values.
NONFINITE_ROLES = {"values", "x", "amax"}


class Golden:
    """Collects cases and serializes them as one safetensors file."""

    def __init__(self, seed):
        self.seed = seed
        self.tensors = {}  # name -> (st dtype, shape, bytes)
        self.params = {}  # case -> params dict

    def case(self, name, params, tensors):
        assert name not in self.params and "/" not in name and "op" in params, name
        self.params[name] = params
        for role, t in tensors.items():
            key = f"{name}/{role}"
            assert key not in self.tensors, key
            assert t.dtype in (torch.float32, torch.int32, torch.uint8), (key, t.dtype)
            if t.dtype == torch.float32 and role not in NONFINITE_ROLES:
                assert torch.isfinite(t).all(), key
            self.tensors[key] = entry(key, t)

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
# The formats


class Fmt:
    """An OFP8 format: name, exponent and mantissa bits, bias, whether the
    all-ones exponent is Inf/NaN (E5M2) or only S.1111.111 is NaN (E4M3)."""

    def __init__(self, name, ebits, mbits, bias, ieee):
        self.name, self.ebits, self.mbits, self.bias, self.ieee = name, ebits, mbits, bias, ieee
        self.values = np.array([self.decode(c) for c in range(256)], dtype=np.float64)
        finite = [c for c in range(0x80) if math.isfinite(self.values[c])]
        # The finite non-negative codes are 0..maxcode, increasing.
        self.maxcode = max(finite)
        assert finite == list(range(self.maxcode + 1)), name
        self.pos = self.values[: self.maxcode + 1]
        assert (np.diff(self.pos) > 0).all(), name
        self.max = float(self.pos[-1])

    def decode(self, code):
        """The value of code, from its bit fields, in float64."""
        sign = -1.0 if code & 0x80 else 1.0
        e = (code >> self.mbits) & ((1 << self.ebits) - 1)
        m = code & ((1 << self.mbits) - 1)
        top = (1 << self.ebits) - 1
        if self.ieee and e == top:
            return sign * math.inf if m == 0 else math.nan
        if not self.ieee and e == top and m == (1 << self.mbits) - 1:
            return math.nan
        if e == 0:  # subnormal: 0.m · 2^(1-bias)
            return sign * math.ldexp(m, 1 - self.bias - self.mbits)
        return sign * math.ldexp((1 << self.mbits) + m, e - self.bias - self.mbits)

    def encode(self, x):
        """The satfinite codes (uint8 array) of the float64 values x (each a
        float32): round to nearest, ties to the even code, by searching the
        table with exact midpoints; saturation to ±max; NaN → 0x7f|sign."""
        x = np.asarray(x, dtype=np.float64)
        sign = np.where(np.signbit(x), 0x80, 0).astype(np.int64)
        a = np.abs(x)
        nan = np.isnan(a)
        a = np.where(nan, 0.0, np.minimum(a, self.max))
        i = np.searchsorted(self.pos, a, side="right") - 1  # pos[i] <= a
        hi = np.minimum(i + 1, self.maxcode)
        lo_v, hi_v = self.pos[i], self.pos[hi]
        mid = (lo_v + hi_v) / 2  # exact: both have at most 4 significant bits
        code = np.where(a == lo_v, i,
                        np.where(a < mid, i, np.where(a > mid, hi, np.where(i % 2 == 0, i, hi))))
        code = np.where(nan, 0x7f, code) | sign
        return code.astype(np.uint8)


E4M3 = Fmt("e4m3", 4, 3, 7, False)
E5M2 = Fmt("e5m2", 5, 2, 15, True)
FORMATS = {"e4m3": E4M3, "e5m2": E5M2}


def check_spec():
    """Asserts the tables against the values OFP8 v1.0 lists."""
    e, f = E4M3.values, E5M2.values
    # E4M3: max normal S.1111.110, min normal S.0001.000, subnormals.
    assert e[0x7e] == 448.0 and e[0xfe] == -448.0 and E4M3.max == 448.0 and E4M3.maxcode == 0x7e
    assert e[0x08] == 2.0**-6 and e[0x01] == 2.0**-9 and e[0x07] == 0.875 * 2.0**-6
    assert e[0x38] == 1.0 and e[0xb8] == -1.0 and e[0x40] == 2.0 and e[0x30] == 0.5
    assert e[0x00] == 0.0 and not math.copysign(1, e[0x00]) < 0 and math.copysign(1, e[0x80]) < 0
    assert [c for c in range(256) if math.isnan(e[c])] == [0x7f, 0xff]
    assert not np.isinf(e).any()
    assert e[0x78] == 256.0 and e[0x77] == 240.0  # S.1111.000, S.1110.111
    # E5M2: max normal S.11110.11, min normal S.00001.00, subnormals, Inf, NaN.
    assert f[0x7b] == 57344.0 and f[0xfb] == -57344.0 and E5M2.max == 57344.0 and E5M2.maxcode == 0x7b
    assert f[0x04] == 2.0**-14 and f[0x01] == 2.0**-16 and f[0x03] == 0.75 * 2.0**-14
    assert f[0x3c] == 1.0 and f[0xbc] == -1.0 and f[0x40] == 2.0 and f[0x38] == 0.5
    assert f[0x7c] == math.inf and f[0xfc] == -math.inf
    assert [c for c in range(256) if math.isnan(f[c])] == [0x7d, 0x7e, 0x7f, 0xfd, 0xfe, 0xff]
    assert math.copysign(1, f[0x80]) < 0
    # 127 and 124 finite non-negative codes (0 included).
    assert E4M3.maxcode + 1 == 127 and E5M2.maxcode + 1 == 124


def cuda_cvt_double_to_fp8(x, fmt):
    """A port of cuda_fp8.hpp's __nv_cvt_double_to_fp8(x, __NV_SATFINITE,
    fmt) for a non-NaN x, used only to check Fmt.encode."""
    (xbits,) = struct.unpack("<Q", struct.pack("<d", x))
    if fmt is E4M3:
        bias, sig_bits, mmask = 7, 4, 0x7
        mindenorm_o2, overflow, maxnorm, minnorm = 0x3F50000000000000, 0x407D000000000000, 0x7E, 0x3F90000000000000
    else:
        bias, sig_bits, mmask = 15, 3, 0x3
        mindenorm_o2, overflow, maxnorm, minnorm = 0x3EE0000000000000, 0x40EE000000000000 - 1, 0x7B, 0x3F10000000000000
    half_ulp = 1 << (53 - sig_bits - 1)
    sign = ((xbits >> 63) << 7) & 0xFF
    exp = ((((xbits >> 52) & 0x7FF) - 1023 + bias) & 0xFFFF) & 0xFF
    mantissa = (xbits >> (53 - sig_bits)) & mmask
    absx = xbits & 0x7FFFFFFFFFFFFFFF
    assert absx <= 0x7FF0000000000000, "NaN"
    if absx <= mindenorm_o2:
        res = 0
    elif absx > overflow:
        res = maxnorm
    elif absx >= minnorm:
        res = ((exp << (sig_bits - 1)) | mantissa) & 0xFF
        rnd = xbits & ((half_ulp << 1) - 1)
        if rnd > half_ulp or (rnd == half_ulp and mantissa & 1):
            res = (res + 1) & 0xFF
    else:
        shift = (1 - exp) & 0xFF
        mantissa |= 1 << (sig_bits - 1)
        res = mantissa >> shift
        rnd = (xbits | (1 << 52)) & ((half_ulp << (shift + 1)) - 1)
        if rnd > (half_ulp << shift) or (rnd == (half_ulp << shift) and res & 1):
            res = (res + 1) & 0xFF
    return res | sign


def f32(x):
    """x (array-like of float64 or float32) as a float32 numpy array."""
    return np.asarray(x, dtype=np.float32)


def f32bits(bits):
    """The float32 with the given bits, as a Python float."""
    return float(np.array([bits], dtype=np.uint32).view(np.float32)[0])


def nextup(x, direction):
    """The float32 after x (a float32 value) towards direction (±inf)."""
    return float(np.nextafter(np.float32(x), np.float32(direction), dtype=np.float32))


def round_f32(q):
    """The float32 nearest the rational q, ties to even (exact)."""
    d = np.float32(float(q))  # at most one float32 step from the answer
    cands = {float(d)}
    for direction in (math.inf, -math.inf):
        n = nextup(d, direction)
        if math.isfinite(n):
            cands.add(n)
    best = None
    for c in sorted(cands):
        err = abs(Fraction(c) - q)
        if best is None or err < best[0]:
            best = (err, c)
        elif err == best[0]:
            even = int(np.array([c], dtype=np.float32).view(np.uint32)[0]) & 1 == 0
            if even:
                best = (err, c)
    return np.float32(best[1])


# ---------------------------------------------------------------------------
# Cases


def values_case(g, fmt):
    vals = f32(fmt.values)
    bits = vals.view(np.uint32).copy()
    for c in range(256):
        if math.isnan(fmt.values[c]):
            bits[c] = 0xffc00000 if c & 0x80 else 0x7fc00000
    vals = bits.view(np.float32)
    assert (vals.astype(np.float64)[np.isfinite(fmt.values)] == fmt.values[np.isfinite(fmt.values)]).all()
    g.case(fmt.name, {"op": "fp8_values", "format": fmt.name, "spec": OFP8, "bias": fmt.bias,
                      "exponent_bits": fmt.ebits, "mantissa_bits": fmt.mbits, "max": fmt.max,
                      "nan_codes": [c for c in range(256) if math.isnan(fmt.values[c])],
                      "inf_codes": [c for c in range(256) if math.isinf(fmt.values[c])]},
           {"values": torch.from_numpy(vals.copy())})


def encode_inputs(fmt, gen, n_random, log2_range):
    """The float32 inputs of an encode case (see the docstring) and how
    many of them are the fixed, non-random ones."""
    xs = [0.0, -0.0]
    pos = [float(v) for v in fmt.pos]
    xs += pos + [-v for v in pos]
    for lo, hi in zip(pos, pos[1:]):
        mid = (lo + hi) / 2
        assert float(np.float32(mid)) == mid
        for v in (mid, nextup(mid, -math.inf), nextup(mid, math.inf)):
            xs += [v, -v]
    tiny = pos[1] / 2  # half the smallest subnormal: a tie with 0
    for v in (tiny, nextup(tiny, -math.inf), nextup(tiny, math.inf), tiny * 1.5, pos[1] * 1.5,
              f32bits(0x00000001), f32bits(0x00400000), f32bits(0x007fffff), 1e-30):
        xs += [v, -v]
    mx = fmt.max
    ulp = mx - pos[-2]
    over = mx + ulp / 2  # the overflow midpoint: 464, 61440
    for v in (mx, nextup(mx, -math.inf), nextup(mx, math.inf), over, nextup(over, -math.inf),
              nextup(over, math.inf), mx - ulp / 2, 2 * mx, 1e30, FLT_MAX, math.inf):
        xs += [v, -v]
    n_fixed = len(xs) + 4
    u = torch.rand(n_random, generator=gen, dtype=torch.float64) * (log2_range[1] - log2_range[0]) + log2_range[0]
    s = torch.where(torch.rand(n_random, generator=gen) < 0.5, -1.0, 1.0).double()
    rnd = (s * torch.pow(2.0, u)).float().numpy()
    # The NaNs (±quiet, signalling, negative with a payload) are written
    # by their bits: a Python float could quiet the signalling one.
    nan_bits = np.array([0x7fc00000, 0xffc00000, 0x7f800001, 0xff812345], dtype=np.uint32)
    x = np.concatenate([f32(xs), nan_bits.view(np.float32), rnd])
    return x, n_fixed


def encode_case(g, fmt, gen, n_random, log2_range):
    x, n_fixed = encode_inputs(fmt, gen, n_random, log2_range)
    with np.errstate(invalid="ignore"):  # the signalling NaNs
        x64 = x.astype(np.float64)
    codes = fmt.encode(x64)
    for xi, c in zip(x64.tolist(), codes.tolist()):
        if math.isnan(xi):
            assert c & 0x7f == 0x7f
            continue
        assert cuda_cvt_double_to_fp8(xi, fmt) == c, (fmt.name, xi, c)
    g.case(f"encode_{fmt.name}", {
        "op": "fp8_encode", "format": fmt.name,
        "semantics": "round to nearest, ties to even code; |x| > max (Inf too) saturates to the signed max "
                     "(CUDA __nv_cvt_float_to_fp8 with __NV_SATFINITE); sign kept (-0 -> 0x80); "
                     "NaN -> 0x7f | sign bit",
        "nan": "0x7f|sign (zbench); CUDA's satfinite conversion gives 0x7f for every NaN",
        "n_fixed": n_fixed, "log2_range": list(log2_range), "codes_dtype": "U8",
        "checked_against": "cuda_fp8.hpp __nv_cvt_double_to_fp8 (ported), every non-NaN input"},
        {"x": torch.from_numpy(x.copy()), "codes": torch.from_numpy(codes)})


def current_quantize(x, fmt):
    """TE current scaling of float32 x into fmt: (amax, scale, scale_inv,
    codes, codes of the exact product), all float32 arithmetic as TE's."""
    amax = np.float32(np.abs(x).max()) if x.size else np.float32(0)
    if amax == 0 or not np.isfinite(amax):
        scale = np.float32(1)
    else:
        with np.errstate(over="ignore"):
            scale = np.float32(np.float32(fmt.max) / amax)  # __fdiv_rn
        if np.isinf(scale):
            scale = np.float32(FLT_MAX)
    scale_inv = np.float32(np.float32(1) / scale)  # __frcp_rn
    y = (x * scale).astype(np.float32)  # fl32(x·scale)
    codes = fmt.encode(y.astype(np.float64))
    exact = fmt.encode(x.astype(np.float64) * float(scale))  # no float32 rounding of the product
    return amax, scale, scale_inv, codes, exact


def current_case(g, name, fmt, x, dist):
    amax, scale, scale_inv, codes, exact = current_quantize(x, fmt)
    g.case(name, {
        "op": "current_scaling", "format": fmt.name, "fp8_max": fmt.max, "dist": dist,
        "semantics": "amax = max|x|; scale = 1 if amax is 0/Inf/NaN else fl32(fp8_max / amax) "
                     "(__fdiv_rn), FLT_MAX if that overflows; codes = satfinite(fl32(x * scale)); "
                     "scale_inv = fl32(1 / scale) (__frcp_rn); margin 0, amax_epsilon 0, no power-of-2 scale",
        "source": f"TransformerEngine {TE_COMMIT[:8]} common/recipe/recipe_common.cuh compute_scale_from_amax, "
                  "common/cast/fp8/quantize_fp8.cuh",
        "double_rounding_differs": int((codes != exact).sum())},
        {"x": torch.from_numpy(x.copy()), "amax": torch.tensor([float(amax)], dtype=torch.float32),
         "scale": torch.tensor([float(scale)], dtype=torch.float32),
         "scale_inv": torch.tensor([float(scale_inv)], dtype=torch.float32),
         "codes": torch.from_numpy(codes)})


def gemm_case(g, fa, fb, m, n, k, gen):
    xa = (torch.randn(m, k, generator=gen) * 2.0).numpy()
    xb = (torch.randn(n, k, generator=gen) * 0.05).numpy()
    bias = (torch.randn(n, generator=gen) * 0.5).numpy()
    _, _, a_si, a, _ = current_quantize(xa, fa)
    _, _, b_si, b, _ = current_quantize(xb, fb)
    for f, c in ((fa, a), (fb, b)):
        assert np.isfinite(f.values[c]).all()
    # Integer images of the codes' values: value = int · 2^-shift.
    def ints(fmt, c):
        shift = fmt.bias - 1 + fmt.mbits  # the smallest subnormal is 2^-shift
        v = fmt.values[c] * 2.0**shift
        assert (v == np.round(v)).all() and np.abs(v).max() < 2**40
        return v.astype(np.int64), shift
    ai, sha = ints(fa, a)
    bi, shb = ints(fb, b)
    dot = ai @ bi.T  # exact in int64: |terms| < 2^51, K <= 256
    assert np.abs(dot).max() < 2**62
    coef = Fraction(float(a_si)) * Fraction(float(b_si)) / 2**(sha + shb)
    out = np.empty((m, n), dtype=np.float32)
    for i in range(m):
        for j in range(n):
            out[i, j] = round_f32(coef * int(dot[i, j]) + Fraction(float(bias[j])))
    # The float64 evaluation agrees to within float64 rounding.
    approx = (fa.values[a] * float(a_si)) @ (fb.values[b] * float(b_si)).T + bias.astype(np.float64)
    assert np.allclose(out, approx, rtol=2**-23, atol=0)
    name = f"gemm_{fa.name}_{fb.name}_{m}x{n}x{k}"
    g.case(name, {
        "op": "fp8_gemm", "a_format": fa.name, "b_format": fb.name, "m": m, "n": n, "k": k,
        "semantics": "out[m,n] = fl32(sum_k (dec(a[m,k])*a_scale_inv) * (dec(b[n,k])*b_scale_inv) + bias[n]), "
                     "exact, rounded once to float32 (ties to even); a [M,K], b [N,K] (out = A B^T)",
        "f32_bound": "float32 evaluation (exact code products scaled after the sum, or products of "
                     "dequantized values; any summation order): |out' - out| <= (K+5)*2^-24*"
                     "(sum_k |a_scale_inv*b_scale_inv*dec(a)*dec(b)| + |bias|) + ulp(out)/2",
        "inputs": "a = current-scaled randn*2 (a_scale_inv = 1/scale), b = current-scaled randn*0.05, "
                  "bias randn*0.5; all codes finite"},
        {"a": torch.from_numpy(a), "b": torch.from_numpy(b),
         "a_scale_inv": torch.tensor([float(a_si)], dtype=torch.float32),
         "b_scale_inv": torch.tensor([float(b_si)], dtype=torch.float32),
         "bias": torch.from_numpy(bias.copy()), "out": torch.from_numpy(out)})


def delayed_scales(amaxes, fmt_max, length, algo, margin, fused):
    """TE's delayed scaling over the amax sequence: the scale each step
    quantizes with and the scale after its update (float32 arrays)."""
    hist = [np.float32(0)] * length
    scale = np.float32(1)
    used, nxt = [], []
    scaled_max = np.float32(fmt_max * 2.0**-margin)
    for a in amaxes:
        a = np.float32(a)
        used.append(scale)
        hist[0] = a  # the quantizer writes the step's amax to history[0]
        if fused:
            # delayed_scaling.cu kernel_bulk
            amax = np.float32(0)
            if a != 0:
                window = hist[1:] + [a]
                amax = max(window)  # fmaxf; no NaN here
                hist = [np.float32(0)] + hist[2:] + [a] if length > 1 else [np.float32(0)]
            if algo == "most_recent":
                amax = a
            with np.errstate(over="ignore", divide="ignore"):
                s = np.float32(scaled_max / amax) if np.isfinite(amax) and amax > 0 else scale
        else:
            # quantization.py _amax_and_scale_update
            amax = max(hist) if algo == "max" else hist[0]
            hist = (hist[1:] + hist[:1]) if length > 1 else hist
            hist[0] = np.float32(0)
            with np.errstate(over="ignore", divide="ignore", invalid="ignore"):
                s = np.float32(np.float32(np.float32(fmt_max) / amax) / np.float32(2.0**margin))
            if not (amax > 0 and np.isfinite(amax)):
                s = scale
        if np.isinf(s):
            s = np.float32(FLT_MAX)
        scale = np.float32(s)
        nxt.append(scale)
    return np.array(used, dtype=np.float32), np.array(nxt, dtype=np.float32)


def amax_sequence(t, base, gen):
    """T float32 amaxes: a drifting log-normal level around base, spikes at
    20 (x30) and 100 (x80), zeros at 1, 40, 41 and 125, +Inf at 140 and a
    float32 subnormal at 130 (whose scale overflows to FLT_MAX)."""
    level = torch.exp(torch.randn(t, generator=gen, dtype=torch.float64) * 0.3)
    drift = torch.linspace(1.0, 0.5, t, dtype=torch.float64)
    a = (level * drift * base).float().numpy()
    a[20] *= 30
    a[100] *= 80
    for z in (1, 40, 41, 125):
        a[z] = 0
    a[130] = np.float32(1e-39)
    a[140] = np.inf
    return a


def delayed_case(g, fmt, length, algo, margin, amaxes, fused=True):
    used, nxt = delayed_scales(amaxes, fmt.max, length, algo, margin, fused)
    algo_short = "max" if algo == "max" else "recent"
    name = f"delayed_h{length}_{algo_short}_m{margin}_{fmt.name}" + ("" if fused else "_unfused")
    assert (used[1:] == nxt[:-1]).all() and used[0] == 1
    extra = {}
    if not fused:
        _, fused_nxt = delayed_scales(amaxes, fmt.max, length, algo, margin, True)
        extra["scale_next_differs_from_fused_at"] = np.nonzero(nxt != fused_nxt)[0].tolist()
        assert extra["scale_next_differs_from_fused_at"], "the unfused case must show the zero-amax difference"
    g.case(name, {**extra,
        "op": "delayed_scaling", "format": fmt.name, "fp8_max": fmt.max, "amax_history_len": length,
        "amax_compute_algo": algo, "margin": margin, "fused": fused, "steps": len(amaxes),
        "initial": "amax_history zeros [L], scale 1",
        "order": "step t quantizes with scale[t]; a_t goes to history[0]; the update then gives "
                 "scale_next[t] = scale[t+1]",
        "update": ("fused (default): if a_t != 0 roll (history[i] <- history[i+1], history[L-1] <- a_t, "
                   "history[0] <- 0) and amax = max of the L most recent amaxes (max) or a_t (most_recent); "
                   "if a_t == 0 no roll and amax = 0; scale = fl32(fl32(fp8_max*2^-margin) / amax) if amax "
                   "finite and > 0, else kept; Inf -> FLT_MAX") if fused else
                  ("unfused (NVTE_UNFUSED_FP8_UPDATE=1): amax = max(history) (max) or history[0] "
                   "(most_recent); the history always rolls (a zero amax too) and history[0] <- 0; "
                   "scale = fl32(fl32(fp8_max / amax) / 2^margin) if amax finite and > 0, else kept; "
                   "Inf -> FLT_MAX"),
        "source": f"TransformerEngine {TE_COMMIT[:8]} common/recipe/delayed_scaling.cu "
                  + ("kernel_bulk" if fused else "(pytorch/quantization.py _amax_and_scale_update)")},
        {"amax": torch.from_numpy(amaxes.copy()), "scale": torch.from_numpy(used),
         "scale_next": torch.from_numpy(nxt)})


CLAMP = np.float32(1e-4)


def block_quantize(x):
    """DeepSeek-V3 act_quant of one block (float32 array): (codes, s, codes
    with x·fl32(1/s) instead of x/s)."""
    amax = np.maximum(np.float32(np.abs(x).max()), CLAMP)
    s = np.float32(amax / np.float32(448))
    y = (x / s).astype(np.float32)
    codes = E4M3.encode(y.astype(np.float64))
    recip = E4M3.encode((x * np.float32(np.float32(1) / s)).astype(np.float32).astype(np.float64))
    return codes, s, recip


def plant_ties(row, k):
    """Replaces the first values of row (float32, one 1×128 block, amax
    kept) by up to k values beside E4M3 rounding midpoints that round
    differently as x·fl32(1/s) than as x/s, s the block's scale."""
    amax = np.maximum(np.float32(np.abs(row).max()), CLAMP)
    s = np.float32(amax / np.float32(448))
    inv = np.float32(np.float32(1) / s)
    found = []
    for lo, hi in zip(E4M3.pos[8:], E4M3.pos[9:]):  # normal midpoints
        x0 = np.float32(np.float32((lo + hi) / 2) * s)
        for step in range(-4, 5):
            x = x0
            for _ in range(abs(step)):
                x = np.nextafter(x, np.float32(np.inf if step > 0 else -np.inf), dtype=np.float32)
            if abs(x) >= amax:
                continue
            a = E4M3.encode([float(np.float32(x / s))])[0]
            b = E4M3.encode([float(np.float32(x * inv))])[0]
            if a != b:
                found.append(x)
                break
        if len(found) == k:
            break
    row[: len(found)] = np.array(found, dtype=np.float32) * np.where(np.arange(len(found)) % 2, -1, 1).astype(np.float32)
    return len(found)


def block_case(g, name, op, x, rows, cols):
    n_r, n_c = x.shape[0] // rows, x.shape[1] // cols
    codes = np.zeros(x.shape, dtype=np.uint8)
    scales = np.zeros((n_r, n_c), dtype=np.float32)
    differs = 0
    for i in range(n_r):
        for j in range(n_c):
            blk = x[i * rows:(i + 1) * rows, j * cols:(j + 1) * cols]
            c, s, r = block_quantize(blk)
            codes[i * rows:(i + 1) * rows, j * cols:(j + 1) * cols] = c
            scales[i, j] = s
            differs += int((c != r).sum())
    role = "x" if op == "block_act" else "w"
    g.case(name, {
        "op": op, "format": "e4m3", "block": [rows, cols],
        "semantics": "per block: amax = max(max|x_block|, fl32(1e-4)); s = fl32(amax / 448); "
                     "codes = satfinite(fl32(x / s)) (divided by s); scales[block] = s (dequantize: x ~ dec(code) * s)",
        "source": f"deepseek-ai/DeepSeek-V3 {DEEPSEEK_COMMIT[:8]} inference/kernel.py act_quant_kernel"
                  + ("" if op == "block_act" else "; weight_dequant multiplies by weight_scale_inv = s"),
        "reciprocal_differs": differs},
        {role: torch.from_numpy(x.copy()), "codes": torch.from_numpy(codes), "scales": torch.from_numpy(scales)})
    return differs


def build():
    """{repo-relative path: bytes} of the file this script writes."""
    torch.set_num_threads(1)
    torch.use_deterministic_algorithms(True)
    check_spec()
    gen = torch.Generator().manual_seed(SEED)
    g = Golden(SEED)
    for fmt in (E4M3, E5M2):
        values_case(g, fmt)
    encode_case(g, E4M3, gen, 2000, (-14.0, 12.0))
    encode_case(g, E5M2, gen, 2000, (-20.0, 19.0))

    for fa, fb in ((E4M3, E4M3), (E4M3, E5M2)):
        for m, n, k in ((7, 33, 48), (32, 64, 256)):
            gemm_case(g, fa, fb, m, n, k, gen)

    t = 160
    act = amax_sequence(t, 3.0, gen)
    grad = amax_sequence(t, 3e-3, gen)
    delayed_case(g, E4M3, 16, "max", 0, act)
    delayed_case(g, E4M3, 1024, "max", 1, act)
    delayed_case(g, E4M3, 4, "most_recent", 0, act)
    delayed_case(g, E4M3, 16, "max", 0, act, fused=False)
    delayed_case(g, E5M2, 16, "max", 0, grad)

    x = (torch.randn(1000, generator=gen) * 3).numpy()
    x[17] = np.float32(41.5)
    current_case(g, "current_e4m3", E4M3, x, "randn*3, one outlier 41.5")
    mag = torch.exp(torch.randn(1000, generator=gen) * 3) * 1e-4
    sgn = torch.where(torch.rand(1000, generator=gen) < 0.5, -1.0, 1.0)
    x = (mag * sgn).numpy()
    current_case(g, "current_e5m2", E5M2, x, "gradient-like: ±1e-4·exp(3·randn)")
    x = np.array([0.0, -0.0] * 4, dtype=np.float32)
    current_case(g, "current_e4m3_zeros", E4M3, x, "zeros and negative zeros (amax 0: scale 1)")
    x = (torch.randn(16, generator=gen) * 3e-41).numpy()
    current_case(g, "current_e4m3_tiny", E4M3, x, "float32 subnormals (scale overflows: FLT_MAX)")

    # Activations [4, 512]: 1×128 blocks; row 2's first block zeros (the
    # clamp), its second tiny (amax below 1e-4), row 1 with an outlier, row
    # 3 large.
    xa = torch.randn(4, 512, generator=gen).numpy()
    xa[1, 200] = 90.0
    xa[2, :128] = 0.0
    xa[2, 128:256] *= np.float32(1e-5)
    xa[3] *= np.float32(1e3)
    for j in range(4):  # row 0: values beside rounding midpoints
        plant_ties(xa[0, j * 128:(j + 1) * 128], 12)
    differs = block_case(g, "block_act", "block_act", xa, 1, 128)
    assert differs > 0, "no reciprocal differences in block_act"
    # Weights [256, 256]: 128×128 blocks of different magnitudes.
    w = torch.randn(256, 256, generator=gen).numpy() * np.float32(0.02)
    w[:128, 128:] *= np.float32(10)
    w[128:, :128] *= np.float32(0.01)
    w[200, 7] = np.float32(1.5)
    assert all(np.abs(w[i:i + 128, j:j + 128]).max() > CLAMP for i in (0, 128) for j in (0, 128))
    block_case(g, "block_weight", "block_weight", w, 128, 128)
    return {GOLDEN: g.serialize()}


def main():
    return golden_files.main(__doc__, build, REPO, SCRIPT)


if __name__ == "__main__":
    sys.exit(main())
