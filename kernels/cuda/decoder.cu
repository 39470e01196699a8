// decoder.cu: the Decoder op group (kernels/decoder.go): rotary embeddings,
// the SwiGLU product, the KV cache write, attention of new queries against
// the cache (split-K "flash decoding": partial softmax over key chunks,
// then a combine), and the row argmax of the greedy sampling step; and the
// PagedKV op group (kernels/paged.go): the same write and attention with
// the cache in blocks of a pool, found through each sequence's block
// table. Semantics: kernels/cpu/decoder.go and kernels/cpu/paged.go. Positions and lengths are read from
// device memory, so a captured graph serves every decode step.

#include "common.cuh"

// ---------------------------------------------------------------------------
// rope: x [tokens, H, D] in place; pair (i, i+D/2) of every head rotated by
// θ = float(pos[t])·inv_freq[i], a float32 product as in Hugging Face.

template <typename T>
__device__ void rope_impl(T* x, const int* pos, const float* inv_freq, long long tokens, int h, int d) {
    const int half = d / 2;
    const long long n = tokens * h * half;
    for (long long i = grid_tid(); i < n; i += grid_stride()) {
        const int k = (int)(i % half);
        const long long th = i / half; // token·H + head
        const long long t = th / h;
        float s, c;
        sincosf((float)pos[t] * inv_freq[k], &s, &c);
        T* v = x + th * d;
        const float a = to_f32(v[k]), b = to_f32(v[k + half]);
        v[k] = from_f32<T>(a * c - b * s);
        v[k + half] = from_f32<T>(b * c + a * s);
    }
}

// swiglu: out = silu(gate)·up; out may be gate or up.
template <typename T>
__device__ void swiglu_impl(T* out, const T* gate, const T* up, long long n) {
    for (long long i = grid_tid(); i < n; i += grid_stride()) {
        const float g = to_f32(gate[i]);
        out[i] = from_f32<T>(g * act_sigmoid(g) * to_f32(up[i]));
    }
}

// bshd is the index of element i of an array [B, S, H, D].
struct bshd {
    int b, s, h, d;
};

__device__ __forceinline__ bshd split_bshd(long long i, int s, int h, int d) {
    bshd x;
    x.d = (int)(i % d);
    long long r = i / d;
    x.h = (int)(r % h);
    r /= h;
    x.s = (int)(r % s);
    x.b = (int)(r / s);
    return x;
}

// cache_write: cache [B, H, T, D] ← x [B, S, H, D] from start[b]. A start
// out of range writes nothing and is recorded in start_err (value, b) by
// the thread of the sequence's first element.
template <typename T>
__device__ void cache_write_impl(T* cache, const T* x, const int* start, int bsz, int s, int h, int t, int d,
                                 int* start_err) {
    const long long n = (long long)bsz * s * h * d;
    for (long long i = grid_tid(); i < n; i += grid_stride()) {
        const bshd e = split_bshd(i, s, h, d);
        const int b = e.b, ss = e.s, hh = e.h, k = e.d;
        const int p = start[b] + ss;
        if (start[b] < 0 || start[b] > t - s) {
            if (ss == 0 && hh == 0 && k == 0) flag_value(start_err, start[b], b);
            continue;
        }
        cache[(((long long)b * h + hh) * t + p) * d + k] = x[i];
    }
}

// paged_cache_write: pool [N, H, P, D] ← x [B, S, H, D] at positions
// start[b] + s of sequence b, position p in row p mod P of block
// table[b, p / P]. A start out of range writes nothing and is recorded in
// start_err as cache_write records it; a block outside [0, N) is recorded
// in err (flag, value, b, the table's column) and not written.
template <typename T>
__device__ void paged_cache_write_impl(T* pool, const T* x, const int* table, const int* start, int bsz, int s,
                                       int h, int d, int nblk, int p, int m, int* err, int* start_err) {
    const long long n = (long long)bsz * s * h * d;
    for (long long i = grid_tid(); i < n; i += grid_stride()) {
        const bshd e = split_bshd(i, s, h, d);
        const int b = e.b, ss = e.s, hh = e.h, k = e.d;
        if (start[b] < 0 || start[b] > m * p - s) {
            if (ss == 0 && hh == 0 && k == 0) flag_value(start_err, start[b], b);
            continue;
        }
        const int pos = start[b] + ss;
        const int j = pos / p;
        const int blk = table[(long long)b * m + j];
        if (blk < 0 || blk >= nblk) {
            if (atomicCAS(err, 0, 1) == 0) {
                err[1] = blk;
                err[2] = b;
                err[3] = j;
            }
            continue;
        }
        pool[(((long long)blk * h + hh) * p + pos % p) * d + k] = x[i];
    }
}

// ---------------------------------------------------------------------------
// Cached attention, split over key chunks. Pass 1: block (row r, chunk c),
// row r = ((b·Hq + head)·Sq + s); DEC_WARPS warps take the chunk's keys in
// turn, each lane holding DEC_PER_LANE of the D ≤ 256 dimensions; the
// warps' online softmax states are merged in shared memory and written as
// (max, sum) and the unnormalised output. Pass 2: one block per row merges
// its chunks. With PAGED, the keys and values are in pools [N, Hkv, P, D],
// key j of sequence b in row j mod P of block table[b, j / P] (t = M·P); a
// block outside [0, N) is recorded in err as paged_cache_write records it,
// and its keys are skipped. A length outside [Sq, t] is clamped into it and
// recorded in lens_err (value, b) by one thread of the sequence's blocks.

#define DEC_WARPS 4
#define DEC_PER_LANE 8 // D ≤ 32·8

template <typename T, bool PAGED>
__device__ void attn_decode_partial_impl(const T* q, const T* k, const T* v, const int* lens, float* part_o,
                                         float* part_ml, int hq, int hkv, int sq, int t, int d, int chunk,
                                         float scale, const int* table, int nblk, int p, int* err, int* lens_err) {
    __shared__ float sh_m[DEC_WARPS], sh_l[DEC_WARPS];
    __shared__ float sh_o[DEC_WARPS][32 * DEC_PER_LANE];
    const int c = blockIdx.y, nchunks = gridDim.y;
    const long long row = blockIdx.x;
    const int s = (int)(row % sq);
    const long long bh = row / sq;
    const int head = (int)(bh % hq);
    const int b = (int)(bh / hq);
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    int n = lens[b];
    if ((n < sq || n > t) && threadIdx.x == 0 && c == 0 && s == 0 && head == 0) flag_value(lens_err, n, b);
    n = n < sq ? sq : (n > t ? t : n); // out of range: reported, and stay in bounds
    const int visible = n - sq + s + 1;
    const int lo = c * chunk, hi = min(lo + chunk, visible);
    const int kvh = head / (hq / hkv);
    const long long kv = PAGED ? 0 : ((long long)b * hkv + kvh) * t * d;
    const int cols = PAGED ? t / p : 0; // the table's columns: blocks a sequence can hold

    float qr[DEC_PER_LANE], acc[DEC_PER_LANE];
#pragma unroll
    for (int e = 0; e < DEC_PER_LANE; e++) {
        const int dd = lane + 32 * e;
        qr[e] = dd < d ? to_f32(q[row * d + dd]) * scale : 0.0f;
        acc[e] = 0.0f;
    }
    float m = -INFINITY, l = 0.0f;
    for (int j = lo + warp; j < hi; j += DEC_WARPS) {
        long long at = kv + (long long)j * d; // key j's row of k and v
        if (PAGED) {
            const int blk = table[(long long)b * cols + j / p];
            if (blk < 0 || blk >= nblk) { // the same for the whole warp
                if (lane == 0 && atomicCAS(err, 0, 1) == 0) {
                    err[1] = blk;
                    err[2] = b;
                    err[3] = j / p;
                }
                continue;
            }
            at = (((long long)blk * hkv + kvh) * p + j % p) * d;
        }
        const T* kr = k + at;
        float dot = 0.0f;
#pragma unroll
        for (int e = 0; e < DEC_PER_LANE; e++) {
            const int dd = lane + 32 * e;
            if (dd < d) dot += qr[e] * to_f32(kr[dd]);
        }
        dot = warp_sum(dot);
        const float mn = fmaxf(m, dot);
        const float corr = expf(m - mn); // 0 while m is −∞
        const float p = expf(dot - mn);
        l = l * corr + p;
        const T* vr = v + at;
#pragma unroll
        for (int e = 0; e < DEC_PER_LANE; e++) {
            const int dd = lane + 32 * e;
            acc[e] = acc[e] * corr + (dd < d ? p * to_f32(vr[dd]) : 0.0f);
        }
        m = mn;
    }
    if (lane == 0) {
        sh_m[warp] = m;
        sh_l[warp] = l;
    }
#pragma unroll
    for (int e = 0; e < DEC_PER_LANE; e++) sh_o[warp][lane + 32 * e] = acc[e];
    __syncthreads();
    if (warp == 0) {
        float mm = -INFINITY;
        for (int w = 0; w < DEC_WARPS; w++) mm = fmaxf(mm, sh_m[w]);
        float ll = 0.0f;
        float o[DEC_PER_LANE];
#pragma unroll
        for (int e = 0; e < DEC_PER_LANE; e++) o[e] = 0.0f;
        for (int w = 0; w < DEC_WARPS; w++) {
            const float f = sh_m[w] == -INFINITY ? 0.0f : expf(sh_m[w] - mm);
            ll += sh_l[w] * f;
#pragma unroll
            for (int e = 0; e < DEC_PER_LANE; e++) o[e] += sh_o[w][lane + 32 * e] * f;
        }
        const long long pc = row * nchunks + c;
        if (lane == 0) {
            part_ml[2 * pc] = mm;
            part_ml[2 * pc + 1] = ll;
        }
#pragma unroll
        for (int e = 0; e < DEC_PER_LANE; e++) {
            const int dd = lane + 32 * e;
            if (dd < d) part_o[pc * d + dd] = o[e];
        }
    }
}

// attn_decode_combine: out[row] = Σ_c e^{m_c − M} o_c / Σ_c e^{m_c − M} l_c.
template <typename T>
__device__ void attn_decode_combine_impl(T* out, const float* part_o, const float* part_ml, int nchunks, int d) {
    const long long row = blockIdx.x;
    float mm = -INFINITY;
    for (int c = 0; c < nchunks; c++) mm = fmaxf(mm, part_ml[2 * (row * nchunks + c)]);
    float l = 0.0f;
    for (int c = 0; c < nchunks; c++) {
        const float m = part_ml[2 * (row * nchunks + c)];
        if (m != -INFINITY) l += part_ml[2 * (row * nchunks + c) + 1] * expf(m - mm);
    }
    for (int dd = threadIdx.x; dd < d; dd += blockDim.x) {
        float o = 0.0f;
        for (int c = 0; c < nchunks; c++) {
            const long long pc = row * nchunks + c;
            const float m = part_ml[2 * pc];
            if (m != -INFINITY) o += part_o[pc * d + dd] * expf(m - mm);
        }
        out[row * d + dd] = from_f32<T>(o / l);
    }
}

// ---------------------------------------------------------------------------
// argmax: out[r] = the index of row r's largest value, the first on ties,
// NaN counting as larger than any number (torch.argmax). One block per row.

// better reports whether (va, ia) beats (vb, ib).
__device__ __forceinline__ bool argmax_better(float va, int ia, float vb, int ib) {
    const bool na = va != va, nb = vb != vb;
    if (na != nb) return na;
    if (!na && va != vb) return va > vb;
    return ia < ib;
}

template <typename T>
__device__ void argmax_impl(int* out, const T* x, int n) {
    __shared__ float sv[1024];
    __shared__ int si[1024];
    const long long r = blockIdx.x;
    float best = -INFINITY;
    int bi = n; // no index yet
    for (int i = threadIdx.x; i < n; i += blockDim.x) {
        const float v = to_f32(x[r * n + i]);
        if (bi == n || argmax_better(v, i, best, bi)) {
            best = v;
            bi = i;
        }
    }
    sv[threadIdx.x] = best;
    si[threadIdx.x] = bi;
    __syncthreads();
    for (int o = blockDim.x / 2; o > 0; o >>= 1) {
        if (threadIdx.x < o) {
            const float v = sv[threadIdx.x + o];
            const int i = si[threadIdx.x + o];
            if (i < n && (si[threadIdx.x] == n || argmax_better(v, i, sv[threadIdx.x], si[threadIdx.x]))) {
                sv[threadIdx.x] = v;
                si[threadIdx.x] = i;
            }
        }
        __syncthreads();
    }
    if (threadIdx.x == 0) out[r] = si[0] == n ? 0 : si[0];
}

#define DECODER_KERNELS(T, SUF)                                                                              \
    extern "C" __global__ void rope_##SUF(T* x, const int* pos, const float* inv_freq, long long tokens,    \
                                          int h, int d) {                                                    \
        rope_impl<T>(x, pos, inv_freq, tokens, h, d);                                                        \
    }                                                                                                        \
    extern "C" __global__ void swiglu_##SUF(T* out, const T* gate, const T* up, long long n) {               \
        swiglu_impl<T>(out, gate, up, n);                                                                    \
    }                                                                                                        \
    extern "C" __global__ void cache_write_##SUF(T* cache, const T* x, const int* start, int b, int s, int h, \
                                                 int t, int d, int* start_err) {                             \
        cache_write_impl<T>(cache, x, start, b, s, h, t, d, start_err);                                      \
    }                                                                                                        \
    extern "C" __global__ void __launch_bounds__(32 * DEC_WARPS)                                             \
        attn_decode_partial_##SUF(const T* q, const T* k, const T* v, const int* lens, float* part_o,       \
                                  float* part_ml, int hq, int hkv, int sq, int t, int d, int chunk,          \
                                  float scale, int* lens_err) {                                              \
        attn_decode_partial_impl<T, false>(q, k, v, lens, part_o, part_ml, hq, hkv, sq, t, d, chunk, scale, \
                                           nullptr, 0, 1, nullptr, lens_err);                                \
    }                                                                                                        \
    extern "C" __global__ void paged_cache_write_##SUF(T* pool, const T* x, const int* table, const int* start, \
                                                       int b, int s, int h, int d, int n, int p, int m,         \
                                                       int* err, int* start_err) {                              \
        paged_cache_write_impl<T>(pool, x, table, start, b, s, h, d, n, p, m, err, start_err);               \
    }                                                                                                        \
    extern "C" __global__ void __launch_bounds__(32 * DEC_WARPS)                                             \
        paged_attn_decode_partial_##SUF(const T* q, const T* k, const T* v, const int* lens, float* part_o, \
                                        float* part_ml, int hq, int hkv, int sq, int t, int d, int chunk,    \
                                        float scale, const int* table, int n, int p, int* err, int* lens_err) { \
        attn_decode_partial_impl<T, true>(q, k, v, lens, part_o, part_ml, hq, hkv, sq, t, d, chunk, scale,  \
                                          table, n, p, err, lens_err);                                       \
    }                                                                                                        \
    extern "C" __global__ void attn_decode_combine_##SUF(T* out, const float* part_o, const float* part_ml,  \
                                                         int nchunks, int d) {                               \
        attn_decode_combine_impl<T>(out, part_o, part_ml, nchunks, d);                                       \
    }                                                                                                        \
    extern "C" __global__ void argmax_##SUF(int* out, const T* x, int n) { argmax_impl<T>(out, x, n); }

DECODER_KERNELS(float, f32)
DECODER_KERNELS(__half, f16)
DECODER_KERNELS(__nv_bfloat16, bf16)
