// Whether llama.cpp runs the model of the PyTorch reference: a tiny GGUF
// file of llama-tiny, loaded in llama.cpp, against the float64 generation
// golden of testdata/reference/llama.py (llama-generate).

import path from "node:path";
import { fileURLToPath } from "node:url";

import { relErr } from "../../node/harness.mjs";
import { describeModel } from "./engine.mjs";
import { greedy } from "./workloads.mjs";

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../../../..");

/** GENERATE_GOLDEN is the reference's generation golden of llama-tiny: 3 prompts, 24 new tokens each. */
export const GENERATE_GOLDEN = path.join(ROOT, "testdata/golden/llama-generate.safetensors");

/**
 * BOUNDS are how close llama.cpp must come to the reference, by GGUF type:
 * the relative error of prompt 0's logits over its steps (teacher-forced),
 * the share of next tokens chosen as the reference chose them from its own
 * contexts, and whether free-running greedy generation must reproduce
 * every token. The logits bounds are bench_test's dtype tolerances
 * (dtypeTolerance), F32's that of f16: llama.cpp keeps its KV cache in
 * f16. Measured on testdata/reference/gguf.py's files: rel-err 4.9e-4
 * (F32), 7.5e-4 (F16), 1.0e-2 (Q8_0), 0.136 (Q4_0); teacher-forced 72,
 * 72, 67 and 47 of 72; free-running 72 of 72 in F32 and F16.
 */
export const BOUNDS = new Map([
  ["F32", { maxRelErr: 2e-3, forced: 1, exact: true }],
  ["F16", { maxRelErr: 2e-3, forced: 1, exact: true }],
  ["Q8_0", { maxRelErr: 0.1, forced: 0.9, exact: false }],
  ["Q4_0", { maxRelErr: 0.15, forced: 0.5, exact: false }],
]);

/**
 * againstReference runs file, a GGUF of llama-tiny that should be in GGUF
 * type wantType, in llama.cpp on golden's prompts (one context, one
 * thread) and says how far it is from the reference. failures lists what
 * is out of BOUNDS (the model's shape or type, the logits' error, the
 * teacher-forced share, free-running tokens): empty when llama.cpp ran the
 * reference's model. logits are llama.cpp's teacher-forced logits of
 * prompt 0, step by step.
 * @param {import("./engine.mjs").Engine} engine
 * @param {string} file
 * @param {string} wantType one of BOUNDS' keys
 * @param {{tensors: Map<string, {shape: number[], data: Int32Array | Float32Array}>}} golden GENERATE_GOLDEN as readSafetensors reads it
 * @returns {Promise<{model: object, relErr: number, forced: number, all: number, logits: Float32Array, failures: string[]}>}
 */
export async function againstReference(engine, file, wantType, golden) {
  const bounds = BOUNDS.get(wantType);
  if (!bounds) throw new Error(`${wantType}: no bounds for this GGUF type (want one of ${[...BOUNDS.keys()].join(", ")})`);
  const model = await engine.loadModel(file);
  try {
    const failures = [];
    const m = describeModel(file, model);
    if (m.name !== "tiny" || m.vocab !== 512) failures.push(`${file}: model ${m.name} with ${m.vocab} tokens, want tiny (llama-tiny) with 512`);
    if (m.ggufType !== wantType) failures.push(`${file}: blk.0.attn_q.weight is ${m.ggufType}, want ${wantType}`);
    if (!new RegExp(`^\\d+ ${wantType}(, \\d+ \\w+)*$`).test(m.tensorTypes)) failures.push(`${file}: tensors ${m.tensorTypes}, want ${wantType} first`);
    if (failures.length > 0) return { model: m, relErr: NaN, forced: 0, all: 0, logits: new Float32Array(0), failures };

    const ctx = await model.createContext({ contextSize: 64, threads: 1 });
    try {
      const seq = ctx.getSequence();
      let forced = 0;
      let all = 0;
      let logits0 = new Float32Array(0);
      for (let i = 0; golden.tensors.has(`prompt${i}/prompt_ids`); i++) {
        const prompt = [...golden.tensors.get(`prompt${i}/prompt_ids`).data];
        const want = [...golden.tensors.get(`prompt${i}/ids`).data];
        if (bounds.exact) {
          const got = await greedy(seq, prompt, want.length);
          let prefix = 0;
          while (prefix < want.length && got[prefix] === want[prefix]) prefix++;
          if (prefix < want.length) failures.push(`prompt ${i}: free-running greedy tokens agree on ${prefix} of ${want.length}`);
        }

        // Teacher forcing: the next token after each prefix of the
        // reference's sequence, in one evaluation.
        await seq.clearHistory();
        const input = [...prompt, ...want.slice(0, -1)].map((tok, j) => (j >= prompt.length - 1 ? [tok, { generateNext: { logits: true } }] : tok));
        const res = await seq.controlledEvaluate(input);
        if (i === 0) logits0 = new Float32Array(want.length * m.vocab);
        for (let j = 0; j < want.length; j++) {
          const logits = res[prompt.length - 1 + j].next.logits;
          if (logits.size !== m.vocab) throw new Error(`${file}: prompt ${i} step ${j}: ${logits.size} logits, want ${m.vocab}`);
          let best = -1;
          for (const [tok, v] of logits) if (best < 0 || v > logits.get(best)) best = tok;
          forced += best === want[j] ? 1 : 0;
          all++;
          if (i === 0) for (const [tok, v] of logits) logits0[j * m.vocab + tok] = v;
        }
      }
      const err = relErr(logits0, golden.tensors.get("prompt0/logits").data.subarray(0, logits0.length));
      // NaN logits fail here too.
      if (!(err <= bounds.maxRelErr)) failures.push(`prompt 0: logits rel-err ${err} over ${bounds.maxRelErr}`);
      if (forced < bounds.forced * all) failures.push(`teacher-forced: ${forced} of ${all} next tokens the reference's, want ${bounds.forced * all}`);
      return { model: m, relErr: err, forced, all, logits: logits0, failures };
    } finally {
      await ctx.dispose();
    }
  } finally {
    await model.dispose();
  }
}

