// llama.cpp loads what zbench quantize --format gguf writes: llama-tiny
// (testdata/golden/llama-tiny) in Q8_0 and Q4_0, each run in llama.cpp
// and checked two ways. Against the PyTorch reference's float64
// generation golden, within the bounds that the reference writer's GGUF
// goldens meet (bench_test.mjs): llama.cpp ran llama-tiny, quantized. And
// against llama.cpp's own logits on the reference writer's file of the
// same type (testdata/reference/gguf.py, which follows the format's rules
// without zbench's code): the same weights, so the same logits. zbench on
// the same file would be no check: zbench's reader would agree with a
// wrong convention of its own writer. The second check is the sharp one:
// the tiny model's attention moves its logits so little that a file with
// the q and k rows in Hugging Face's order (the writer's likeliest
// mistake) still meets the reference's bounds (rel-err 0.025 in Q8_0
// against 0.010 and a bound of 0.1; 0.138 in Q4_0 against 0.136), while
// its logits differ from the reference writer's file by far more than
// rounding. That file, and a file of the other type, are kept as cases
// that must fail. Run by make peer-test:
//
//   node --test baselines/peers/llamacpp/quantize_test.mjs
//
// ZBENCH_BIN names a zbench binary to use; else the test builds one.

import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { after, before, describe, test } from "node:test";
import { fileURLToPath } from "node:url";

import { installDir, loadLlamaCpp } from "./lib/engine.mjs";
import { relErr } from "../node/harness.mjs";
import { GENERATE_GOLDEN, againstReference } from "./lib/reference.mjs";
import { readSafetensors } from "./lib/safetensors.mjs";

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../../..");
const CHECKPOINT = path.join(ROOT, "testdata/golden/llama-tiny");

/** REFERENCE_FILES are testdata/reference/gguf.py's files of llama-tiny, by type. */
const REFERENCE_FILES = new Map([
  ["Q8_0", path.join(ROOT, "testdata/golden/llama-tiny-gguf/model-q8_0.gguf")],
  ["Q4_0", path.join(ROOT, "testdata/golden/llama-tiny-gguf/model-q4_0.gguf")],
]);

/**
 * SAME_WEIGHTS bounds the relative difference of llama.cpp's logits on two
 * files of the same weights: one thread, the same graph, so nothing but
 * the weights can differ (measured: 0).
 */
const SAME_WEIGHTS = 1e-6;

/** BLOCKS are the ggml types a q or k projection may have here, by number: values and bytes per block. */
const BLOCKS = new Map([
  [0, { values: 1, bytes: 4 }], // F32
  [1, { values: 1, bytes: 2 }], // F16
  [2, { values: 32, bytes: 18 }], // Q4_0
  [8, { values: 32, bytes: 34 }], // Q8_0
]);

/** zbenchBinary returns ZBENCH_BIN, or builds cmd/zbench into dir. */
function zbenchBinary(dir) {
  if (process.env.ZBENCH_BIN) return process.env.ZBENCH_BIN;
  const bin = path.join(dir, "zbench");
  const r = spawnSync("go", ["build", "-o", bin, "./cmd/zbench"], {
    cwd: ROOT,
    encoding: "utf8",
    env: { GOTOOLCHAIN: "local", ...process.env },
    timeout: 600_000,
  });
  if (r.status !== 0) throw new Error(`go build ./cmd/zbench: exit status ${r.status}: ${r.error?.message ?? ""}${r.stderr}`);
  return bin;
}

/** quantize writes llama-tiny as a GGUF file of type with zbench quantize, returning its path. */
function quantize(bin, dir, type) {
  const out = path.join(dir, `llama-tiny-${type}.gguf`);
  const args = ["quantize", "--model", "llama", "--weights", CHECKPOINT, "--format", "gguf", "--type", type, "--out", out];
  const r = spawnSync(bin, args, { encoding: "utf8", timeout: 120_000 });
  if (r.status !== 0) throw new Error(`zbench ${args.join(" ")}: exit status ${r.status}: ${r.stderr}`);
  return out;
}

/**
 * withHFOrder copies the GGUF file src to dst with the rows of every
 * attn_q and attn_k tensor put back in Hugging Face's order: the file a
 * writer that forgot llama.cpp's q/k interleaving would write. Each head's
 * rows (i, j) for i < headDim/2, j < 2, stored at 2i+j, go to j·headDim/2+i.
 * @param {object} fileInfo node-llama-cpp's fileInfo of src
 */
function withHFOrder(src, dst, fileInfo) {
  const buf = fs.readFileSync(src);
  const att = fileInfo.metadata.llama.attention;
  let n = 0;
  for (const t of fileInfo.tensorInfo) {
    const m = /^blk\.\d+\.attn_([qk])\.weight$/.exec(t.name);
    if (!m) continue;
    const heads = m[1] === "q" ? att.head_count : att.head_count_kv;
    const block = BLOCKS.get(t.ggmlType);
    if (!block) throw new Error(`${src}: ${t.name} has ggml type ${t.ggmlType}`);
    const [cols, rows] = t.dimensions.map(Number);
    const rowBytes = (cols / block.values) * block.bytes;
    const headDim = rows / heads;
    const data = buf.subarray(t.fileOffset, t.fileOffset + rows * rowBytes);
    const orig = Buffer.from(data);
    for (let h = 0; h < heads; h++) {
      for (let i = 0; i < headDim / 2; i++) {
        for (let j = 0; j < 2; j++) {
          const from = h * headDim + 2 * i + j;
          const to = h * headDim + j * (headDim / 2) + i;
          orig.copy(data, to * rowBytes, from * rowBytes, (from + 1) * rowBytes);
        }
      }
    }
    n++;
  }
  if (n === 0) throw new Error(`${src}: no attn_q or attn_k tensors`);
  fs.writeFileSync(dst, buf);
}

describe("llama.cpp runs zbench quantize --format gguf's files", () => {
  let dir;
  let bin;
  let engine;
  let golden;
  const files = new Map();
  const referenceLogits = new Map();
  before(async () => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), "llamacpp-quantize-"));
    bin = zbenchBinary(dir);
    for (const type of ["Q8_0", "Q4_0"]) files.set(type, quantize(bin, dir, type));
    engine = await loadLlamaCpp(installDir());
    golden = readSafetensors(GENERATE_GOLDEN);
    for (const [type, file] of REFERENCE_FILES) {
      const r = await againstReference(engine, file, type, golden);
      assert.deepEqual(r.failures, [], `${file}: the reference writer's file`);
      referenceLogits.set(type, r.logits);
    }
  });
  after(async () => {
    await engine?.dispose();
    if (dir) fs.rmSync(dir, { recursive: true });
  });

  for (const type of ["Q8_0", "Q4_0"]) {
    test(`${type}: logits against the PyTorch reference and the reference writer's file`, async (t) => {
      const r = await againstReference(engine, files.get(type), type, golden);
      const diff = relErr(r.logits, referenceLogits.get(type));
      t.diagnostic(`${type}: prompt 0 logits rel-err ${r.relErr.toExponential(2)}, teacher-forced ${r.forced} of ${r.all}; tensors ${r.model.tensorTypes}; against the reference writer's file ${diff}`);
      assert.deepEqual(r.failures, []);
      assert.ok(diff <= SAME_WEIGHTS, `logits differ from llama.cpp's on ${REFERENCE_FILES.get(type)} by ${diff}, over ${SAME_WEIGHTS}`);
    });

    test(`${type} with q and k rows in Hugging Face's order: not the reference's model`, async (t) => {
      const src = files.get(type);
      const model = await engine.loadModel(src);
      const info = model.fileInfo;
      await model.dispose();
      const bad = path.join(dir, `hf-order-${type}.gguf`);
      withHFOrder(src, bad, info);
      const r = await againstReference(engine, bad, type, golden);
      const diff = relErr(r.logits, referenceLogits.get(type));
      t.diagnostic(`${type} in HF order: prompt 0 logits rel-err ${r.relErr.toExponential(2)}, teacher-forced ${r.forced} of ${r.all}; against the reference writer's file ${diff.toExponential(2)}`);
      assert.ok(diff > 1000 * SAME_WEIGHTS, `logits differ from llama.cpp's on ${REFERENCE_FILES.get(type)} by only ${diff}`);
    });
  }

  test("the Q4_0 file is not a Q8_0 one", async () => {
    const r = await againstReference(engine, files.get("Q4_0"), "Q8_0", golden);
    assert.deepEqual(r.failures, [`${files.get("Q4_0")}: blk.0.attn_q.weight is Q4_0, want Q8_0`, `${files.get("Q4_0")}: tensors 14 Q4_0, 5 F32, 2 F16, want Q8_0 first`]);
  });

  test("withHFOrder changes the attn_q and attn_k tensors and nothing else", async () => {
    const src = files.get("Q8_0");
    const model = await engine.loadModel(src);
    const info = model.fileInfo;
    await model.dispose();
    const once = path.join(dir, "once.gguf");
    withHFOrder(src, once, info);
    const a = fs.readFileSync(src);
    const b = fs.readFileSync(once);
    assert.equal(a.length, b.length);
    const qk = info.tensorInfo.filter((t) => /^blk\.\d+\.attn_[qk]\.weight$/.test(t.name));
    assert.equal(qk.length, 4);
    for (const t of info.tensorInfo) {
      const bytes = (Number(t.dimensions[0]) / BLOCKS.get(t.ggmlType).values) * BLOCKS.get(t.ggmlType).bytes * Number(t.dimensions[1] ?? 1);
      const same = a.subarray(t.fileOffset, t.fileOffset + bytes).equals(b.subarray(t.fileOffset, t.fileOffset + bytes));
      assert.equal(same, !qk.includes(t), t.name);
    }
    assert.ok(a.subarray(0, info.tensorInfo[0].fileOffset).equals(b.subarray(0, info.tensorInfo[0].fileOffset)), "header");
  });
});
