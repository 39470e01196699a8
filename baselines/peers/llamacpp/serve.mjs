#!/usr/bin/env node
// serve.mjs serves a GGUF model with llama.cpp (node-llama-cpp's prebuilt
// CPU build, which ships no llama-server binary) over the part of the
// OpenAI completions API that zbench load speaks: POST /v1/completions
// (a text prompt, max_tokens, temperature, ignore_eos, stream with
// stream_options.include_usage) and GET /v1/models. It is llama.cpp's
// server as zbench load's peer: --parallel sequences share one context,
// and node-llama-cpp batches the evaluations of the sequences that run at
// once into one llama_decode, as llama-server's continuous batching does.
//
//   node baselines/peers/llamacpp/serve.mjs [--addr HOST:PORT] [--parallel N] [--ctx N] [--threads N] FILE.gguf

import http from "node:http";
import os from "node:os";
import path from "node:path";
import { parseArgs } from "node:util";

import { installDir, loadLlamaCpp } from "./lib/engine.mjs";

const { values, positionals } = parseArgs({
  allowPositionals: true,
  options: {
    addr: { type: "string", default: "127.0.0.1:8081" },
    parallel: { type: "string", default: "16" },
    ctx: { type: "string", default: "512" },
    threads: { type: "string", default: String(os.availableParallelism()) },
    name: { type: "string" },
  },
});
if (positionals.length !== 1) {
  process.stderr.write("usage: node baselines/peers/llamacpp/serve.mjs [--addr HOST:PORT] [--parallel N] [--ctx N] [--threads N] FILE.gguf\n");
  process.exit(2);
}
const [file] = positionals;
const parallel = Number(values.parallel);
const ctxPerSeq = Number(values.ctx);
const threads = Number(values.threads);
for (const [flag, v] of [["--parallel", parallel], ["--ctx", ctxPerSeq], ["--threads", threads]]) {
  if (!Number.isInteger(v) || v < 1) {
    process.stderr.write(`${flag} ${v}: want a positive integer\n`);
    process.exit(2);
  }
}
const name = values.name ?? path.basename(file, ".gguf");
const [host, port] = values.addr.split(":");

const engine = await loadLlamaCpp(installDir());
const model = await engine.loadModel(file);
const context = await model.createContext({ contextSize: parallel * ctxPerSeq, sequences: parallel, threads });
const free = Array.from({ length: parallel }, () => context.getSequence());
const waiting = [];

/** acquire takes a free sequence, waiting for one in order of arrival. */
function acquire() {
  if (free.length > 0) return Promise.resolve(free.pop());
  return new Promise((resolve) => waiting.push(resolve));
}

/** release clears a sequence and hands it to the next waiting request. */
async function release(seq) {
  await seq.clearHistory();
  const next = waiting.shift();
  if (next) next(seq);
  else free.push(seq);
}

function sendError(res, status, message, param) {
  res.writeHead(status, { "Content-Type": "application/json" });
  res.end(JSON.stringify({ error: { message, type: "invalid_request_error", param } }));
}

async function complete(req, res, body) {
  let r;
  try {
    r = JSON.parse(body);
  } catch (err) {
    return sendError(res, 400, `malformed JSON: ${err.message}`);
  }
  if (typeof r.prompt !== "string" || r.prompt === "") return sendError(res, 400, "prompt must be a non-empty string", "prompt");
  const maxTokens = r.max_tokens ?? 16;
  if (!Number.isInteger(maxTokens) || maxTokens < 1) return sendError(res, 400, "max_tokens must be a positive integer", "max_tokens");
  const tokens = [model.tokens.bos, ...model.tokenize(r.prompt)];
  if (tokens.length + maxTokens > ctxPerSeq) return sendError(res, 400, `the prompt's ${tokens.length} tokens and max_tokens exceed the ${ctxPerSeq} of a sequence`, "max_tokens");
  let gone = false;
  res.on("close", () => {
    gone = !res.writableFinished;
  });
  const seq = await acquire();
  const id = `cmpl-${Date.now()}-${Math.random().toString(36).slice(2, 8)}`;
  const created = Math.floor(Date.now() / 1000);
  const chunk = (text, finish) =>
    JSON.stringify({ id, object: "text_completion", created, model: name, choices: [{ index: 0, text, logprobs: null, finish_reason: finish }] });
  if (r.stream) res.writeHead(200, { "Content-Type": "text/event-stream", "Cache-Control": "no-cache" });
  const out = [];
  let sent = "";
  let finish = "length";
  try {
    for await (const token of seq.evaluate(tokens, { temperature: r.temperature ?? 1 })) {
      if (gone) break;
      if (!r.ignore_eos && token === model.tokens.eos) {
        finish = "stop";
        break;
      }
      out.push(token);
      const text = model.detokenize(out);
      // Hold back a character whose bytes are not all generated yet.
      if (!text.endsWith("\uFFFD") && text.length > sent.length) {
        if (r.stream) res.write(`data: ${chunk(text.slice(sent.length), null)}\n\n`);
        sent = text;
      }
      if (out.length === maxTokens) break;
    }
  } finally {
    await release(seq);
  }
  if (gone) return;
  const text = model.detokenize(out);
  const usage = { prompt_tokens: tokens.length, completion_tokens: out.length, total_tokens: tokens.length + out.length };
  if (!r.stream) {
    res.writeHead(200, { "Content-Type": "application/json" });
    res.end(JSON.stringify({ id, object: "text_completion", created, model: name, choices: [{ index: 0, text, logprobs: null, finish_reason: finish }], usage }));
    return;
  }
  if (text.length > sent.length) res.write(`data: ${chunk(text.slice(sent.length), null)}\n\n`);
  res.write(`data: ${chunk("", finish)}\n\n`);
  if (r.stream_options?.include_usage) res.write(`data: ${JSON.stringify({ id, object: "text_completion", created, model: name, choices: [], usage })}\n\n`);
  res.end("data: [DONE]\n\n");
}

const server = http.createServer((req, res) => {
  if (req.method === "GET" && req.url === "/v1/models") {
    res.writeHead(200, { "Content-Type": "application/json" });
    res.end(JSON.stringify({ object: "list", data: [{ id: name, object: "model", owned_by: "llama.cpp" }] }));
    return;
  }
  if (req.method === "GET" && req.url === "/health") {
    res.writeHead(200, { "Content-Type": "application/json" });
    res.end('{"status":"ok"}');
    return;
  }
  if (req.method !== "POST" || req.url !== "/v1/completions") return sendError(res, 404, `no such endpoint: ${req.method} ${req.url}`);
  let body = "";
  req.setEncoding("utf8");
  req.on("data", (d) => (body += d));
  req.on("end", () => {
    complete(req, res, body).catch((err) => {
      if (!res.headersSent) sendError(res, 500, err.message);
      else res.end();
    });
  });
});
server.listen(Number(port), host, () => {
  process.stderr.write(
    `serving ${name} with llama.cpp ${engine.llama.llamaCppRelease.release} (node-llama-cpp ${engine.version}, ${engine.cpuBackend}) on http://${host}:${port}: ${parallel} sequences of ${ctxPerSeq} tokens, ${threads} threads\n`,
  );
});
for (const sig of ["SIGINT", "SIGTERM"]) {
  process.on(sig, () => {
    server.close(async () => {
      await context.dispose();
      await engine.dispose();
      process.exit(0);
    });
  });
}
