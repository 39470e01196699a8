#!/usr/bin/env python3
"""Saves a torchvision ResNet's state_dict as safetensors for zbench infer.

    scripts/torchvision-weights.py resnet50 --pth resnet50-11ad3fa6.pth --out resnet50.safetensors --labels imagenet_classes.txt
    scripts/torchvision-weights.py resnet50 --weights IMAGENET1K_V2 --out resnet50.safetensors --labels imagenet_classes.txt
    scripts/torchvision-weights.py resnet18 --random --out resnet18.safetensors

The model is torchvision's own constructor of that name; its state_dict is
written with torchvision's names (num_batches_tracked included) in the
safetensors layout of testdata/reference/safetensors_file.py, which
models/resnet loads. The weights come from a .pth file of torchvision's
state_dict (--pth: what torchvision's download cache holds), from
torchvision's weights enum (--weights: downloads into torch's cache if it
is not there), or from the constructor's random initialisation (--random:
no download; the classes are then noise). --labels writes the class names
of torchvision's ImageNet weights' metadata, one per line, which needs no
download. Debian's /usr/bin/python3 with python3-torchvision runs it.
"""

import argparse
import os
import sys

import torch
import torchvision

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "testdata", "reference"))
from golden_files import write_file  # noqa: E402
from safetensors_file import entry, serialize  # noqa: E402


def weights_enum(name):
    """torchvision's weights enum of the named model (ResNet50_Weights)."""
    return torchvision.models.get_model_weights(name)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("model", help="a torchvision ResNet constructor: resnet18, resnet50, wide_resnet50_2, ...")
    src = ap.add_mutually_exclusive_group(required=True)
    src.add_argument("--pth", help="a .pth file holding the model's state_dict")
    src.add_argument("--weights", help="a member of torchvision's weights enum of the model (IMAGENET1K_V1, IMAGENET1K_V2)")
    src.add_argument("--random", action="store_true", help="the constructor's random initialisation")
    ap.add_argument("--out", required=True, help="the safetensors file to write")
    ap.add_argument("--labels", help="also write the ImageNet class names, one per line, to this file")
    args = ap.parse_args()

    if not args.model.startswith(("resnet", "resnext", "wide_resnet")):
        ap.error(f"{args.model}: not a ResNet (zbench's models/resnet runs the ResNet family)")
    ctor = getattr(torchvision.models, args.model, None)
    if ctor is None:
        ap.error(f"torchvision {torchvision.__version__} has no model {args.model}")
    if args.weights:
        model = ctor(weights=weights_enum(args.model)[args.weights])
    else:
        model = ctor(weights=None)
        if args.pth:
            model.load_state_dict(torch.load(args.pth, map_location="cpu"))
    tensors = {name: entry(name, t) for name, t in model.state_dict().items()}
    write_file(args.out, serialize(tensors, {"format": "pt"}))
    print(f"wrote {args.out}: {len(tensors)} tensors of torchvision's {args.model}")
    if args.labels:
        categories = weights_enum(args.model).DEFAULT.meta["categories"]
        write_file(args.labels, ("\n".join(categories) + "\n").encode("utf-8"))
        print(f"wrote {args.labels}: {len(categories)} ImageNet classes")
    return 0


if __name__ == "__main__":
    sys.exit(main())
