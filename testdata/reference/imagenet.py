#!/usr/bin/env python3
"""Reference for zbench's ImageNet preprocessing (models/imagenet):
torchvision's evaluation transform on PIL images, and PIL's decoding and
resizing under it.

The transform is the one torchvision's ImageNet classifiers are evaluated
with, applied as torchvision applies it to a PIL image:

  img = PIL.Image.open(path).convert("RGB")
  T.Compose([T.Resize(256), T.CenterCrop(224), T.ToTensor(),
             T.Normalize((0.485, 0.456, 0.406), (0.229, 0.224, 0.225))])(img)

Resize(256) takes the short side to 256 and the long side to
int(256 * long / short), with PIL's Image.resize(size, BILINEAR);
CenterCrop(224) pads with zeros when the image is smaller and crops at
int(round((H - 224) / 2.0)); ToTensor divides by 255 and Normalize
subtracts the mean and divides by the std, in float32.

Files written, under testdata/golden/imagenet/:

  cat.png, cat.jpg        Chelsea the cat (skimage's chelsea.png, CC0 by the
                          photographer, Stefan van der Walt), 451x300 resized
                          to 390x260 with PIL's LANCZOS: landscape, downscaled
                          by Resize(256) to 384x256
  coffee.png, coffee.jpg  a cup of coffee (skimage's coffee.png, CC0 by the
                          photographer, Rachel Michetti), the portrait crop
                          (150, 0, 450, 400) resized to 180x240: portrait and
                          smaller than 256, upscaled to 256x341
  camera.png              the gray-level "camera" photograph (skimage's
                          camera.png, CC0 by the photographer, Lav Varshney),
                          the crop (0, 64, 512, 448): an 8-bit grayscale PNG
                          (mode L), downscaled to 341x256

  The sources are the photographs of Debian's python3-skimage data directory
  (/usr/lib/python3/dist-packages/skimage/data); their licences are those
  skimage.data's docstrings state (all CC0: freely redistributable). Each
  PNG is PIL's PNG, each JPEG PIL's baseline JPEG at quality 90 (4:2:0).

  decode/png-*.png        tiny PNGs of every colour type and bit depth (gray
                          1, 2, 4, 8 and 16 bits, with and without tRNS; RGB 8
                          and 16, with and without tRNS; palettes of 1, 2, 4
                          and 8 bits, short ones with indices past their end,
                          and with tRNS; gray+alpha and RGBA, 8 and 16; one
                          Adam7-interlaced), seeded random samples, written by
                          this script's own PNG encoder
  decode/jpeg-*.jpg       small crops of the cat as PIL writes them: 4:2:0,
                          4:2:2 and 4:4:4, progressive, grayscale, CMYK (Adobe),
                          4:2:0 and 4:2:2 narrower than 5 pixels (no fancy
                          upsampling in libjpeg), a 1x1; and 4:4:0 and 4:1:1
                          JPEGs made by rewriting a 4:2:2 and a 4:2:0 JPEG's
                          frame header (sampling factors and size; the same
                          entropy-coded blocks, so the picture is scrambled
                          but valid)

and testdata/golden/imagenet.safetensors (safetensors_file.py's layout):

  tensors   "<file>/<role>" for each image file above, <file> its path
            relative to testdata/golden/imagenet:
              decoded       U8 [H, W, 3]: np.asarray(Image.open(f).convert("RGB"))
                            (the decode/ files only)
              resized       U8 [H', W', 3]: T.Resize(256) of the decoded image,
                            which is PIL's resize((W', H'), BILINEAR) (cat,
                            coffee, camera only)
              pixel_values  F32 [3, 224, 224]: the whole transform above (cat,
                            coffee, camera only)
            "resize/<case>/input" U8 [h, w, 3] (seeded random pixels) and
            "resize/<case>/output" U8 [H, W, 3]: PIL's
            Image.resize((W, H), BILINEAR), for identity, one-pass, 2x down,
            large reductions, upscaling and 1-pixel sizes;
            "crop/<case>/input" U8 [h, w, 3] and "crop/<case>/output" U8
            [H, W, 3]: T.CenterCrop((H, W)), with and without padding;
            "normalize/input" U8 [1, 256, 3] (value v at column v) and
            "normalize/output" F32 [3, 1, 256]: T.ToTensor then T.Normalize.
  metadata  "<file>", "resize/<case>", "crop/<case>": compact JSON (the
            source, crop box and size of an image file, its format, mode as
            PIL opens it, and its resized size; a resize case's "size"
            [W, H]; a crop case's "crop" [H, W]); plus "reference" (torch,
            torchvision, Pillow and libjpeg-turbo versions), "script",
            "seed" and "format".

Usage:

  /usr/bin/python3 testdata/reference/imagenet.py           # write
  /usr/bin/python3 testdata/reference/imagenet.py --check   # verify current

It needs Debian's python3-torchvision, python3-pil and python3-skimage (the
photographs): scripts/install-python-ref.sh --golden installs them (make
golden runs it). PNG and JPEG bytes depend on the zlib and libjpeg versions
PIL uses; --check is exact for the versions "reference" names.
"""

import io
import json
import os
import struct
import sys
import warnings
import zlib

import numpy as np
import PIL
from PIL import Image, features
import torch
import torchvision
import torchvision.transforms as T

import golden_files
from safetensors_file import entry, serialize

SCRIPT = "testdata/reference/imagenet.py"
FORMAT = "zbench-golden/1: tensors <file-or-case>/<role>, metadata <file-or-case> = JSON params"
REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SKIMAGE_DATA = "/usr/lib/python3/dist-packages/skimage/data"
IMAGE_DIR = "testdata/golden/imagenet"
GOLDEN = "testdata/golden/imagenet.safetensors"
SEED = 20261203
JPEG_QUALITY = 90
MEAN = (0.485, 0.456, 0.406)
STD = (0.229, 0.224, 0.225)

# The photographs: name, skimage file, licence, PIL mode, crop box, size
# (None: the crop as it is), whether a JPEG is written too.
PHOTOS = [
    ("cat", "chelsea.png", "CC0 (Stefan van der Walt)", "RGB", (0, 0, 451, 300), (390, 260), True),
    ("coffee", "coffee.png", "CC0 (Rachel Michetti)", "RGB", (150, 0, 450, 400), (180, 240), True),
    ("camera", "camera.png", "CC0 (Lav Varshney)", "L", (0, 64, 512, 448), None, False),
]


def transform():
    """torchvision's ImageNet evaluation transform."""
    return T.Compose([T.Resize(256), T.CenterCrop(224), T.ToTensor(), T.Normalize(MEAN, STD)])


def u8(a):
    """A uint8 tensor of the array a."""
    return torch.from_numpy(np.array(a, dtype=np.uint8))


def rgb_array(data):
    """What PIL decodes the image file bytes data to, as RGB [H, W, 3]."""
    with warnings.catch_warnings():
        # convert("RGB") drops a palette's tRNS, which PIL warns about.
        warnings.filterwarnings("ignore", "Palette images with Transparency", UserWarning)
        return np.asarray(Image.open(io.BytesIO(data)).convert("RGB"))


# ---------------------------------------------------------------------------
# A minimal PNG encoder (every colour type and bit depth, Adam7), for the
# decode/ files PIL cannot write (16-bit RGB, short palettes, ...).


def png_chunk(kind, data):
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)


ADAM7 = [(0, 0, 8, 8), (4, 0, 8, 8), (0, 4, 4, 8), (2, 0, 4, 4), (0, 2, 2, 4), (1, 0, 2, 2), (0, 1, 1, 2)]


def pack_row(samples, depth):
    """The bytes of one row of samples (a 1-D integer array, channels
    interleaved) at bit depth depth, big-endian, padded to a byte."""
    if depth == 16:
        return samples.astype(">u2").tobytes()
    if depth == 8:
        return samples.astype(np.uint8).tobytes()
    per = 8 // depth
    out = bytearray((len(samples) + per - 1) // per)
    for i, s in enumerate(samples):
        out[i // per] |= int(s) << (8 - depth * (i % per + 1))
    return bytes(out)


def encode_png(samples, depth, ctype, extra=b"", interlace=False):
    """PNG bytes of samples [H, W, C] (integers below 2**depth), colour type
    ctype, extra chunks (PLTE, tRNS) before IDAT, every row with filter 0."""
    h, w, _ = samples.shape
    raw = bytearray()
    passes = ADAM7 if interlace else [(0, 0, 1, 1)]
    for x0, y0, dx, dy in passes:
        sub = samples[y0::dy, x0::dx]
        if sub.shape[0] == 0 or sub.shape[1] == 0:
            continue
        for row in sub:
            raw += b"\0" + pack_row(row.reshape(-1), depth)
    ihdr = struct.pack(">IIBBBBB", w, h, depth, ctype, 0, 0, 1 if interlace else 0)
    return (b"\x89PNG\r\n\x1a\n" + png_chunk(b"IHDR", ihdr) + extra
            + png_chunk(b"IDAT", zlib.compress(bytes(raw), 9)) + png_chunk(b"IEND", b""))


def png_cases(rng):
    """{name: PNG bytes} of decode/png-*.png."""
    w, h = 7, 5
    cases = {}

    def rand(depth, channels):
        return rng.integers(0, 1 << depth, size=(h, w, channels), dtype=np.int64)

    def trns_gray(v):
        return png_chunk(b"tRNS", struct.pack(">H", int(v)))

    for depth in (1, 2, 4, 8, 16):
        s = rand(depth, 1)
        if depth == 16:
            # PIL opens 16-bit gray as mode I and clips it to 0..255 in
            # convert("RGB"): put most values in and around that range.
            s[:3] = rng.integers(0, 300, size=(3, w, 1))
            s[0, :4, 0] = [0, 254, 255, 256]
        cases[f"gray{depth}"] = encode_png(s, depth, 0)
    s = rand(8, 1)
    cases["gray8-trns"] = encode_png(s, 8, 0, trns_gray(s[0, 0, 0]))
    s = rand(16, 1)
    s[:2] = rng.integers(0, 300, size=(2, w, 1))
    cases["gray16-trns"] = encode_png(s, 16, 0, trns_gray(s[1, 1, 0]))
    for depth in (8, 16):
        s = rand(depth, 3)
        cases[f"rgb{depth}"] = encode_png(s, depth, 2)
        trns = png_chunk(b"tRNS", struct.pack(">HHH", *[int(v) for v in s[2, 3]]))
        cases[f"rgb{depth}-trns"] = encode_png(s, depth, 2, trns)
        cases[f"graya{depth}"] = encode_png(rand(depth, 2), depth, 4)
        cases[f"rgba{depth}"] = encode_png(rand(depth, 4), depth, 6)
    for depth in (1, 2, 4, 8):
        n = 1 << depth
        full = rng.integers(0, 256, size=(n, 3)).astype(np.uint8)
        cases[f"palette{depth}"] = encode_png(rand(depth, 1), depth, 3, png_chunk(b"PLTE", full.tobytes()))
    # Palettes shorter than their indices reach: PIL gives index i the gray
    # (i, i, i), Go's decoder opaque black.
    short = rng.integers(0, 256, size=(3, 3)).astype(np.uint8)
    cases["palette2-short"] = encode_png(rand(2, 1), 2, 3, png_chunk(b"PLTE", short.tobytes()))
    short = rng.integers(0, 256, size=(5, 3)).astype(np.uint8)
    s = rand(8, 1)
    s[0, :3, 0] = [0, 4, 5]
    cases["palette8-short"] = encode_png(s, 8, 3, png_chunk(b"PLTE", short.tobytes()))
    pal = rng.integers(0, 256, size=(16, 3)).astype(np.uint8)
    alpha = rng.integers(0, 256, size=10).astype(np.uint8)
    chunks = png_chunk(b"PLTE", pal.tobytes()) + png_chunk(b"tRNS", alpha.tobytes())
    cases["palette4-trns"] = encode_png(rand(4, 1), 4, 3, chunks)
    big = rng.integers(0, 256, size=(11, 13, 3), dtype=np.int64)
    cases["rgb8-adam7"] = encode_png(big, 8, 2, interlace=True)
    return cases


# ---------------------------------------------------------------------------
# JPEG variants


def relabel_jpeg(data, factors, width, height):
    """data, a baseline JPEG, with its SOF0 frame header's size and
    per-component sampling factors [(h, v), ...] replaced."""
    i = 2
    while i < len(data):
        assert data[i] == 0xFF, i
        marker = data[i + 1]
        length = struct.unpack(">H", data[i + 2:i + 4])[0]
        if marker == 0xC0:
            seg = bytearray(data[i:i + 2 + length])
            struct.pack_into(">HH", seg, 5, height, width)
            assert seg[9] == len(factors)
            for c, (h, v) in enumerate(factors):
                seg[10 + 3 * c + 1] = (h << 4) | v
            return data[:i] + bytes(seg) + data[i + 2 + length:]
        i += 2 + length
    raise ValueError("no SOF0 marker")


def png_bytes(img):
    """PIL's PNG of img."""
    buf = io.BytesIO()
    img.save(buf, "PNG")
    return buf.getvalue()


def jpeg_bytes(img, **opts):
    """PIL's baseline JPEG of img at JPEG_QUALITY (4:2:0 unless opts say)."""
    buf = io.BytesIO()
    img.save(buf, "JPEG", quality=JPEG_QUALITY, **opts)
    return buf.getvalue()


def jpeg_cases(cat):
    """{name: JPEG bytes} of decode/jpeg-*.jpg, from crops of the cat."""
    crop = cat.crop((120, 60, 157, 89))  # 37x29, odd on both sides
    cases = {
        "420": jpeg_bytes(crop),
        "422": jpeg_bytes(crop, subsampling=1),
        "444": jpeg_bytes(crop, subsampling=0),
        "progressive": jpeg_bytes(crop, progressive=True),
        "gray": jpeg_bytes(crop.convert("L")),
        "cmyk": jpeg_bytes(crop.convert("CMYK")),
        "420-narrow": jpeg_bytes(cat.crop((200, 100, 203, 109))),  # 3x9
        "422-narrow": jpeg_bytes(cat.crop((210, 100, 214, 105)), subsampling=1),  # 4x5
        "420-1x1": jpeg_bytes(cat.crop((220, 110, 221, 111))),
    }
    # 4:2:2 30x13 has 2x2 MCUs of 16x8 (blocks Y Y Cb Cr); relabelled 4:4:0
    # 13x30 has 2x2 MCUs of 8x16 with the same blocks.
    src = jpeg_bytes(cat.crop((100, 150, 130, 163)), subsampling=1)
    cases["440"] = relabel_jpeg(src, [(1, 2), (1, 1), (1, 1)], 13, 30)
    # 4:2:0 30x30 has 2x2 MCUs of 16x16 (Y Y Y Y Cb Cr); relabelled 4:1:1
    # 60x13 has 2x2 MCUs of 32x8.
    src = jpeg_bytes(cat.crop((300, 150, 330, 180)))
    cases["411"] = relabel_jpeg(src, [(4, 1), (1, 1), (1, 1)], 60, 13)
    return cases


# ---------------------------------------------------------------------------
# Resize and crop cases


RESIZE_CASES = [
    # name, input (w, h), output (w, h)
    ("identity", (13, 11), (13, 11)),
    ("horizontal_only", (13, 11), (5, 11)),
    ("vertical_only", (13, 11), (13, 4)),
    ("down2x", (16, 12), (8, 6)),
    ("down_odd", (50, 37), (33, 29)),
    ("down_large", (97, 61), (3, 2)),
    ("up", (7, 5), (23, 17)),
    ("up_down", (9, 40), (31, 7)),
    ("from_1x1", (1, 1), (5, 3)),
    ("to_1x1", (13, 11), (1, 1)),
    ("column", (1, 9), (4, 3)),
    ("row_to_column", (9, 1), (1, 6)),
    ("up_small_factor", (255, 3), (256, 3)),
]

CROP_CASES = [
    # name, input (w, h), crop (h, w)
    ("even", (10, 8), (4, 6)),
    ("odd_half_to_even", (9, 7), (4, 4)),  # offsets round(2.5)=2, round(1.5)=2
    ("odd_up", (11, 9), (4, 4)),  # round(3.5)=4, round(2.5)=2
    ("pad_both", (3, 2), (6, 7)),
    ("pad_width", (4, 9), (5, 7)),
    ("pad_height", (9, 4), (7, 5)),
    ("same", (5, 4), (4, 5)),
]


def resize_cases(rng, tensors, meta):
    for name, (w, h), (ow, oh) in RESIZE_CASES:
        a = rng.integers(0, 256, size=(h, w, 3), dtype=np.uint8)
        out = np.asarray(Image.fromarray(a, "RGB").resize((ow, oh), Image.BILINEAR))
        assert out.shape == (oh, ow, 3)
        key = f"resize/{name}"
        tensors[f"{key}/input"] = u8(a)
        tensors[f"{key}/output"] = u8(out)
        meta[key] = {"size": [ow, oh]}


def crop_cases(rng, tensors, meta):
    for name, (w, h), (ch, cw) in CROP_CASES:
        a = rng.integers(1, 256, size=(h, w, 3), dtype=np.uint8)  # 0 only where padded
        out = np.asarray(T.CenterCrop((ch, cw))(Image.fromarray(a, "RGB")))
        assert out.shape == (ch, cw, 3)
        key = f"crop/{name}"
        tensors[f"{key}/input"] = u8(a)
        tensors[f"{key}/output"] = u8(out)
        meta[key] = {"crop": [ch, cw]}


def normalize_case(tensors):
    a = np.repeat(np.arange(256, dtype=np.uint8)[None, :, None], 3, axis=2)
    out = T.Normalize(MEAN, STD)(T.ToTensor()(Image.fromarray(a, "RGB")))
    assert out.dtype == torch.float32 and list(out.shape) == [3, 1, 256]
    tensors["normalize/input"] = u8(a)
    tensors["normalize/output"] = out


# ---------------------------------------------------------------------------


def photo(source, mode, box, size):
    """The derived copy of one of skimage's photographs."""
    img = Image.open(os.path.join(SKIMAGE_DATA, source)).convert(mode).crop(box)
    if size is not None:
        img = img.resize(size, Image.LANCZOS)
    return img


def add_photo_file(rel, data, params, tensors, meta):
    """The resized and pixel_values of one photograph's file."""
    img = Image.open(io.BytesIO(data))
    params = dict(params, mode=img.mode, size=list(img.size))
    img = img.convert("RGB")
    resized = T.Resize(256)(img)
    # torchvision's Resize on a PIL image is PIL's resize with BILINEAR.
    direct = img.resize(resized.size, Image.BILINEAR)
    assert np.array_equal(np.asarray(direct), np.asarray(resized)), rel
    params["resized"] = list(resized.size)
    x = transform()(img)
    assert x.dtype == torch.float32 and list(x.shape) == [3, 224, 224], rel
    tensors[f"{rel}/resized"] = u8(np.asarray(resized))
    tensors[f"{rel}/pixel_values"] = x
    meta[rel] = params


def build():
    """{repo-relative path: bytes} of every file this script writes."""
    rng = np.random.default_rng(SEED)
    files, tensors, meta = {}, {}, {}
    cat = None
    for name, source, licence, mode, box, size, jpeg in PHOTOS:
        img = photo(source, mode, box, size)
        if name == "cat":
            cat = img
        params = {"source": f"skimage/data/{source}", "licence": licence, "crop": list(box),
                  "scaled": list(size) if size else None}
        out = {f"{name}.png": ("png", png_bytes(img))}
        if jpeg:
            out[f"{name}.jpg"] = ("jpeg", jpeg_bytes(img))
        for rel, (fmt, data) in out.items():
            files[f"{IMAGE_DIR}/{rel}"] = data
            add_photo_file(rel, data, dict(params, format=fmt), tensors, meta)
    decode = {f"decode/png-{k}.png": ("png", v) for k, v in png_cases(rng).items()}
    decode.update({f"decode/jpeg-{k}.jpg": ("jpeg", v) for k, v in jpeg_cases(cat).items()})
    for rel, (fmt, data) in decode.items():
        files[f"{IMAGE_DIR}/{rel}"] = data
        img = Image.open(io.BytesIO(data))
        meta[rel] = {"format": fmt, "mode": img.mode, "size": list(img.size)}
        tensors[f"{rel}/decoded"] = u8(rgb_array(data))
    resize_cases(rng, tensors, meta)
    crop_cases(rng, tensors, meta)
    normalize_case(tensors)

    st_meta = {
        "reference": (f"torch {torch.__version__}, torchvision {torchvision.__version__}, "
                      f"Pillow {PIL.__version__}, libjpeg-turbo {features.version('libjpeg_turbo')}, "
                      f"zlib {features.version('zlib')}"),
        "script": SCRIPT,
        "seed": str(SEED),
        "format": FORMAT,
    }
    for k, p in meta.items():
        st_meta[k] = json.dumps(p, sort_keys=True, separators=(",", ":"))
    files[GOLDEN] = serialize({n: entry(n, t) for n, t in tensors.items()}, st_meta)
    return files


def main():
    return golden_files.main(__doc__, build, REPO, SCRIPT)


if __name__ == "__main__":
    sys.exit(main())
