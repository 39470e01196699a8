#!/usr/bin/env python3
"""Independent PyTorch reference for zbench's INT8 post-training
quantization on the host (package models/quant).

Writes testdata/golden/quant.safetensors, which models/quant/golden_test.go
checks the percentile, entropy and mse observers and the weight
quantization against. The semantics follow kernels/quant.go (symmetric,
narrow range [-127, 127], scale = amax/127, zero point 0) and torch's own
functions; nothing here is derived from the Go implementation.

The entropy and mse cases follow NVIDIA pytorch-quantization's
HistogramCalibrator (calib/histogram.py: _compute_amax_entropy and
_compute_amax_mse, 8 bits signed, stride 1, start bin 128), written anew
in float64 numpy, except where models/quant documents a definition of its
own, which is then followed instead:

  - the histogram (models/quant/histogram.go, Histogram): "bins" equal
    bins of |x| over [0, R), R the smallest power of two above the largest
    |x| (pytorch-quantization: over [0, amax] of the first batch, extended
    by bins of the same width as larger values arrive); when R grows, bins
    merge in pairs, which makes it the histogram of all values at once;
  - the thresholds searched: edges and centres of bins of that histogram,
    the smallest at bin 128 as there, and the amax returned capped at the
    largest |x| (the top of the power-of-two range is empty);
  - mse's error at candidate a: Σ c_j·(s·clamp(round(x_j/s), -127, 127)
    − x_j)², x_j bin j's centre, s = a/127, in float64, ties to even
    (pytorch-quantization: the mean of the same in float32 with
    x_j·(127/a), round then divide), the first smallest winning as with
    np.argmin.

entropy is NVIDIA's as it stands: bin 0's count replaced by bin 1's; for
each i, P the first i counts with the rest added to the last, Q those
counts spread evenly over the non-empty bins of each of 128 levels (bin j
in the level k with k·i/128 <= j < (k+1)·i/128, as np.digitize over
np.linspace(0, i, 129)), KL(P‖Q) as scipy.stats.entropy computes it
(normalised; infinite where Q is 0 and P not); the last smallest wins, and
the threshold is bin i's upper edge i·R/bins.

Layout of quant.safetensors:

  tensors   "<case>/<role>", by op:
              percentile    batch0 … batch<B-1>: F32 [n_b], the calibration
                            batches (signed activation values, of unequal
                            lengths) in the order a caller observes them;
                            out: F32 [len(percentiles)], torch.quantile(
                            cat(batches).abs(), p / 100) for each p (q a
                            Python float, so torch rounds it to float32;
                            default linear interpolation)
              per_channel   w: F32 [N, K]; scale: F32 [N] = w.abs().amax(1)
                            / 127 (float32); q: I32 [N, K], the int8 values
                            of torch.quantize_per_channel(w, scale, zero
                            points 0, axis 0, torch.qint8).int_repr(); fake:
                            F32 [N, K], torch.fake_quantize_per_channel_
                            affine(w, scale, zero points 0, axis 0, -127,
                            127)
              per_tensor    x: F32 [N, K]; scale: F32 [1] = x.abs().max() /
                            127; q: I32 [N, K] from torch.quantize_per_
                            tensor(x, scale, 0, torch.qint8).int_repr();
                            fake: F32 [N, K], torch.fake_quantize_per_
                            tensor_affine(x, scale, 0, -127, 127)
              entropy, mse  batch0 … batch<B-1>: F32 [n_b], as for
                            percentile; counts: I64 [bins], the histogram
                            of |x| over every batch (above); out: F32 [1],
                            the amax: min(threshold, largest |x|) rounded
                            to float32, the threshold i·R/bins (entropy)
                            or (i+½)·R/bins (mse) of the chosen bin i
  metadata  "<case>": compact JSON with "op" and
              percentile    "dist" (how the values were drawn), "batches",
                            "percentiles" ([50, 99, 99.9, 99.99, 100])
              per_channel, per_tensor
                            "quant_min" -127, "quant_max" 127, "axis" (0, or
                            null per tensor), "dist", and
                            "reciprocal_differs": how many elements round
                            differently as x·(1/s) (torch's CPU quantizers
                            multiply by the float32 reciprocal) than as x/s
                            (kernels.QuantizeValue), counted here in numpy
                            float32; the per_channel_ties case is built so
                            that some do
              entropy, mse  "dist" ("gaussian", "laplace_outliers" as for
                            percentile, or "relu_growing": a ReLU's output
                            whose scale triples from batch to batch),
                            "batches", "bins" (2048, or 512),
                            "range" (R) and "bin" (the chosen i); a case is
                            kept only if no other candidate comes within a
                            relative 1e-9 of its divergence or error, so
                            that float rounding cannot change the winner
            plus "reference" (torch version), "script", "seed" and
            "format".

The file is written in the safetensors format by safetensors_file.py here
(the python safetensors package is not needed). Deterministic: a fixed seed,
one thread, every case drawn from one seeded stream in a fixed order
(cases added later draw after the earlier ones, which keep their values).
Requires torch (1.13 tested, CPU only) and numpy, not scipy. Run from
anywhere:

  /usr/bin/python3 testdata/reference/quant.py            # write the golden
  /usr/bin/python3 testdata/reference/quant.py --check    # verify it is current
"""

import json
import math
import os
import sys

import numpy as np
import torch

import golden_files
from safetensors_file import entry, serialize

SEED = 20261210
SCRIPT = "testdata/reference/quant.py"
FORMAT = "zbench-golden/1: tensors <case>/<role>, metadata <case> = JSON params"
REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
GOLDEN = "testdata/golden/quant.safetensors"

PERCENTILES = [50.0, 99.0, 99.9, 99.99, 100.0]
# Unequal batch lengths, so that a reader checks streaming, not one block.
BATCH_LENGTHS = [2500, 3100, 2048, 3333, 4000]
QMIN, QMAX = -127, 127

# The histogram cases: their batch lengths (unequal, as above), and the
# KL and MSE searches' parameters (pytorch-quantization's defaults for
# 8 bits, signed): thresholds from bin 128 on, stride 1, and 128
# quantized levels of |x|.
HIST_BATCH_LENGTHS = [1500, 4096, 777, 3000, 2600]
START_BIN = 128
LEVELS = 1 << (8 - 1)
# The least relative margin by which a histogram case's chosen threshold
# must beat every other candidate (see margin).
MIN_MARGIN = 1e-9


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
            assert t.dtype in (torch.float32, torch.int32, torch.int64), (key, t.dtype)
            if t.dtype == torch.float32:
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
# Inputs


def draw(dist, n, gen):
    """n float32 activation values of the named distribution."""
    if dist == "uniform":
        return torch.rand(n, generator=gen) * 6 - 3
    if dist == "gaussian":
        return torch.randn(n, generator=gen)
    if dist == "relu_gaussian":
        # Half exact zeros: what a ReLU's output looks like.
        return torch.relu(torch.randn(n, generator=gen) * 2)
    if dist == "laplace_outliers":
        # Laplace(0, 1) by inversion, and three large outliers per batch.
        u = torch.rand(n, generator=gen) * 0.999998 + 0.000001 - 0.5
        x = -torch.sign(u) * torch.log1p(-2 * u.abs())
        idx = torch.randperm(n, generator=gen)[:3]
        x[idx] = (torch.rand(3, generator=gen) * 40 + 40) * torch.sign(torch.rand(3, generator=gen) - 0.5)
        return x.to(torch.float32)
    raise ValueError(dist)


def percentile_case(g, dist, gen):
    batches = [draw(dist, n, gen) for n in BATCH_LENGTHS]
    a = torch.cat(batches).abs()
    out = torch.stack([torch.quantile(a, p / 100) for p in PERCENTILES])
    # torch.quantile rounds q to float32 and interpolates in float32: the
    # result is one of the values or lies between two neighbours.
    s, _ = a.sort()
    for v, p in zip(out.tolist(), PERCENTILES):
        r = p / 100 * (a.numel() - 1)
        lo, hi = s[max(int(r) - 1, 0)].item(), s[min(int(r) + 2, a.numel() - 1)].item()
        assert lo <= v <= hi, (dist, p, v, lo, hi)
    tensors = {f"batch{i}": b for i, b in enumerate(batches)}
    tensors["out"] = out
    g.case(f"percentile_{dist}", {"op": "percentile", "dist": dist, "batches": len(batches),
                                  "percentiles": PERCENTILES}, tensors)


def reciprocal_differs(x, scale):
    """How many elements of x (numpy float32) round differently as x·(1/s)
    than as x/s, s broadcast against x."""
    s = scale.astype(np.float32)
    inv = (np.float32(1) / s).astype(np.float32)
    div = np.clip(np.rint((x / s).astype(np.float32)), QMIN, QMAX)
    mul = np.clip(np.rint((x * inv).astype(np.float32)), QMIN, QMAX)
    return int((div != mul).sum())


def tie_row(amax, k, gen):
    """A row of k float32 values with largest magnitude amax in which as
    many values as could be found near a rounding midpoint round
    differently as x·(1/s) than as x/s (s = amax/127), the rest random."""
    s = np.float32(np.float32(amax) / np.float32(127))
    inv = np.float32(np.float32(1) / s)
    found = []
    for m in range(1, 126):
        mid = np.float32((m + 0.5) * float(s))
        for step in range(-4, 5):
            x = np.float32(mid)
            for _ in range(abs(step)):
                x = np.nextafter(x, np.float32(np.inf if step > 0 else -np.inf), dtype=np.float32)
            if np.rint(np.float32(x / s)) != np.rint(np.float32(x * inv)):
                found.append(x)
                break
        if len(found) == k - 1:
            break
    row = (torch.rand(k, generator=gen) * 2 - 1) * float(s) * 120
    row = row.numpy().astype(np.float32)
    row[: len(found)] = found
    row[-1] = np.float32(amax)
    signs = np.where(torch.rand(k, generator=gen).numpy() < 0.5, np.float32(-1), np.float32(1))
    return row * signs


def per_channel_case(g, name, w, dist):
    scale = w.abs().amax(dim=1) / 127
    zp = torch.zeros(w.shape[0], dtype=torch.int64)
    q = torch.quantize_per_channel(w, scale.double(), zp, 0, torch.qint8).int_repr().to(torch.int32)
    fake = torch.fake_quantize_per_channel_affine(w, scale, zp.to(torch.int32), 0, QMIN, QMAX)
    assert q.min() >= QMIN and q.max() <= QMAX, name
    differs = reciprocal_differs(w.numpy(), scale.numpy()[:, None])
    g.case(name, {"op": "per_channel", "quant_min": QMIN, "quant_max": QMAX, "axis": 0, "dist": dist,
                  "reciprocal_differs": differs},
           {"w": w, "scale": scale, "q": q, "fake": fake})
    return differs


def per_tensor_case(g, name, x, dist):
    scale = x.abs().max() / 127
    q = torch.quantize_per_tensor(x, scale.item(), 0, torch.qint8).int_repr().to(torch.int32)
    fake = torch.fake_quantize_per_tensor_affine(x, scale.item(), 0, QMIN, QMAX)
    assert q.min() >= QMIN and q.max() <= QMAX, name
    differs = reciprocal_differs(x.numpy(), scale.numpy())
    g.case(name, {"op": "per_tensor", "quant_min": QMIN, "quant_max": QMAX, "axis": None, "dist": dist,
                  "reciprocal_differs": differs},
           {"x": x, "scale": scale.reshape(1), "q": q, "fake": fake})


def hist_batches(dist, gen):
    """The calibration batches of a histogram case (HIST_BATCH_LENGTHS)."""
    if dist == "relu_growing":
        # A ReLU's output whose scale triples from batch to batch, so that
        # the histogram's range doubles once or twice at each batch while
        # it is streamed.
        return [torch.relu(torch.randn(n, generator=gen)) * (0.3 * 3.0**b)
                for b, n in enumerate(HIST_BATCH_LENGTHS)]
    return [draw(dist, n, gen) for n in HIST_BATCH_LENGTHS]


def abs_histogram(batches, bins):
    """The histogram of |x| that models/quant's Histogram documents, built
    by streaming the batches as its contract says: `bins` equal bins over
    [0, R), R = 2**e the smallest power of two above the running amax
    (math.frexp), a value in bin floor(|x|·bins/R) (exact in float64); when
    amax reaches R, R doubles d times and bin j moves to j >> d. Returns
    the counts (int64 [bins]), R and the amax (float64)."""
    counts = np.zeros(bins, dtype=np.int64)
    amax, exp = 0.0, None
    for b in batches:
        a = np.abs(b.numpy().astype(np.float64))
        m = float(a.max())
        if m > amax:
            _, e = math.frexp(m)  # m < 2**e <= 2·m
            if exp is not None and e > exp:
                merged = np.zeros(bins, dtype=np.int64)
                np.add.at(merged, np.arange(bins) >> (e - exp), counts)
                counts = merged
            exp = e if exp is None else max(exp, e)
            amax = m
        assert amax > 0, "a histogram case starts with a batch of zeros"
        counts += np.bincount(np.floor(a * bins / 2.0**exp).astype(np.int64), minlength=bins)
    r = 2.0**exp
    # The contract's point: the histogram of all the values at once.
    whole = np.abs(torch.cat(batches).numpy().astype(np.float64))
    once, _ = np.histogram(whole, bins=bins, range=(0.0, r))
    assert (once == counts).all() and counts.sum() == whole.size and amax < r <= 2 * amax
    return counts, r, amax


def kl_divergence(p, q):
    """KL(p‖q) of two count vectors, each normalised to sum 1, in nats: the
    sum of p·ln(p/q) over p > 0, infinite where q = 0 < p (as
    scipy.stats.entropy(p, q) computes it)."""
    p, q = p / p.sum(), q / q.sum()
    pos = p > 0
    if (q[pos] == 0).any():
        return math.inf
    return float(np.sum(p[pos] * np.log(p[pos] / q[pos])))


def entropy_bin(counts):
    """pytorch-quantization's _compute_amax_entropy search (stride 1,
    START_BIN, LEVELS levels) over the histogram: the threshold bin i of the
    last smallest divergence, and the divergences by i."""
    c = counts.astype(np.float64)
    c[0] = c[1]  # the zeros of a ReLU must not dominate
    total = c.sum()
    divs = {}
    for i in range(START_BIN, len(c) + 1):
        # Bin j of the first i goes to the level of [k·i/128, (k+1)·i/128)
        # holding j; empty bins take part in neither sum nor count.
        level = np.digitize(np.arange(i), np.linspace(0, i, LEVELS + 1)) - 1
        full = c[:i] != 0
        level_sum = np.bincount(level[full], weights=c[:i][full], minlength=LEVELS)
        level_n = np.bincount(level[full], minlength=LEVELS)
        q = np.zeros(i)
        q[full] = level_sum[level[full]] / level_n[level[full]]
        p = c[:i].copy()
        p[-1] += c[i:].sum()  # the clipped outliers
        assert round(q.sum() + c[i:].sum()) == total and round(p.sum()) == total
        divs[i] = kl_divergence(p, q)
    best = min(divs.values())
    return max(i for i, d in divs.items() if d == best), divs


def mse_bin(counts, width):
    """pytorch-quantization's _compute_amax_mse search (stride 1,
    START_BIN) over the histogram, with the quantize-dequantize of
    models/quant's contract: the candidate bin i (centre a = (i+½)·width)
    of the first smallest Σ_j c_j·(s·clamp(round(x_j/s), -127, 127) −
    x_j)², s = a/127, x_j = (j+½)·width, in float64 with ties to even; and
    the errors by i."""
    c = counts.astype(np.float64)
    x = (np.arange(len(c)) + 0.5) * width
    errs = {}
    for i in range(START_BIN, len(c)):
        s = x[i] / QMAX
        d = s * np.clip(np.rint(x / s), QMIN, QMAX) - x
        errs[i] = float(np.sum(c * d * d))
    best = min(errs.values())
    return min(i for i, e in errs.items() if e == best), errs


def margin(scores, i):
    """How far the chosen score (of candidate i) is below the best other
    one, relative to it: a margin far above float64 rounding (MIN_MARGIN)
    means that the golden's amax does not hang on the order in which an
    implementation sums."""
    others = [v for j, v in scores.items() if j != i]
    best = min(others)
    return (best - scores[i]) / abs(best) if best != 0 else math.inf


def hist_case(g, op, dist, bins, gen):
    """Adds the case "<op>_<dist>" of an entropy or mse observer over a
    histogram of bins bins."""
    batches = hist_batches(dist, gen)
    counts, r, amax = abs_histogram(batches, bins)
    width = r / bins
    if op == "entropy":
        i, scores = entropy_bin(counts)
        threshold = i * width  # the bin's upper edge
    else:
        i, scores = mse_bin(counts, width)
        threshold = (i + 0.5) * width  # the bin's centre
    assert margin(scores, i) > MIN_MARGIN, (op, dist, margin(scores, i))
    out = np.float32(min(threshold, amax))
    tensors = {f"batch{b}": x for b, x in enumerate(batches)}
    tensors["counts"] = torch.from_numpy(counts)
    tensors["out"] = torch.tensor([out], dtype=torch.float32)
    g.case(f"{op}_{dist}", {"op": op, "dist": dist, "batches": len(batches), "bins": bins,
                            "range": r, "bin": i}, tensors)


def build():
    """{repo-relative path: bytes} of the file this script writes."""
    torch.set_num_threads(1)
    torch.use_deterministic_algorithms(True)
    gen = torch.Generator().manual_seed(SEED)
    g = Golden(SEED)
    for dist in ["uniform", "gaussian", "relu_gaussian", "laplace_outliers"]:
        percentile_case(g, dist, gen)

    # A weight matrix [N, K] with rows of different magnitudes (one tiny).
    n, k = 48, 80
    w = torch.randn(n, k, generator=gen) * (torch.rand(n, 1, generator=gen) * 0.5 + 0.01)
    w[5] *= 1e-4
    per_channel_case(g, "per_channel_gaussian", w, "gaussian, row scales in [0.01, 0.51), row 5 times 1e-4")

    rows = [tie_row(a, 32, gen) for a in (torch.rand(6, generator=gen) * 3 + 0.1).tolist()]
    ties = torch.from_numpy(np.stack(rows))
    differs = per_channel_case(g, "per_channel_ties", ties, "values beside rounding midpoints")
    assert differs > 0, "no reciprocal rounding differences in per_channel_ties"

    x = torch.randn(16, 64, generator=gen) * 0.3
    per_tensor_case(g, "per_tensor_gaussian", x, "gaussian, std 0.3")

    # After the cases above, so that their values do not change.
    for op in ["entropy", "mse"]:
        for dist, bins in [("gaussian", 2048), ("laplace_outliers", 2048), ("relu_growing", 512)]:
            hist_case(g, op, dist, bins, gen)
    return {GOLDEN: g.serialize()}


def main():
    return golden_files.main(__doc__, build, REPO, SCRIPT)


if __name__ == "__main__":
    sys.exit(main())
