// The seeded prompts of bench_test's Llama benchmarks: Go's math/rand/v2
// PCG (128-bit LCG, DXSM output) and bench_test's uniform and llamaPrompts
// over it, so that the peer evaluates the same token ids as zbench.

const MASK64 = (1n << 64n) - 1n;
const MUL = (2549297995355413924n << 64n) | 4865540595714422341n;
const INC = (6364136223846793005n << 64n) | 1442695040888963407n;
const CHEAP_MUL = 0xda942042e4dd58b5n;
const MASK128 = (1n << 128n) - 1n;

/** PCG is Go's rand.PCG: NewPCG(seed1, seed2) and Uint64. */
export class PCG {
  /**
   * @param {bigint} seed1 the state's high 64 bits
   * @param {bigint} seed2 the state's low 64 bits
   */
  constructor(seed1, seed2) {
    this.state = ((BigInt(seed1) & MASK64) << 64n) | (BigInt(seed2) & MASK64);
  }

  /** @returns {bigint} the next 64 random bits */
  uint64() {
    this.state = (this.state * MUL + INC) & MASK128;
    let hi = this.state >> 64n;
    const lo = this.state & MASK64;
    hi ^= hi >> 32n;
    hi = (hi * CHEAP_MUL) & MASK64;
    hi ^= hi >> 48n;
    return (hi * (lo | 1n)) & MASK64;
  }

  /** @returns {number} rand.Rand's Float64 over this source, in [0, 1) */
  float64() {
    return Number(this.uint64() & ((1n << 53n) - 1n)) / 2 ** 53;
  }
}

/**
 * uniform is bench_test's uniform(seed, kernels.F32, n): n float32 values
 * uniform in [-1, 1).
 * @param {number} seed
 * @param {number} n
 * @returns {number[]}
 */
export function uniform(seed, n) {
  const rng = new PCG(BigInt(seed), 0x9e3779b97f4a7c15n);
  const out = new Array(n);
  for (let i = 0; i < n; i++) out[i] = Math.fround(2 * rng.float64() - 1);
  return out;
}

/**
 * llamaPrompts is bench_test's llamaPrompts: batch prompts of n token ids
 * in [3, vocab-1), from uniform(seed) with float32 arithmetic.
 * @param {number} seed
 * @param {number} batch
 * @param {number} n
 * @param {number} vocab
 * @returns {number[][]}
 */
export function llamaPrompts(seed, batch, n, vocab) {
  const u = uniform(seed, batch * n);
  const f = Math.fround;
  const scale = f(vocab - 4);
  const out = [];
  for (let b = 0; b < batch; b++) {
    const p = [];
    for (let i = 0; i < n; i++) p.push(3 + Math.trunc(f(f(f(u[b * n + i] + 1) / 2) * scale)));
    out.push(p);
  }
  return out;
}
