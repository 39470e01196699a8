"""The safetensors file layout of the reference implementation, shared by
the reference scripts here (the python safetensors package is not needed).

Tensors are ordered by decreasing dtype alignment, then by name;
"__metadata__" comes first in the header, which is padded with spaces to a
multiple of 8 bytes.
"""

import json
import struct

# Rank of each safetensors dtype in the reference implementation's Dtype
# enum (increasing alignment), which orders the data section.
ST_RANK = {"F16": 13, "BF16": 14, "I32": 15, "F32": 17, "I64": 20}


def serialize(tensors, meta=None):
    """The bytes of a safetensors file. tensors maps a name to (dtype name,
    shape, little-endian bytes); meta, if given, is the string metadata."""
    order = sorted(tensors, key=lambda n: (-ST_RANK[tensors[n][0]], n))
    header = {}
    if meta:
        header["__metadata__"] = dict(sorted(meta.items()))
    off = 0
    for n in order:
        st, shape, b = tensors[n]
        header[n] = {"dtype": st, "shape": shape, "data_offsets": [off, off + len(b)]}
        off += len(b)
    h = json.dumps(header, separators=(",", ":")).encode("utf-8")
    h += b" " * ((8 - len(h) % 8) % 8)
    return struct.pack("<Q", len(h)) + h + b"".join(tensors[n][2] for n in order)
