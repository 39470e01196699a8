#!/usr/bin/env python3
"""Exports the models of the ONNX Runtime peer (bench.mjs) with
torch.onnx.export and writes, beside them, each benchmark point's inputs and
reference outputs.

The models are the PyTorch reference modules with zbench's seeded synthetic
weights, as the PyTorch peer runs them: BERT-base (testdata/reference/bert.py,
torchpeer.encoder) and ResNet-50 (torchvision through
testdata/reference/resnet.py, torchpeer.vision), in float32, eval mode. Each
is exported once with named dynamic dimensions (batch, and seq for BERT);
bench.mjs fixes them per benchmark point with ONNX Runtime's
freeDimensionOverrides, so every session is optimised for static shapes.

Written into --out (default .cache/onnxruntime/models):

  bert-base.onnx, resnet50.onnx   the models (opset OPSET)
  <point>.<role>.bin              raw little-endian tensors (int64 ids,
                                  float32 pixels, float64 references)
  manifest.json                   the benchmark points: name, model, the
                                  dimensions, work counts, tolerance, the
                                  timed inputs and the check (inputs,
                                  outputs, rows, reference), and what made
                                  them (torch version, opset)

The check of a BERT point is the PyTorch peer's: the float64 model of the
same weights on the first and last sequence of the timed batch
(last_hidden_state and pooler_output). The check of a ResNet point is
bench_test's: the golden case resnet50_224 (testdata/golden/
resnet.safetensors), repeated over the batch, against torchvision's float64
logits.

Quick and silent when the directory is current: a stamp holds the hashes of
this script, the reference scripts, the PyTorch peer modules it uses and
the golden file, and the torch and torchvision versions.
"""

import argparse
import hashlib
import importlib.metadata
import json
import os
import shutil
import sys
import warnings

HERE = os.path.dirname(os.path.abspath(__file__))
PEERS = os.path.dirname(HERE)
REPO = os.path.dirname(os.path.dirname(PEERS))
sys.path.insert(0, PEERS)

# torch, torchvision and the PyTorch peer's modules are imported when the
# models are made (reference()), not for the stamp: a current directory is
# checked in well under a second.

# The ONNX opset of the export: torch 1.13's newest (17 has
# LayerNormalization, which the exporter emits for nn.LayerNorm).
OPSET = 17

# What the stamp hashes besides the versions.
STAMP_FILES = [
    os.path.abspath(__file__),
    os.path.join(REPO, "testdata", "reference", "bert.py"),
    os.path.join(REPO, "testdata", "reference", "resnet.py"),
    os.path.join(PEERS, "torchpeer", "harness.py"),
    os.path.join(PEERS, "torchpeer", "encoder.py"),
    os.path.join(PEERS, "torchpeer", "vision.py"),
    os.path.join(REPO, "testdata", "golden", "resnet.safetensors"),  # torchpeer.vision.RESNET_GOLDEN
]

MANIFEST_FORMAT = "zbench-onnxpeer/1"

# Raw file dtypes (torch's names), as bench.mjs reads them.
RAW_DTYPES = {"torch.int64": "int64", "torch.float32": "float32", "torch.float64": "float64"}


def reference():
    """(torch, torchpeer.encoder, torchpeer.harness, torchpeer.vision)."""
    import torch
    from torchpeer import encoder, harness, vision
    return torch, encoder, harness, vision


def stamp():
    h = hashlib.sha256()
    for path in STAMP_FILES:
        with open(path, "rb") as f:
            h.update(hashlib.sha256(f.read()).digest())
    versions = {p: importlib.metadata.version(p) for p in ("torch", "torchvision")}
    h.update(f"torch {versions['torch']} torchvision {versions['torchvision']} opset {OPSET}".encode())
    return h.hexdigest()


def bert_flops(cfg, n, s):
    """bench_test's bertFLOPs: the projections and feed-forward layers,
    q·kᵀ and ·v, the pooler."""
    H, I, L = cfg.hidden_size, cfg.intermediate_size, cfg.num_hidden_layers
    return float(L * (n * s * (8 * H * H + 4 * H * I) + 4 * n * s * s * H) + 2 * n * H * H)


class Writer:
    """Writes the raw tensors of the points into a directory."""

    def __init__(self, out):
        self.out = out

    def tensor(self, key, t):
        t = t.detach().contiguous()
        if str(t.dtype) not in RAW_DTYPES:
            raise ValueError(f"{key}: dtype {t.dtype} has no raw form")
        name = key.replace("/", "_").replace("=", "-") + ".bin"
        with open(os.path.join(self.out, name), "wb") as f:
            f.write(t.numpy().astype(t.numpy().dtype.newbyteorder("<"), copy=False).tobytes())
        return {"file": name, "dtype": RAW_DTYPES[str(t.dtype)], "shape": list(t.shape)}


def export(module, args, path, inputs, outputs, dynamic):
    torch = reference()[0]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the tracer's notes on Python values in shapes
        torch.onnx.export(module, args, path, input_names=inputs, output_names=outputs, dynamic_axes=dynamic,
                          opset_version=OPSET, do_constant_folding=True)


def bert_points(w, out):
    torch, encoder, harness, _ = reference()

    class BertIO(torch.nn.Module):
        """BertModel with its three inputs positional, for the export."""

        def __init__(self, model):
            super().__init__()
            self.model = model

        def forward(self, input_ids, attention_mask, token_type_ids):
            return self.model(input_ids, attention_mask, token_type_ids)

    cfg = encoder.bert_ref.BertConfig.from_dict(encoder.BERT_BASE)
    model = encoder.bert_ref.BertModel(cfg)
    model.load_state_dict(encoder.bert_weights("base"))
    model.eval()
    nparams = sum(p.numel() for p in model.parameters())
    ids, mask, types = encoder.bert_inputs(cfg, 1, 8)
    names = ["input_ids", "attention_mask", "token_type_ids"]
    bs = {0: "batch", 1: "seq"}
    export(BertIO(model), (ids, mask, types), os.path.join(out, "bert-base.onnx"), names,
           ["last_hidden_state", "pooler_output"],
           {"input_ids": bs, "attention_mask": bs, "token_type_ids": bs, "last_hidden_state": bs,
            "pooler_output": {0: "batch"}})
    ref = encoder.bert_ref.BertModel(cfg)
    ref.load_state_dict(encoder.bert_weights("base"))
    ref.double().eval()
    short = set(encoder.bert_cases(True, False))
    points = []
    for dt, batch, seq in encoder.bert_cases(False, False):
        if dt != "f32":
            continue  # int8 is torch's dynamic quantization: no ONNX Runtime counterpart here
        name = f"BenchmarkBERT/dev=cpu/dtype={dt}/batch={batch}/seq={seq}"
        ids, mask, types = encoder.bert_inputs(cfg, batch, seq)
        feeds = {n: w.tensor(f"{name}/{n}", t) for n, t in zip(names, (ids, mask, types))}
        rows = sorted({0, batch - 1})
        with torch.no_grad():
            h, p = ref(ids[rows], mask[rows], types[rows])
        want = torch.cat([h.flatten(), p.flatten()])
        points.append({
            "name": name, "model": "bert-base", "dims": {"batch": batch, "seq": seq},
            "short": (dt, batch, seq) in short,
            "flops": bert_flops(cfg, batch, seq), "bytes": float(nparams * 4),
            "items": batch, "unit": "seq/s", "tol": harness.MODEL_TOLERANCE[dt],
            "inputs": feeds,
            "check": {"inputs": feeds, "outputs": ["last_hidden_state", "pooler_output"], "rows": rows,
                      "want": w.tensor(f"{name}/want", want)},
        })
    return points


def resnet_points(w, out):
    torch, _, harness, vision = reference()
    if os.path.abspath(vision.RESNET_GOLDEN) not in STAMP_FILES:
        raise RuntimeError(f"export.py's stamp does not cover the ResNet golden {vision.RESNET_GOLDEN}")
    base = vision.resnet_base()
    model, size = base["model"], vision.RESNET_SIZE
    export(model, (torch.zeros(1, 3, size, size),), os.path.join(out, "resnet50.onnx"), ["pixel_values"],
           ["logits"], {"pixel_values": {0: "batch"}, "logits": {0: "batch"}})
    # models/resnet's WeightBytes: the BatchNorms folded into one float32
    # bias per convolution, and the classifier.
    weights = 0
    for m in model.modules():
        if isinstance(m, torch.nn.Conv2d):
            weights += 4 * (m.weight.numel() + m.out_channels)
        elif isinstance(m, torch.nn.Linear):
            weights += 4 * (m.weight.numel() + m.bias.numel())
    short = set(vision.resnet_cases(True, False))
    pixels, logits = base["pixels"], base["logits"]
    points = []
    for dt, batch in vision.resnet_cases(False, False):
        if dt != "f32":
            continue  # int8 is torch's FX static quantization: no ONNX Runtime counterpart here
        name = f"BenchmarkResNet/dev=cpu/model={vision.RESNET_MODEL}/dtype={dt}/batch={batch}"
        x = harness.uniform(batch, (batch, 3, size, size), torch.float32, "cpu")
        rep = [batch] + [1] * (pixels.dim() - 1)
        points.append({
            "name": name, "model": "resnet50", "dims": {"batch": batch},
            "short": (dt, batch) in short,
            "flops": base["flops"] * batch, "bytes": float(weights + batch * 3 * size * size * 4),
            "items": batch, "unit": "img/s", "tol": vision.RESNET_TOLERANCE[dt],
            "inputs": {"pixel_values": w.tensor(f"{name}/pixel_values", x)},
            "check": {"inputs": {"pixel_values": w.tensor(f"{name}/golden_pixels",
                                                          pixels.to(torch.float32).repeat(*rep))},
                      "outputs": ["logits"], "rows": None,
                      "want": w.tensor(f"{name}/want", logits.to(torch.float64).repeat(batch, 1))},
        })
    return points


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", default=os.path.join(REPO, ".cache", "onnxruntime", "models"),
                    help="the directory to write (default .cache/onnxruntime/models)")
    ap.add_argument("--force", action="store_true", help="export even when the directory is current")
    args = ap.parse_args(argv)
    out = os.path.abspath(args.out)
    want = stamp()
    stamp_path = os.path.join(out, ".stamp")
    if not args.force and os.path.exists(stamp_path):
        with open(stamp_path) as f:
            if f.read().strip() == want:
                return 0
    torch, _, harness, _ = reference()
    harness.log(f"onnxpeer/export.py: exporting BERT-base and ResNet-50 into {out}")
    tmp = out + ".tmp"
    shutil.rmtree(tmp, ignore_errors=True)
    os.makedirs(tmp)
    torch.manual_seed(0)
    w = Writer(tmp)
    with torch.no_grad():
        points = bert_points(w, tmp) + resnet_points(w, tmp)
    manifest = {
        "format": MANIFEST_FORMAT,
        "exporter": f"torch-{torch.__version__}",
        "opset": OPSET,
        "models": {"bert-base": "bert-base.onnx", "resnet50": "resnet50.onnx"},
        "points": points,
    }
    with open(os.path.join(tmp, "manifest.json"), "w") as f:
        json.dump(manifest, f, indent=1)
        f.write("\n")
    with open(os.path.join(tmp, ".stamp"), "w") as f:
        f.write(want + "\n")
    shutil.rmtree(out, ignore_errors=True)
    os.rename(tmp, out)
    harness.log(f"onnxpeer/export.py: {len(points)} points written")
    return 0


if __name__ == "__main__":
    sys.exit(main())
