#!/usr/bin/env node
// same_model.mjs checks that llama.cpp and zbench run the same model: the
// greedy tokens llama.cpp generates from a GGUF file (written by
// testdata/reference/gguf.py synth) against those of zbench generate on
// the same seeded synthetic weights, for BenchmarkLlamaGenerate's prompt.
//
//   node baselines/peers/llamacpp/same_model.mjs [--new N] [--dtype f32] [--min-prefix K] FILE.gguf...
//
// It prints both token lists and their common prefix per file, and exits
// with status 1 when a prefix is shorter than --min-prefix (default: all N).

import { spawnSync } from "node:child_process";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { parseArgs } from "node:util";

import { describeModel, installDir, loadLlamaCpp } from "./lib/engine.mjs";
import { llamaPrompts } from "./lib/prompts.mjs";
import { greedy } from "./lib/workloads.mjs";

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../../..");

/** zbenchTokens runs zbench generate on the synthetic TinyLlama and returns its new token ids. */
function zbenchTokens(prompt, n, dtype) {
  const args = ["run", "./cmd/zbench", "generate", "--model", "tinyllama-synthetic", "--prompt-ids", prompt.join(","), "--max-new-tokens", String(n), "--dtype", dtype, "--ignore-eos", "--format", "json"];
  const r = spawnSync("go", args, { cwd: ROOT, encoding: "utf8", env: { ...process.env, GOTOOLCHAIN: "local" }, maxBuffer: 1 << 26 });
  if (r.status !== 0) throw new Error(`go ${args.join(" ")}: exit status ${r.status}: ${r.stderr.trim()}`);
  const ids = JSON.parse(r.stdout).ids;
  if (!Array.isArray(ids)) throw new Error(`zbench generate printed no ids: ${r.stdout.slice(0, 200)}`);
  return ids.slice(-n);
}

async function main() {
  const { values, positionals } = parseArgs({
    allowPositionals: true,
    options: { new: { type: "string", default: "16" }, dtype: { type: "string", default: "f32" }, "min-prefix": { type: "string" } },
  });
  const n = Number(values.new);
  const minPrefix = values["min-prefix"] === undefined ? n : Number(values["min-prefix"]);
  if (!Number.isInteger(n) || n < 1 || !Number.isInteger(minPrefix)) throw new Error("--new and --min-prefix take integers");
  if (positionals.length === 0) throw new Error("no GGUF file given");
  const engine = await loadLlamaCpp(installDir());
  let ok = true;
  let want;
  try {
    for (const file of positionals) {
      const model = await engine.loadModel(file);
      try {
        const m = describeModel(file, model);
        if (m.name !== "tinyllama") throw new Error(`${file}: model ${m.name}, want tinyllama (zbench generate's synthetic model)`);
        const prompt = llamaPrompts(32, 1, 32, m.vocab)[0];
        want ??= zbenchTokens(prompt, n, values.dtype);
        const ctx = await model.createContext({ contextSize: prompt.length + n });
        const got = await greedy(ctx.getSequence(), prompt, n);
        await ctx.dispose();
        let prefix = 0;
        while (prefix < n && got[prefix] === want[prefix]) prefix++;
        console.log(`${path.basename(file)} (${m.ggufType}): llama.cpp ${got.join(",")}`);
        console.log(`${" ".repeat(path.basename(file).length + m.ggufType.length + 3)}  zbench    ${want.join(",")} (${values.dtype})`);
        console.log(`  common prefix ${prefix} of ${n}`);
        if (prefix < minPrefix) ok = false;
      } finally {
        await model.dispose();
      }
    }
  } finally {
    await engine.dispose();
  }
  if (!ok) {
    console.error(`same_model: a common prefix is shorter than ${minPrefix}`);
    process.exitCode = 1;
  }
}

main().catch((err) => {
  console.error(`same_model: ${err.message}`);
  process.exitCode = 1;
});
