// A reader of the safetensors files of testdata/golden: the header and
// the I32 and F32 tensors the peer test compares with.

import fs from "node:fs";

const TYPES = { I32: Int32Array, F32: Float32Array };

/**
 * readSafetensors reads file's tensors of types I32 and F32 (little-endian)
 * and its metadata.
 * @param {string} file
 * @returns {{metadata: Record<string, string>, tensors: Map<string, {shape: number[], data: Int32Array | Float32Array}>}}
 */
export function readSafetensors(file) {
  const buf = fs.readFileSync(file);
  if (buf.length < 8) throw new Error(`${file}: ${buf.length} bytes, too short for a safetensors header`);
  const n = Number(buf.readBigUInt64LE(0));
  if (8 + n > buf.length) throw new Error(`${file}: header of ${n} bytes past the end of the file (${buf.length} bytes)`);
  let header;
  try {
    header = JSON.parse(buf.subarray(8, 8 + n).toString("utf8"));
  } catch (err) {
    throw new Error(`${file}: header: ${err.message}`, { cause: err });
  }
  if (header === null || typeof header !== "object" || Array.isArray(header)) throw new Error(`${file}: header is not a JSON object`);
  const base = 8 + n;
  const tensors = new Map();
  const isCount = (x) => Number.isSafeInteger(x) && x >= 0;
  for (const [name, t] of Object.entries(header)) {
    if (name === "__metadata__") continue;
    if (
      t === null ||
      typeof t !== "object" ||
      !Array.isArray(t.shape) ||
      !t.shape.every(isCount) ||
      !Array.isArray(t.data_offsets) ||
      t.data_offsets.length !== 2 ||
      !t.data_offsets.every(isCount)
    ) {
      throw new Error(`${file}: tensor ${name}: want {dtype, shape, data_offsets} of non-negative integers, got ${JSON.stringify(t)}`);
    }
    const Type = TYPES[t.dtype];
    if (!Type) continue;
    const [begin, end] = t.data_offsets;
    const count = t.shape.reduce((a, b) => a * b, 1);
    if (end - begin !== count * Type.BYTES_PER_ELEMENT || base + end > buf.length) {
      throw new Error(`${file}: tensor ${name}: data_offsets ${begin}..${end} do not hold ${t.dtype} ${JSON.stringify(t.shape)}`);
    }
    const bytes = buf.subarray(base + begin, base + end);
    const data = new Type(count);
    const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.length);
    for (let i = 0; i < count; i++) data[i] = Type === Int32Array ? view.getInt32(4 * i, true) : view.getFloat32(4 * i, true);
    tensors.set(name, { shape: t.shape, data });
  }
  return { metadata: header.__metadata__ ?? {}, tensors };
}
