#!/usr/bin/env python3
"""Independent PyTorch reference for zbench's ResNet family (models/resnet).

The models are torchvision's own (torchvision.models.resnet18, resnet34,
resnet50, resnet101, resnet152, resnext50_32x4d, wide_resnet50_2, built with
weights=None and put in eval mode: BatchNorm uses its running statistics,
eps 1e-5; the bottleneck's stride sits on its 3×3 convolution, "v1.5"),
filled with seeded synthetic weights; this file holds the cross-language
definition of those weights and writes the ResNet goldens. Importing it has
no side effects.

Seeded synthetic weights (normative; models/resnet implements the same):
every float entry of the model's state_dict (parameters and BatchNorm
buffers alike, in any order) is

  bert.synthetic_values(name, RESNET_SEED, numel, center, half)

reshaped to its shape (bert.py's generator: a splitmix64 counter hash keyed
by seed XOR fnv1a64(name), u in [0, 1) from the top 24 bits, value =
float32(center + half·(2u − 1)) in float64; see its docstring), keyed by
torchvision's state_dict name (e.g. "layer1.0.downsample.1.running_var"),
with RESNET_SEED = 20261201 and (center, half) from the name and shape, the
first rule that matches:

  4-D conv weight [Co, Ci/G, Kh, Kw]   center 0,   half sqrt(6 / (Ci/G·Kh·Kw))
                                       (He uniform; fan_in = the product of
                                       the shape's last three dimensions)
  name ends "running_var"              center 2,   half 1      (in [1, 3])
  name ends "running_mean"             center 0.1, half 0.2
  "fc.weight" [K, in] and "fc.bias"    center 0,   half 1/sqrt(in), in =
                                       fc.weight's second dimension (512
                                       for resnet18/34, 2048 for the others)
  any other name ending ".weight"      center 1,   half 0.25   (BatchNorm
                                       weight: bnK, downsample.1)
  any other name ending ".bias"        center 0,   half 0.1    (BatchNorm bias)

Both halves are computed in float64 (sqrt(6.0 / fan_in), 1.0 / sqrt(in):
correctly rounded division and square root). The int64
"num_batches_tracked" buffers stay 0 (not generated). Known values
(asserted by self_test; the Go side's tests can assert them too), as float32
bits:

  conv1.weight (half sqrt(6/147)) [0:4]   0x3da050cb 0x3dd5c979 0xbdd581cd 0xbd2da8dd
  layer1.0.bn1.running_var [0:4]          0x3fe12ca7 0x3feb28a6 0x40049f14 0x400cc430
  fc.bias (in 2048) [0:4]                 0x3b592d3e 0xbc6d8469 0xbbc2bbb7 0xbbe506c6

With these ranges the activations neither explode nor vanish at any
depth: on N(0, 1) input at 32×32 the standard deviation of layer1..layer4's
outputs is about 0.9..1.6, 0.8..1.7, 0.3..1.3 and 0.1..0.9 over the seven
models, and the logits' 0.07..0.6 (resnet101 lowest, resnet34 highest;
resnet152 0.26). Deep down the BatchNorm shifts outweigh the input: the
part of the logits that differs between images is smaller than their spread
(resnet50 at 224×224: 0.025 against 0.5).

File written: testdata/golden/resnet.safetensors, format
"zbench-golden/1: tensors <case>/<role>, metadata <case> = JSON params":

  tensors   "<case>/pixel_values" F32 [N, 3, H, W]: torch.randn from a
            generator seeded with (RESNET_SEED XOR fnv1a64(case)) mod 2^63,
            stored as float32;
            "<case>/logits" F32 [N, K]: the model's output;
            "<case>/layer1" … "<case>/layer4" F32 NCHW (the cases marked
            below): the outputs of model.layer1 … model.layer4, to localise
            errors.
            Every output is computed in float64 (model.double() of the
            float32 synthetic weights, on the stored float32 pixel values
            widened) and rounded to float32.
  metadata  "<case>": compact JSON {"op": "resnet", "model": the
            torchvision builder's name, "seed": 20261201, "num_classes": K,
            "batch": N, "height": H, "width": W, "f32_rel_err":
            ‖out32 − out64‖/‖out64‖ (Frobenius) of the logits of torch's own
            float32 forward (CPU, one thread) against the float64 ones,
            rounded to 2 significant digits (what float32 arithmetic costs
            on this case: a yardstick for the Go side's tolerance),
            "state_dict": [[name, "F32" or "I64", shape], …] in state_dict
            order (torchvision's names, shapes and dtypes, for writing a
            checkpoint the loader must accept)}; plus "reference" (torch and
            torchvision versions), "script", "seed" and "format".

Cases (K = 1000 unless noted):

  resnet18_40x56       resnet18, [2, 3, 40, 56] (not square, not a multiple
                       of 32: the stem's 20×28, layer4's 2×2), layer1..4
  resnet34_32          resnet34, [2, 3, 32, 32]
  resnet50_32          resnet50, [2, 3, 32, 32], layer1..4
  resnet101_32         resnet101, [2, 3, 32, 32]
  resnet152_32         resnet152, [2, 3, 32, 32]
  resnext50_32x4d_32   resnext50_32x4d (grouped 3×3, 32 groups), [2, 3, 32, 32]
  wide_resnet50_2_32   wide_resnet50_2 (bottleneck width ×2), [2, 3, 32, 32]
  resnet18_cifar10     resnet18 with num_classes=10 (fc 512→10), [4, 3, 32, 32]
  resnet50_224         resnet50, [1, 3, 224, 224], logits only

At 32×32 layer4 works on 1×1 images (its 3×3 convolutions see only their
centre tap).

Deterministic: fixed seeds, one thread, deterministic algorithms. The one
value that depends on the CPU's float32 kernels (oneDNN picks them by
instruction set) is f32_rel_err, rounded to 2 digits so that it rarely
does. Requires torch (1.13 tested, CPU only), torchvision (0.14 tested) and
numpy. The run takes about 20 s of CPU (one thread: generating the weights
and the float64 forwards), peak memory about 1.2 GB. Run from anywhere:

  /usr/bin/python3 testdata/reference/resnet.py            # write the golden
  /usr/bin/python3 testdata/reference/resnet.py --check    # verify it is current
"""

import copy
import math
import os
import sys

import numpy as np
import torch
import torchvision

from bert import compact, fnv1a64, synthetic_values, Tensors
import golden_files

SCRIPT = "testdata/reference/resnet.py"
FORMAT = "zbench-golden/1: tensors <case>/<role>, metadata <case> = JSON params"
REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
OUT = "testdata/golden/resnet.safetensors"
RESNET_SEED = 20261201

MODELS = ("resnet18", "resnet34", "resnet50", "resnet101", "resnet152", "resnext50_32x4d", "wide_resnet50_2")

# name, model, num_classes, [N, H, W], whether layer1..4 are stored.
CASES = (
    ("resnet18_40x56", "resnet18", 1000, (2, 40, 56), True),
    ("resnet34_32", "resnet34", 1000, (2, 32, 32), False),
    ("resnet50_32", "resnet50", 1000, (2, 32, 32), True),
    ("resnet101_32", "resnet101", 1000, (2, 32, 32), False),
    ("resnet152_32", "resnet152", 1000, (2, 32, 32), False),
    ("resnext50_32x4d_32", "resnext50_32x4d", 1000, (2, 32, 32), False),
    ("wide_resnet50_2_32", "wide_resnet50_2", 1000, (2, 32, 32), False),
    ("resnet18_cifar10", "resnet18", 10, (4, 32, 32), False),
    ("resnet50_224", "resnet50", 1000, (1, 224, 224), False),
)

LAYERS = ("layer1", "layer2", "layer3", "layer4")


# ---------------------------------------------------------------------------
# Synthetic weights


def synthetic_range(name, shape, fc_in):
    """(center, half) of the state_dict entry name of the given shape; fc_in
    is fc.weight's second dimension."""
    if len(shape) == 4:
        return 0.0, math.sqrt(6.0 / (shape[1] * shape[2] * shape[3]))
    if name.endswith("running_var"):
        return 2.0, 1.0
    if name.endswith("running_mean"):
        return 0.1, 0.2
    if name in ("fc.weight", "fc.bias"):
        return 0.0, 1.0 / math.sqrt(fc_in)
    if name.endswith(".weight"):
        return 1.0, 0.25
    if name.endswith(".bias"):
        return 0.0, 0.1
    raise ValueError(f"{name}: no synthetic range")


def synthetic_tensor(name, seed, shape, fc_in):
    c, h = synthetic_range(name, shape, fc_in)
    return torch.from_numpy(synthetic_values(name, seed, math.prod(shape), c, h)).view(shape)


@torch.no_grad()
def synthetic_(model, seed=RESNET_SEED):
    """Fills every float state_dict entry of a torchvision ResNet from the
    generator, converted to the entry's dtype; num_batches_tracked is set
    to 0. Returns model."""
    sd = model.state_dict()
    fc_in = sd["fc.weight"].shape[1]
    for name, t in sd.items():
        if t.is_floating_point():
            t.copy_(synthetic_tensor(name, seed, list(t.shape), fc_in))
        else:
            assert name.endswith("num_batches_tracked"), name
            t.zero_()
    return model


def resnet(name, num_classes=1000, seed=RESNET_SEED):
    """torchvision's model of that name, float32, eval mode, with the
    synthetic weights of seed."""
    if name not in MODELS:
        raise ValueError(f"{name}: not one of {', '.join(MODELS)}")
    return synthetic_(getattr(torchvision.models, name)(weights=None, num_classes=num_classes), seed).eval()


# Known values, which models/resnet's tests may assert too.
SELFTEST = (
    ("conv1.weight", [64, 3, 7, 7], 2048, [0x3DA050CB, 0x3DD5C979, 0xBDD581CD, 0xBD2DA8DD]),
    ("layer1.0.bn1.running_var", [64], 2048, [0x3FE12CA7, 0x3FEB28A6, 0x40049F14, 0x400CC430]),
    ("fc.bias", [1000], 2048, [0x3B592D3E, 0xBC6D8469, 0xBBC2BBB7, 0xBBE506C6]),
)


def self_test():
    """Asserts the known values and the ranges by name."""
    for name, shape, fc_in, want in SELFTEST:
        bits = [int(b) for b in synthetic_tensor(name, RESNET_SEED, shape, fc_in).flatten()[:4].numpy().view(np.uint32)]
        assert bits == want, (name, [hex(b) for b in bits])
    assert synthetic_range("layer2.0.downsample.0.weight", [512, 256, 1, 1], 2048) == (0.0, math.sqrt(6.0 / 256))
    assert synthetic_range("layer2.0.conv2.weight", [256, 4, 3, 3], 2048) == (0.0, math.sqrt(6.0 / 36))
    assert synthetic_range("layer2.0.downsample.1.running_var", [512], 2048) == (2.0, 1.0)
    assert synthetic_range("bn1.running_mean", [64], 2048) == (0.1, 0.2)
    assert synthetic_range("layer2.0.downsample.1.weight", [512], 2048) == (1.0, 0.25)
    assert synthetic_range("layer4.1.bn2.bias", [512], 512) == (0.0, 0.1)
    assert synthetic_range("fc.weight", [10, 512], 512) == (0.0, 1.0 / math.sqrt(512))


# ---------------------------------------------------------------------------
# Golden


def case_generator(name):
    """A torch generator seeded from the case's name: cases do not shift
    each other's inputs."""
    return torch.Generator().manual_seed((RESNET_SEED ^ fnv1a64(name)) & ((1 << 63) - 1))


ST_DTYPES = {torch.float32: "F32", torch.int64: "I64"}


def state_dict_list(model):
    return [[n, ST_DTYPES[t.dtype], list(t.shape)] for n, t in model.state_dict().items()]


@torch.no_grad()
def forward64(model, x):
    """The float64 logits of model (float32 weights, widened in place) on x,
    and the outputs of layer1..layer4."""
    m = model.double()
    acts = {}
    hooks = [getattr(m, k).register_forward_hook(lambda mod, i, o, k=k: acts.__setitem__(k, o)) for k in LAYERS]
    try:
        out = m(x.double())
    finally:
        for h in hooks:
            h.remove()
    return out, acts


def build():
    """{repo-relative path: bytes} of the file this script writes."""
    self_test()
    torch.manual_seed(RESNET_SEED)
    torch.set_num_threads(1)
    torch.use_deterministic_algorithms(True)
    t = Tensors({"reference": f"torch {torch.__version__}, torchvision {torchvision.__version__}",
                 "script": SCRIPT, "seed": str(RESNET_SEED), "format": FORMAT})
    key = m32 = None
    for case, name, K, (N, H, W), layers in CASES:
        if key != (name, K):  # one model at a time in memory
            key, m32 = (name, K), None
            m32 = resnet(name, K)
        x = torch.randn(N, 3, H, W, generator=case_generator(case), dtype=torch.float32)
        with torch.no_grad():
            out32 = m32(x).double()
        sd = state_dict_list(m32)
        out, acts = forward64(copy.deepcopy(m32), x)
        rel = float((out32 - out).norm() / out.norm())
        params = {"op": "resnet", "model": name, "seed": RESNET_SEED, "num_classes": K, "batch": N,
                  "height": H, "width": W, "f32_rel_err": float(f"{rel:.2g}"), "state_dict": sd}
        t.meta[case] = compact(params)
        t.put(f"{case}/pixel_values", x)
        t.put(f"{case}/logits", out)
        if layers:
            for k in LAYERS:
                t.put(f"{case}/{k}", acts[k])
        print(f"{case}: logits std {float(out.std()):.3g}, f32_rel_err {rel:.3g}", file=sys.stderr)
    return {OUT: t.serialize()}


def main():
    return golden_files.main(__doc__, build, REPO, SCRIPT)


if __name__ == "__main__":
    sys.exit(main())
