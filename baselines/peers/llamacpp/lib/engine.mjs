// llama.cpp through node-llama-cpp: its prebuilt CPU build, loaded from the
// tree scripts/install-llamacpp.sh installs, and what a loaded GGUF model is
// in zbench's names.

import fs from "node:fs";
import { createRequire } from "node:module";
import path from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../../../..");

/** installDir is where scripts/install-llamacpp.sh puts node-llama-cpp. */
export function installDir(env = process.env) {
  return env.ZBENCH_LLAMACPP || path.join(ROOT, ".cache", "llamacpp");
}

/**
 * loadLlamaCpp imports node-llama-cpp from dir and starts llama.cpp's
 * prebuilt CPU build (never a GPU build, never a build from source), with
 * its log kept for what it says about the build.
 * @param {string} dir
 * @returns {Promise<Engine>}
 */
export async function loadLlamaCpp(dir) {
  let entry;
  try {
    entry = createRequire(path.join(dir, "package.json")).resolve("node-llama-cpp");
  } catch (err) {
    throw new Error(`node-llama-cpp is not installed in ${dir}: run scripts/install-llamacpp.sh (${err.message})`, {
      cause: err,
    });
  }
  const nlc = await import(pathToFileURL(entry).href);
  const version = JSON.parse(fs.readFileSync(path.join(dir, "node_modules", "node-llama-cpp", "package.json"), "utf8")).version;
  const log = [];
  const llama = await nlc.getLlama({
    gpu: false,
    build: "never",
    skipDownload: true,
    usePrebuiltBinaries: true,
    maxThreads: 0,
    // "log": the line naming the CPU variant ggml loaded is at that level.
    logLevel: nlc.LlamaLogLevel.log,
    logger: (level, message) => {
      log.push(message.trim());
      if (level === nlc.LlamaLogLevel.error || level === nlc.LlamaLogLevel.fatal) process.stderr.write(`llama.cpp: ${message.trim()}\n`);
    },
  });
  // The addon hands its log over asynchronously: wait (up to 2 s) for the
  // line naming the CPU backend.
  for (let wait = 0; wait < 400 && !log.some((l) => l.includes("loaded CPU backend")); wait++) {
    await new Promise((resolve) => setTimeout(resolve, 5));
  }
  return new Engine(nlc, llama, version, log);
}

/** Engine is llama.cpp as node-llama-cpp loaded it. */
export class Engine {
  constructor(nlc, llama, version, log) {
    this.nlc = nlc;
    this.llama = llama;
    this.version = version;
    this.log = log;
  }

  /** cpuBackend is the file of ggml's CPU backend that was loaded (the variant for this CPU). */
  get cpuBackend() {
    for (const line of this.log) {
      const m = /loaded CPU backend from (\S+)/.exec(line);
      if (m) return path.basename(m[1]);
    }
    return "unknown";
  }

  /** configLines are the benchfmt configuration lines of the build. */
  configLines() {
    const rel = this.llama.llamaCppRelease;
    const features = this.llama.systemInfo
      .split("|")
      .map((s) => s.trim())
      .filter((s) => / = 1$/.test(s))
      .map((s) => s.replace(/^CPU : /, "").replace(/ = 1$/, ""));
    return [
      `impl: llama.cpp ${rel.release} (${rel.repo}, as node-llama-cpp ${this.version} reports it)`,
      `build: prebuilt CPU (${this.llama.buildType}, node-llama-cpp ${this.version}, @node-llama-cpp/linux-x64), ggml CPU backend ${this.cpuBackend}`,
      `cpu-features: ${features.join(",")}`,
    ];
  }

  /**
   * checkCPU returns why the build is not the best one for this CPU (ggml
   * loaded a backend without the CPU's widest vectors), or null.
   * @returns {string | null}
   */
  checkCPU() {
    let flags = "";
    try {
      const m = /^flags\s*:\s*(.*)$/m.exec(fs.readFileSync("/proc/cpuinfo", "utf8"));
      flags = m ? ` ${m[1]} ` : "";
    } catch {
      return null;
    }
    const info = this.llama.systemInfo;
    for (const [flag, feature] of [
      ["avx512f", "AVX512 = 1"],
      ["avx2", "AVX2 = 1"],
    ]) {
      if (flags.includes(` ${flag} `) && !info.includes(feature)) {
        return `the CPU has ${flag} but llama.cpp loaded ${this.cpuBackend} without it (${info.trim()})`;
      }
    }
    return null;
  }

  /**
   * loadModel loads a GGUF file on the CPU (memory-mapped, as llama.cpp
   * does by default).
   * @param {string} file
   */
  async loadModel(file) {
    if (!fs.existsSync(file)) throw new Error(`${file}: no such GGUF file`);
    try {
      return await this.llama.loadModel({ modelPath: file, gpuLayers: 0 });
    } catch (err) {
      throw new Error(`${file}: llama.cpp cannot load it: ${err.message}`, { cause: err });
    }
  }

  /** flashAttention is what llama.cpp's log last said of flash attention: enabled or disabled. */
  flashAttention() {
    for (let i = this.log.length - 1; i >= 0; i--) {
      const m = /Flash Attention (enabled|disabled)/i.exec(this.log[i]);
      if (m) return m[1].toLowerCase();
    }
    return "unknown";
  }

  /**
   * engineMs is the time llama.cpp has spent evaluating tokens in ctx (a
   * context made with performanceTracking) since the last call, by its own
   * counters (llama_perf_context: prompt eval and eval time, which
   * printing them resets), in milliseconds.
   * @param {object} ctx
   * @returns {Promise<number>}
   */
  async engineMs(ctx) {
    const from = this.log.length;
    await ctx.printTimings();
    for (let wait = 0; wait < 200; wait++) {
      let prompt, evals;
      for (const line of this.log.slice(from)) {
        const m = /(prompt eval|eval) time =\s*([\d.]+) ms/.exec(line);
        if (m && m[1] === "prompt eval") prompt = Number(m[2]);
        else if (m) evals = Number(m[2]);
      }
      if (prompt !== undefined && evals !== undefined) return prompt + evals;
      await new Promise((resolve) => setTimeout(resolve, 5));
    }
    throw new Error("llama.cpp printed no timings");
  }

  async dispose() {
    await this.llama.dispose();
  }
}

/** GGML_TYPES are the ggml tensor types of the GGUF files the peer runs, by number. */
const GGML_TYPES = new Map([
  [0, "F32"],
  [1, "F16"],
  [2, "Q4_0"],
  [8, "Q8_0"],
  [30, "BF16"],
]);

/** DTYPES are zbench's dtype names of the GGUF types: the names of the rows that run the same GGUF model, q8_0 and w4a16 for the quantized ones. */
export const DTYPES = new Map([
  ["F32", "f32"],
  ["BF16", "bf16"],
  ["F16", "f16"],
  ["Q8_0", "q8_0"],
  ["Q4_0", "w4a16"],
]);

/** MODELS are the Llama shapes of zbench's benchmarks, by their name there. */
const MODELS = {
  tinyllama: { embedding_length: 2048, block_count: 22, feed_forward_length: 5632, head_count: 32, head_count_kv: 4, vocab: 32000 },
  tiny: { embedding_length: 64, block_count: 2, feed_forward_length: 172, head_count: 4, head_count_kv: 2, vocab: 512 },
};

/**
 * describeModel names a loaded GGUF model as zbench's benchmarks do: the
 * model (by its hyperparameters, or the name given), its GGUF type (that
 * of the first layer's query projection) and zbench's dtype for it.
 * @param {string} file
 * @param {object} model a node-llama-cpp LlamaModel
 * @param {string} [name] the model's name, when not one of MODELS
 * The tensors' types are counted in tensorTypes ("155 Q8_0, 45 F32").
 * @returns {{name: string, ggufType: string, dtype: string, vocab: number, tensorTypes: string}}
 */
export function describeModel(file, model, name) {
  const info = model.fileInfo;
  const arch = info.metadata?.general?.architecture;
  if (arch !== "llama") throw new Error(`${file}: general.architecture is ${arch}, want llama`);
  const hp = info.metadata.llama;
  const nVocab = info.metadata.tokenizer?.ggml?.tokens?.length ?? hp.vocab_size;
  const shape = {
    embedding_length: hp.embedding_length,
    block_count: hp.block_count,
    feed_forward_length: hp.feed_forward_length,
    head_count: hp.attention?.head_count,
    head_count_kv: hp.attention?.head_count_kv,
    vocab: nVocab,
  };
  if (!name) {
    name = Object.keys(MODELS).find((k) => Object.entries(MODELS[k]).every(([f, v]) => shape[f] === v));
    if (!name) throw new Error(`${file}: hyperparameters ${JSON.stringify(shape)} are none of zbench's models (${Object.keys(MODELS).join(", ")}): give --model`);
  }
  const q = info.tensorInfo?.find((t) => t.name === "blk.0.attn_q.weight");
  if (!q) throw new Error(`${file}: no tensor blk.0.attn_q.weight`);
  const ggufType = GGML_TYPES.get(q.ggmlType);
  if (!ggufType) throw new Error(`${file}: tensor blk.0.attn_q.weight has ggml type ${q.ggmlType}, want one of ${[...GGML_TYPES.values()].join(", ")}`);
  const counts = new Map();
  for (const t of info.tensorInfo) {
    const type = GGML_TYPES.get(t.ggmlType) ?? `ggml type ${t.ggmlType}`;
    counts.set(type, (counts.get(type) ?? 0) + 1);
  }
  const tensorTypes = [...counts].map(([type, n]) => `${n} ${type}`).join(", ");
  return { name, ggufType, dtype: DTYPES.get(ggufType), vocab: nVocab, tensorTypes };
}
