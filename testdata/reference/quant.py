#!/usr/bin/env python3
"""Independent PyTorch reference for zbench's INT8 post-training
quantization on the host (package models/quant).

Writes testdata/golden/quant.safetensors, which models/quant/golden_test.go
checks the percentile observer and the weight quantization against. The
semantics follow kernels/quant.go (symmetric, narrow range [-127, 127],
scale = amax/127, zero point 0) and torch's own functions; nothing here is
derived from the Go implementation.

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
            plus "reference" (torch version), "script", "seed" and
            "format".

The file is written in the safetensors format by safetensors_file.py here
(the python safetensors package is not needed). Deterministic: a fixed seed,
one thread. Requires torch (1.13 tested, CPU only) and numpy. Run from
anywhere:

  /usr/bin/python3 testdata/reference/quant.py            # write the golden
  /usr/bin/python3 testdata/reference/quant.py --check    # verify it is current
"""

import json
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
            assert t.dtype in (torch.float32, torch.int32), (key, t.dtype)
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
    return {GOLDEN: g.serialize()}


def main():
    return golden_files.main(__doc__, build, REPO, SCRIPT)


if __name__ == "__main__":
    sys.exit(main())
