// zbench's CPU BenchmarkKernels and BenchmarkMatMul points as single-op
// ONNX graphs for the ONNX Runtime peer: the op, its shapes and dtype, its
// work as bench_test's Workload counts it, seeded inputs and a check of
// the output against a float64 computation here.

import { relErr } from "../node/harness.mjs";
import { singleOpModel } from "./onnxgraph.mjs";

// BERT-base's dimensions (bench_test's bertHidden, bertHeads, bertHeadD,
// bertFFN, bertLNEps).
const HIDDEN = 768;
const HEADS = 12;
const HEAD_D = 64;
const FFN = 3072;
const LN_EPS = 1e-12;

// The decode product of BenchmarkMatMul: one row times a [5632, 2048]
// weight, transposed (bench_test's decodeN, decodeK).
const DECODE_N = 5632;
const DECODE_K = 2048;

/** OPSET is the ONNX opset of the graphs: 23, the first with Attention. */
export const OPSET = 23;

/** TOLERANCE is kernels.Tolerance: the largest rel-err of a dtype's result. */
export const TOLERANCE = { f32: 2e-5, f16: 2e-3 };

// The number of sampled entries a MatMul check recomputes (bench_test's
// sampledMatMulErr), and the query-row step of the attention check
// (attentionSetup's 7).
const MATMUL_SAMPLES = 256;
const ATTENTION_ROW_STEP = 7;

/**
 * DTYPES are the dtypes of the points, with their ONNX element type and
 * bytes per value. bf16 is absent: ONNX Runtime's CPU execution provider
 * has no bfloat16 kernel for any of these ops (session creation fails:
 * "Could not find an implementation for MatMul(13)", Relu(14), and the
 * Sqrt, ReduceMax and Expand of Gelu, Softmax and Attention's function
 * bodies; LayerNormalization: "Unsupported data type: 16").
 */
const DTYPES = {
  f32: { onnx: "float32", size: 4 },
  f16: { onnx: "float16", size: 2 },
};

/** F16_NOTE is how ONNX Runtime's CPU execution provider runs the float16 graphs (the peer's test checks it). */
export const F16_NOTE =
  "float16 graphs: the CPU execution provider runs LayerNormalization and Attention in float16 and inserts casts to float32 around MatMul, Relu, Gelu and Softmax, which have no float16 kernels";

/** BF16_NOTE is why the peer has no bf16 rows (the peer's test checks it). */
export const BF16_NOTE = "none: the CPU execution provider has no bfloat16 kernels for these ops";

const f32buf = new Float32Array(1);
const u32buf = new Uint32Array(f32buf.buffer);

/** toHalf is the IEEE binary16 bits of the float32 nearest x, rounded to nearest even. */
export function toHalf(x) {
  f32buf[0] = x;
  const b = u32buf[0];
  const sign = (b >>> 16) & 0x8000;
  const exp = (b >>> 23) & 0xff;
  let mant = b & 0x7fffff;
  if (exp === 0xff) return sign | 0x7c00 | (mant ? 0x200 : 0);
  const e = exp - 127 + 15;
  if (e >= 0x1f) return sign | 0x7c00;
  let shift = 13;
  let h = (e << 10) | (mant >>> 13);
  if (e <= 0) {
    if (e < -10) return sign;
    mant |= 0x800000;
    shift = 14 - e;
    h = mant >>> shift;
  }
  const rem = mant & ((1 << shift) - 1);
  const half = 1 << (shift - 1);
  if (rem > half || (rem === half && h & 1)) h++; // a carry rounds up into the exponent, to infinity at the top
  return sign | h;
}

/** fromHalf is the value of the IEEE binary16 bits h. */
export function fromHalf(h) {
  const sign = h & 0x8000 ? -1 : 1;
  const exp = (h >>> 10) & 0x1f;
  const mant = h & 0x3ff;
  if (exp === 0) return sign * mant * 2 ** -24;
  if (exp === 0x1f) return mant ? NaN : sign * Infinity;
  return sign * (1 + mant / 1024) * 2 ** (exp - 15);
}

/**
 * uniform is n seeded values uniform in [-1, 1), rounded to dt, as float32
 * values: bench_test's uniform in distribution, not in values (its
 * generator, Go's PCG, costs about 0.5 µs a value in JavaScript's BigInt,
 * 15 s for one 4096² operand). The generator is splitmix32 over the seed.
 */
export function uniform(seed, dt, n) {
  const out = new Float32Array(n);
  let s = Math.imul(seed, 0x9e3779b9) >>> 0;
  for (let i = 0; i < n; i++) {
    s = (s + 0x9e3779b9) >>> 0;
    let z = s;
    z = Math.imul(z ^ (z >>> 16), 0x85ebca6b);
    z = Math.imul(z ^ (z >>> 13), 0xc2b2ae35);
    z = (z ^ (z >>> 16)) >>> 0;
    out[i] = (z >>> 8) / 2 ** 23 - 1; // 24 bits: exact in float32
  }
  if (dt === "f16") for (let i = 0; i < n; i++) out[i] = fromHalf(toHalf(out[i]));
  return out;
}

/** erf is the error function in float64: its Taylor series below |x| = 2.5, the continued fraction of erfc above. */
export function erf(x) {
  const a = Math.abs(x);
  if (a < 2.5) {
    // erf x = 2/√π Σ (-1)ⁿ x^(2n+1) / (n! (2n+1))
    let term = x;
    let sum = x;
    for (let n = 1; n < 200; n++) {
      term *= (-x * x) / n;
      const add = term / (2 * n + 1);
      sum += add;
      if (Math.abs(add) < 1e-17 * Math.abs(sum)) break;
    }
    return (2 / Math.sqrt(Math.PI)) * sum;
  }
  if (a > 6) return Math.sign(x);
  // erfc a = exp(-a²)/√π · 1/(a + (1/2)/(a + 1/(a + (3/2)/(a + 2/(a + …)))))
  let f = a;
  for (let k = 60; k >= 1; k--) f = a + k / 2 / f;
  return Math.sign(x) * (1 - Math.exp(-a * a) / Math.sqrt(Math.PI) / f);
}

/** gelu is the exact GELU, x·Φ(x), in float64. */
export function gelu(x) {
  return 0.5 * x * (1 + erf(x / Math.SQRT2));
}

/** map64 is f of each value of x, in float64. */
function map64(x, f) {
  const out = new Float64Array(x.length);
  for (let i = 0; i < x.length; i++) out[i] = f(x[i]);
  return out;
}

/** softmaxRow writes the softmax of x[off, off+n) into out[off, off+n) in float64. */
function softmaxRow(out, x, off, n) {
  let m = -Infinity;
  for (let i = 0; i < n; i++) m = Math.max(m, x[off + i]);
  let sum = 0;
  for (let i = 0; i < n; i++) {
    out[off + i] = Math.exp(x[off + i] - m);
    sum += out[off + i];
  }
  for (let i = 0; i < n; i++) out[off + i] /= sum;
}

/** The float64 references of the ops, from inputs (float32 arrays of the values fed) to [got's indices or null for all, want]. */
const REFERENCES = {
  relu: ({ x }) => [null, map64(x, (v) => Math.max(v, 0))],
  gelu: ({ x }) => [null, map64(x, gelu)],
  softmax: ({ x }, [, , , seq]) => {
    const want = new Float64Array(x.length);
    for (let off = 0; off < x.length; off += seq) softmaxRow(want, x, off, seq);
    return [null, want];
  },
  layernorm: ({ x, scale, bias }, [, d]) => {
    const want = new Float64Array(x.length);
    for (let off = 0; off < x.length; off += d) {
      let mean = 0;
      for (let i = 0; i < d; i++) mean += x[off + i];
      mean /= d;
      let v = 0;
      for (let i = 0; i < d; i++) v += (x[off + i] - mean) ** 2;
      const inv = 1 / Math.sqrt(v / d + LN_EPS);
      for (let i = 0; i < d; i++) want[off + i] = (x[off + i] - mean) * inv * scale[i] + bias[i];
    }
    return [null, want];
  },
  attention: ({ q, k, v }, [batch, heads, seq, d]) => {
    const idx = [];
    const want = [];
    const scores = new Float64Array(seq);
    for (let bh = 0; bh < batch * heads; bh++) {
      const base = bh * seq * d;
      for (let i = 0; i < seq; i += ATTENTION_ROW_STEP) {
        for (let j = 0; j < seq; j++) {
          let dot = 0;
          for (let t = 0; t < d; t++) dot += q[base + i * d + t] * k[base + j * d + t];
          scores[j] = dot / Math.sqrt(d);
        }
        softmaxRow(scores, scores, 0, seq);
        for (let t = 0; t < d; t++) {
          let sum = 0;
          for (let j = 0; j < seq; j++) sum += scores[j] * v[base + j * d + t];
          idx.push(base + i * d + t);
          want.push(sum);
        }
      }
    }
    return [idx, want];
  },
  // out [m, n] = a [m, k] · b [k, n], or b [n, k] transposed (transB).
  matmul: ({ a, b }, [m, n, k], transB) => {
    const idx = [];
    const want = [];
    for (let s = 0; s < MATMUL_SAMPLES; s++) {
      // Spread over the rows and columns: a stride prime to both.
      const i = (s * 7919) % m;
      const j = (s * 104729 + 13) % n;
      let sum = 0;
      for (let p = 0; p < k; p++) sum += a[i * k + p] * (transB ? b[j * k + p] : b[p * n + j]);
      idx.push(i * n + j);
      want.push(sum);
    }
    return [idx, want];
  },
};

/**
 * A point is one benchmark of the peer as bench.mjs runs it: its name, the
 * key its session configuration is calibrated under (model), whether
 * -short runs it, its work (bench_test's Workload: FLOPs and minimum
 * bytes), the tolerance of its rel-err, its ONNX model (source: a file or
 * its bytes) with the free dimensions to fix (overrides), a single-op
 * point's graph (singleOpModel's argument), whether its ns/op is ONNX
 * Runtime's own time (engineTime) rather than the caller's, and prepare,
 * which makes the timed feeds, the preallocated outputs (fetches, or
 * undefined) and the check of one run (a promise of its rel-err).
 * @typedef {{name: string, model: string, short: boolean, flops: number, bytes: number, tol: number, items?: number, unit?: string,
 *   source: () => string | Uint8Array, overrides?: Record<string, number>, graph?: object, engineTime?: boolean,
 *   prepare: (ort: object) => {feeds: object, fetches?: object, check: (session: object) => Promise<number>}}} Point
 */

/** kernelShapes are BenchmarkKernels' (batch, seq) points (bench_test's kernelShapes). */
function kernelShapes(short) {
  return short ? [[1, 128]] : [[8, 128], [8, 384]];
}

/** A single-op point of op in dt with named inputs (shape, seed), the output shape and attributes, as a Point. */
function point({ name, model, short, flops, bytes, dt, op, opType, inputs, outShape, attrs, sizes, transB }) {
  const onnx = DTYPES[dt].onnx;
  const graph = {
    opType,
    opset: OPSET,
    inputs: Object.fromEntries(Object.entries(inputs).map(([n, t]) => [n, { type: onnx, shape: t.shape }])),
    outputs: { y: { type: onnx, shape: outShape } },
    attrs,
  };
  const operands = () => ({
    inputs: Object.fromEntries(
      Object.entries(inputs).map(([n, t]) => [n, { shape: t.shape, values: uniform(t.seed, dt, t.shape.reduce((a, b) => a * b, 1)) }]),
    ),
    output: { name: "y", shape: outShape },
  });
  return {
    name,
    model,
    short,
    flops,
    bytes,
    tol: TOLERANCE[dt],
    op,
    dtype: dt,
    graph,
    source: () => singleOpModel(graph),
    overrides: undefined,
    engineTime: true,
    prepare: (ort) => prepare(ort, { op, dt, sizes, transB, ...operands() }),
  };
}

/** KERNEL_OPS are BenchmarkKernels' ops that one ONNX op computes, in its order. */
export const KERNEL_OPS = ["relu", "gelu", "layernorm", "softmax", "attention"];

/**
 * kernelsPoints are BenchmarkKernels' points of ops in each of dts at each
 * (batch, seq) of shapes, marked short or not.
 */
export function kernelsPoints(ops, dts, shapes, short) {
  const out = [];
  for (const op of ops) {
    for (const dt of dts) {
      const size = DTYPES[dt].size;
      for (const [batch, seq] of shapes) {
        const name = `BenchmarkKernels/op=${op}/dev=cpu/dtype=${dt}/batch=${batch}/seq=${seq}`;
        const common = { name, model: `${op}-${dt}`, short, dt, op };
        if (op === "relu" || op === "gelu") {
          const shape = [batch * seq, FFN];
          const n = batch * seq * FFN;
          out.push(point({ ...common, opType: op === "relu" ? "Relu" : "Gelu", attrs: op === "gelu" ? { approximate: "none" } : {},
            inputs: { x: { shape, seed: 10 } }, outShape: shape, sizes: shape, flops: (op === "relu" ? 1 : 8) * n, bytes: 2 * n * size }));
        } else if (op === "layernorm") {
          const rows = batch * seq;
          const shape = [rows, HIDDEN];
          out.push(point({ ...common, opType: "LayerNormalization", attrs: { axis: { int: -1 }, epsilon: { float: LN_EPS } },
            inputs: { x: { shape, seed: 11 }, scale: { shape: [HIDDEN], seed: 12 }, bias: { shape: [HIDDEN], seed: 13 } },
            outShape: shape, sizes: shape, flops: 8 * rows * HIDDEN, bytes: (2 * rows * HIDDEN + 2 * HIDDEN) * size }));
        } else if (op === "softmax") {
          const shape = [batch, HEADS, seq, seq];
          const n = batch * HEADS * seq * seq;
          out.push(point({ ...common, opType: "Softmax", attrs: { axis: { int: -1 } }, inputs: { x: { shape, seed: 14 } },
            outShape: shape, sizes: shape, flops: 5 * n, bytes: 2 * n * size }));
        } else if (op === "attention") {
          const shape = [batch, HEADS, seq, HEAD_D];
          const n = batch * HEADS * seq * HEAD_D;
          out.push(point({ ...common, opType: "Attention", attrs: {},
            inputs: { q: { shape, seed: 15 }, k: { shape, seed: 16 }, v: { shape, seed: 17 } }, outShape: shape, sizes: shape,
            flops: 4 * batch * HEADS * seq * seq * HEAD_D, bytes: 4 * n * size }));
        } else {
          throw new Error(`op=${op}: not one of ${KERNEL_OPS.join(", ")}`);
        }
      }
    }
  }
  return out;
}

/**
 * matmulPoints are BenchmarkMatMul's CPU points that ONNX Runtime runs as
 * one MatMul: square f32 products (the resident ones: on the CPU ONNX
 * Runtime reads its inputs from and writes its output to the caller's
 * memory, so there is no transfer to add), f16 at 1024, and the f32
 * decode product (Gemm with the weight transposed). int8, the FP8 types
 * and the weight-only formats have no single ONNX op of the same
 * semantics.
 */
function matmulPoints(short) {
  const cases = short ? [["f32", 256], ["f32", 1024]] : [["f32", 256], ["f32", 512], ["f32", 1024], ["f32", 2048], ["f32", 4096], ["f16", 1024]];
  const out = cases.map(([dt, n]) => squareMatMul(dt, n, short));
  if (!short) out.push(decodeMatMul(DECODE_N, DECODE_K));
  return out;
}

/** decodeMatMul is BenchmarkMatMul's decode point out [1, n] = x [1, k] · Wᵀ with W [n, k], in f32 (Gemm, transB). */
export function decodeMatMul(n, k) {
  return point({
    name: `BenchmarkMatMul/dev=cpu/dtype=f32/m=1/n=${n}/k=${k}/transfer=resident`, model: "matmul-f32-decode", short: false, dt: "f32", op: "matmul",
    opType: "Gemm", attrs: { transB: { int: 1 } }, inputs: { a: { shape: [1, k], seed: 6 }, b: { shape: [n, k], seed: 5 } },
    outShape: [1, n], sizes: [1, n, k], transB: true, flops: 2 * n * k, bytes: 4 * n * k,
  });
}

/** squareMatMul is BenchmarkMatMul's point out [n, n] = a [n, n] · b [n, n] in dt, resident. */
export function squareMatMul(dt, n, short) {
  return point({
    name: `BenchmarkMatMul/dev=cpu/dtype=${dt}/m=${n}/n=${n}/k=${n}/transfer=resident`, model: `matmul-${dt}-${n}`, short, dt, op: "matmul",
    opType: "MatMul", attrs: {}, inputs: { a: { shape: [n, n], seed: 1 }, b: { shape: [n, n], seed: 2 } }, outShape: [n, n], sizes: [n, n, n],
    flops: 2 * n * n * n, bytes: 3 * n * n * DTYPES[dt].size,
  });
}

/** kernelPoints are the peer's BenchmarkKernels and BenchmarkMatMul points, -short's set or the full one. */
export function kernelPoints(short) {
  return [...matmulPoints(short), ...kernelsPoints(KERNEL_OPS, short ? ["f32"] : ["f32", "f16"], kernelShapes(short), short)];
}

/**
 * prepare makes a single-op point's feeds (the timed inputs, as ONNX
 * Runtime tensors over the values), its preallocated output (fetches) and
 * its check: one run, and the rel-err of its output against the float64
 * reference of the same inputs.
 */
function prepare(ort, { op, dt, sizes, transB, inputs, output }) {
  const onnx = DTYPES[dt].onnx;
  const tensor = (values, shape) => {
    if (onnx === "float32") return new ort.Tensor(onnx, values, shape);
    return new ort.Tensor(onnx, Uint16Array.from(values, toHalf), shape);
  };
  const feeds = Object.fromEntries(Object.entries(inputs).map(([n, t]) => [n, tensor(t.values, t.shape)]));
  const outLen = output.shape.reduce((a, b) => a * b, 1);
  const out = onnx === "float32" ? new Float32Array(outLen) : new Uint16Array(outLen);
  const fetches = { [output.name]: new ort.Tensor(onnx, out, output.shape) };
  const check = async (session) => {
    out.fill(0);
    await session.run(feeds, fetches);
    const values = Object.fromEntries(Object.entries(inputs).map(([n, t]) => [n, t.values]));
    const [idx, want] = REFERENCES[op](values, sizes, transB);
    const read = onnx === "float32" ? (i) => out[i] : (i) => fromHalf(out[i]);
    const got = new Float64Array(idx ? idx.length : outLen);
    for (let i = 0; i < got.length; i++) got[i] = read(idx ? idx[i] : i);
    return relErr(got, want);
  };
  return { feeds, fetches, check };
}
