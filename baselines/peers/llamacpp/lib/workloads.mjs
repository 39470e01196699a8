// The Llama workloads of bench_test on llama.cpp: BenchmarkLlamaPrefill,
// BenchmarkLlamaDecode and BenchmarkLlamaGenerate at their CPU shapes, one
// op each as zbench defines it.

import { llamaPrompts } from "./prompts.mjs";

/**
 * A Workload is one benchmark of one model.
 * @typedef {object} Workload
 * @property {string} name the benchmark's name, without the "-P" suffix
 * @property {number} contextSize the tokens its context holds
 * @property {(ctx: object) => Promise<Run>} setup makes its op on a new context
 */

/**
 * A Run is a workload set up on a context.
 * @typedef {object} Run
 * @property {() => Promise<void>} op one op
 * @property {() => void} reset starts the figures of a timed run
 * @property {(n: number, ns: number) => [number, string][]} metrics the run's metrics after ns/op
 */

/**
 * lastLogits asks for the next token after the last of tokens: its logits
 * are computed (as zbench's prefill and decode compute the last position's
 * logits) and the greedy token read back.
 * @param {number[]} tokens
 */
function withNext(tokens) {
  return [...tokens.slice(0, -1), [tokens.at(-1), { generateNext: { token: true } }]];
}

/**
 * prefill is BenchmarkLlamaPrefill: one op is a prompt of seq tokens into
 * an empty KV cache, with the logits of its last token; tok/s counts the
 * prompt's tokens.
 * @param {{name: string, dtype: string, vocab: number}} m
 * @param {number} batch
 * @param {number} seq
 * @returns {Workload}
 */
export function prefill(m, batch, seq) {
  return {
    name: `BenchmarkLlamaPrefill/dev=cpu/dtype=${m.dtype}/model=${m.name}/batch=${batch}/seq=${seq}`,
    contextSize: seq,
    async setup(ctx) {
      const s = ctx.getSequence();
      const input = withNext(llamaPrompts(batch * 100000 + seq, batch, seq, m.vocab)[0]);
      return {
        async op() {
          await s.clearHistory();
          await s.controlledEvaluate(input);
        },
        reset() {},
        metrics: (n, ns) => [[(batch * seq) / (ns / n / 1e9), "tok/s"]],
      };
    },
  };
}

/**
 * decode is BenchmarkLlamaDecode: the KV cache holds ctx tokens of a
 * seeded prompt, and one op is the decode of one token (id 3, as zbench's
 * first sequence decodes) with its logits, the cache rewound to ctx
 * first, so that every op decodes at the same context.
 * @param {{name: string, dtype: string, vocab: number}} m
 * @param {number} batch
 * @param {number} ctxLen
 * @returns {Workload}
 */
export function decode(m, batch, ctxLen) {
  return {
    name: `BenchmarkLlamaDecode/dev=cpu/dtype=${m.dtype}/model=${m.name}/batch=${batch}/ctx=${ctxLen}`,
    contextSize: ctxLen + 1,
    async setup(ctx) {
      const s = ctx.getSequence();
      await s.controlledEvaluate(llamaPrompts(batch * 100000 + ctxLen, batch, ctxLen, m.vocab)[0]);
      const input = withNext([3]);
      return {
        async op() {
          if (s.nextTokenIndex > ctxLen) await s.eraseContextTokenRanges([{ start: ctxLen, end: s.nextTokenIndex }]);
          await s.controlledEvaluate(input);
        },
        reset() {},
        metrics: (n, ns) => [[batch / (ns / n / 1e9), "tok/s"]],
      };
    },
  };
}

/**
 * generate is BenchmarkLlamaGenerate: one op is greedy generation at batch
 * 1, the prefill of a prompt and the decode of newTokens tokens, each
 * chosen by llama.cpp's greedy sampler and read back; ttft-ms is the mean
 * time to the first token, tok/s the decode rate after it.
 * @param {{name: string, dtype: string, vocab: number}} m
 * @param {number} prompt
 * @param {number} newTokens
 * @returns {Workload}
 */
export function generate(m, prompt, newTokens) {
  return {
    name: `BenchmarkLlamaGenerate/dev=cpu/dtype=${m.dtype}/model=${m.name}/prompt=${prompt}/new=${newTokens}`,
    contextSize: prompt + newTokens,
    async setup(ctx) {
      const s = ctx.getSequence();
      const ids = llamaPrompts(prompt, 1, prompt, m.vocab)[0];
      let calls = 0;
      let ttft = 0n;
      let decodeNs = 0n;
      let steps = 0;
      return {
        async op() {
          let last;
          await greedy(s, ids, newTokens, (i) => {
            const now = process.hrtime.bigint();
            if (i < 0) last = now;
            else if (i === 0) ttft += now - last;
            else {
              decodeNs += now - last;
              steps++;
            }
            last = now;
          });
          calls++;
        },
        reset() {
          calls = 0;
          ttft = decodeNs = 0n;
          steps = 0;
        },
        metrics: () => [
          [Number(ttft) / calls / 1e6, "ttft-ms"],
          [steps / (Number(decodeNs) / 1e9), "tok/s"],
        ],
      };
    },
  };
}

/**
 * greedy returns the n tokens llama.cpp's greedy sampler generates after
 * prompt, on seq cleared first (end-of-sequence tokens included). onToken,
 * when given, is called with -1 as the prompt goes in, then with the index
 * of each token as it comes back.
 * @param {object} seq a node-llama-cpp LlamaContextSequence
 * @param {number[]} prompt
 * @param {number} n
 * @param {(i: number) => void} [onToken]
 * @returns {Promise<number[]>}
 */
export async function greedy(seq, prompt, n, onToken = () => {}) {
  await seq.clearHistory();
  const out = [];
  onToken(-1);
  for await (const token of seq.evaluate(prompt, { temperature: 0 })) {
    onToken(out.length);
    out.push(token);
    if (out.length === n) break;
  }
  return out;
}
