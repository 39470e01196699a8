// wquant.cu: the WeightQuant op group (kernels/quant_weight.go): weight-only
// quantized linear layers, out [M, N] = x [M, K] · Wᵀ + bias, with W
// dequantized on the fly inside the product and never expanded in memory.
// Semantics: kernels.WeightQuant.
//
// The weight (kernels.QWeight), by format (FMT_* below, the values of
// kernels.WeightFormat):
//   int8: w int8 [N, K] codes, scales [N]: W[n, k] = w[n, k]·scales[n].
//   int4, nf4: w [N, K/2] bytes, two codes per byte (element 2j in the low
//     nibble, 2j+1 in the high one), scales [N, K/group] with group a
//     multiple of 32 dividing K: W[n, k] = level[code]·scales[n, k/group],
//     level[c] = c − 8 (int4) or NF4[c] (nf4, kernels.NF4Levels).
// x and out are T (f32, f16, bf16); the sums are float32 and out is rounded
// once to T; bias (F32 [N]) may be NULL. M, N, K ≥ 1 (a grid with no blocks
// must not be launched).
//
// Kernels, all with the signature
//   (T* out, const T* x, const int8_t* w, const float* scales,
//    const float* bias, int M, int N, int K, int group)
// for FMT = int8, int4, nf4 and T = f32, f16, bf16 (group is not read for
// int8):
//
//  wmatmul_gemvR_FMT_T, R = 1, 2, 4, 8 (every target): M ≤ R rows (decode,
//    bound by reading w). One warp per 2 output columns, 4 warps per block:
//    each lane reads 16-byte chunks of the two columns' rows of w (32 4-bit
//    or 16 int8 codes), lane, lane+32, … of them, unpacks the codes to
//    float32 levels once (int4 and int8 by building the float from the
//    code's bits, nf4 through its 16 levels in shared memory) and
//    multiplies them with all M rows of x (16-byte loads); the sum of a
//    chunk is scaled once by its group's scale. The lanes' sums are
//    warp-reduced. When a row of w is not a whole number of 16-byte chunks
//    (int8 with K % 16 != 0) or w or x is not 16-byte aligned, each lane
//    takes single bytes instead. R sizes the registers of the sums: a
//    kernel per R keeps those of one row (decoding a token) few, and the
//    occupancy that hides the reads of w high.
//    grid = ceil(N/8), block = 128, no dynamic shared memory.
//
//  wmatmul_tc_FMT_T, T = f16, bf16 (sm_80+): mma.sync m16n8k16 with f32
//    accumulation. Block tile 128 (M) × 64 (N) × 32 (K), 4 warps of 64×32,
//    a 3-stage cp.async pipeline of x's tile and the raw code bytes of w's.
//    Each lane builds its B fragments from the code bytes in shared memory:
//    the levels are exact in T for int4 and int8; nf4's are split into a
//    sum of 2 (f16: within 2⁻²³ of the float32 level) or 3 (bf16: exactly
//    it) values of T, one MMA each. The K-tiles of one group are summed
//    apart and added to the tile scaled by the group's scale (int8: the
//    whole of K, then the row's scale). Needs K % 16 == 0 (always true of
//    the 4-bit formats), x and w 16-byte aligned. grid = (ceil(N/64),
//    ceil(M/128)), block = 128, dynamic shared memory 39936 bytes. Traps
//    below sm_80.
//
//  wmatmul_simt_FMT_T (every target): any K and alignment. Block tile
//    64×64×16, 256 threads of 4×4 outputs: the tile of W is dequantized to
//    float32 (level·scale, as the CPU does) in shared memory, x's tile
//    converted to float32 beside it. grid = (ceil(N/64), ceil(M/64)),
//    block = 256, no dynamic shared memory.
//
// The tensor-core kernel rasterises blocks in groups of 8 block rows, as the
// matmul kernels do.

#include "common.cuh"
#include "sm80.cuh"

namespace wq {

// The formats: kernels.WeightFormat's values.
constexpr int FMT_INT8 = 1, FMT_INT4 = 2, FMT_NF4 = 3;

// NF4 is kernels.NF4Levels.
__constant__ float NF4[16] = {
    -1.0f, -0.6961928009986877f, -0.5250730514526367f, -0.39491748809814453f,
    -0.28444138169288635f, -0.18477343022823334f, -0.09105003625154495f, 0.0f,
    0.07958029955625534f, 0.16093020141124725f, 0.24611230194568634f, 0.33791524171829224f,
    0.44070982933044434f, 0.5626170039176941f, 0.7229568362236023f, 1.0f,
};

// level is the value of 4-bit code c (0..15) before the scale; tab holds
// nf4's levels.
template <int FMT> __device__ __forceinline__ float level(unsigned c, const float* tab) {
    if constexpr (FMT == FMT_NF4) {
        return tab[c];
    } else {
        return (float)((int)c - 8);
    }
}

// ---------------------------------------------------------------------------
// wmatmul_gemvR_FMT_T: M ≤ R.

constexpr int GEMV_WARPS = 4, GEMV_COLS = 2, GEMV_THREADS = 32 * GEMV_WARPS;

// Codes is the layout of a format's codes in 32-bit words of w.
template <int FMT> struct Codes {
    static constexpr bool Q4 = FMT != FMT_INT8;
    static constexpr int PER_WORD = Q4 ? 8 : 4;     // codes per 32-bit word
    static constexpr int PER_CHUNK = 4 * PER_WORD;  // codes per 16-byte chunk
};

// The float32 value of byte i (0..3) of u is 2²³ + that byte: the byte
// placed below the exponent of 2²³ (0x4B000000).
#define WQ_MAGIC_BYTE(u, i) __uint_as_float(__byte_perm((u), 0x4B000000u, 0x7540u + (i)))

// decode sets lv to the levels of the codes of word q in k order: for int8
// its 4 bytes, for the 4-bit formats its 8 nibbles (the low nibble of byte
// i is code 2i, the high one 2i+1). tab holds nf4's levels in shared memory.
template <int FMT>
__device__ __forceinline__ void decode(unsigned q, float (&lv)[Codes<FMT>::PER_WORD], const float* tab) {
    if constexpr (FMT == FMT_INT8) {
        const unsigned u = q ^ 0x80808080u; // byte b + 128, unsigned
#pragma unroll
        for (int i = 0; i < 4; i++) lv[i] = WQ_MAGIC_BYTE(u, i) - 8388736.0f; // 2²³ + 128
    } else if constexpr (FMT == FMT_INT4) {
        const unsigned lo = q & 0x0F0F0F0Fu, hi = (q >> 4) & 0x0F0F0F0Fu;
#pragma unroll
        for (int i = 0; i < 4; i++) {
            lv[2 * i] = WQ_MAGIC_BYTE(lo, i) - 8388616.0f; // 2²³ + 8
            lv[2 * i + 1] = WQ_MAGIC_BYTE(hi, i) - 8388616.0f;
        }
    } else {
        // Byte i of lo4 (hi4) is the low (high) nibble of byte i times 4:
        // the offset of its level in tab.
        const unsigned lo4 = (q << 2) & 0x3C3C3C3Cu, hi4 = (q >> 2) & 0x3C3C3C3Cu;
        const char* t = reinterpret_cast<const char*>(tab);
#pragma unroll
        for (int i = 0; i < 4; i++) {
            lv[2 * i] = *reinterpret_cast<const float*>(t + __byte_perm(lo4, 0u, 0x4440u + i));
            lv[2 * i + 1] = *reinterpret_cast<const float*>(t + __byte_perm(hi4, 0u, 0x4440u + i));
        }
    }
}

#undef WQ_MAGIC_BYTE

__device__ __forceinline__ unsigned word(const uint4& q, int j) {
    return j == 0 ? q.x : j == 1 ? q.y : j == 2 ? q.z : q.w;
}

// gemv is wmatmul_gemvR_FMT_T: warp w of block b computes columns n0 =
// 2(4b + w) and n0+1 for all M ≤ R rows (a column past N repeats column
// N−1, whose sums are not stored).
template <typename T, int FMT, int R>
__device__ __forceinline__ void gemv(T* __restrict__ out, const T* __restrict__ x, const int8_t* __restrict__ w,
                                     const float* __restrict__ scales, const float* __restrict__ bias, int M, int N,
                                     int K, int group) {
    using C = Codes<FMT>;
    constexpr int NC = GEMV_COLS, PW = C::PER_WORD;
    __shared__ float tab[16];
    if (FMT == FMT_NF4) {
        if (threadIdx.x < 16) tab[threadIdx.x] = NF4[threadIdx.x];
        __syncthreads();
    }
    const int lane = threadIdx.x & 31;
    const long long n0 = ((long long)blockIdx.x * GEMV_WARPS + (threadIdx.x >> 5)) * NC;
    if (n0 >= N) return; // whole warps
    const int rb = C::Q4 ? K / 2 : K;     // bytes of a row of w
    const int ng = C::Q4 ? K / group : 1; // scales of a row
    const int8_t* wr[NC];
    const float* sr[NC];
#pragma unroll
    for (int c = 0; c < NC; c++) {
        const long long n = min(n0 + c, (long long)N - 1);
        wr[c] = w + n * rb;
        sr[c] = scales + n * ng;
    }
    float acc[R][NC];
#pragma unroll
    for (int m = 0; m < R; m++)
#pragma unroll
        for (int c = 0; c < NC; c++) acc[m][c] = 0.0f;

    if (rb % 16 == 0 && aligned_to(w, 16) && aligned_to(x, 16)) {
        // Rows of x are 16-byte aligned too: K·sizeof(T) is a multiple of 16.
        // The next chunk's codes are read while this one's are multiplied.
        const int chunks = rb / 16;
        uint4 q[NC] = {}, qn[NC] = {};
        if (lane < chunks) {
#pragma unroll
            for (int c = 0; c < NC; c++) q[c] = *reinterpret_cast<const uint4*>(wr[c] + (long long)lane * 16);
        }
#pragma unroll 1
        for (int ch = lane; ch < chunks; ch += 32) {
            if (ch + 32 < chunks) {
#pragma unroll
                for (int c = 0; c < NC; c++) qn[c] = *reinterpret_cast<const uint4*>(wr[c] + (long long)(ch + 32) * 16);
            }
            float s[NC]; // the chunk's group's scales (4-bit)
            const int gi = C::Q4 ? ch * C::PER_CHUNK / group : 0; // one group (group % 32 == 0)
#pragma unroll
            for (int c = 0; c < NC; c++) s[c] = C::Q4 ? sr[c][gi] : 1.0f;
            // p: this chunk's sums (int8: the running sums, scaled at the end).
            float p[R][NC];
#pragma unroll
            for (int m = 0; m < R; m++)
#pragma unroll
                for (int c = 0; c < NC; c++) p[m][c] = C::Q4 ? 0.0f : acc[m][c];
            const long long k0 = (long long)ch * C::PER_CHUNK;
#pragma unroll
            for (int j = 0; j < 4; j++) {
                float lv[NC][PW];
#pragma unroll
                for (int c = 0; c < NC; c++) decode<FMT>(word(q[c], j), lv[c], tab);
#pragma unroll
                for (int m = 0; m < R; m++) {
                    if (m < M) {
                        float xv[PW];
                        ldx<PW>(x + (long long)m * K + k0 + j * PW, xv);
#pragma unroll
                        for (int c = 0; c < NC; c++)
#pragma unroll
                            for (int e = 0; e < PW; e++) p[m][c] = fmaf(xv[e], lv[c][e], p[m][c]);
                    }
                }
            }
#pragma unroll
            for (int m = 0; m < R; m++)
#pragma unroll
                for (int c = 0; c < NC; c++) acc[m][c] = C::Q4 ? fmaf(p[m][c], s[c], acc[m][c]) : p[m][c];
#pragma unroll
            for (int c = 0; c < NC; c++) q[c] = qn[c];
        }
    } else if (C::Q4) {
        // Single bytes: codes k = 2b, 2b+1 of byte b, dequantized.
        for (int b = lane; b < rb; b += 32) {
            const int k = 2 * b, gi = k / group;
#pragma unroll
            for (int c = 0; c < NC; c++) {
                const unsigned byte = (unsigned)(uint8_t)wr[c][b];
                const float s = sr[c][gi];
                const float w0 = __fmul_rn(level<FMT>(byte & 15u, tab), s);
                const float w1 = __fmul_rn(level<FMT>(byte >> 4, tab), s);
#pragma unroll
                for (int m = 0; m < R; m++) {
                    if (m < M) {
                        const T* xr = x + (long long)m * K + k;
                        acc[m][c] = fmaf(to_f32(xr[0]), w0, acc[m][c]);
                        acc[m][c] = fmaf(to_f32(xr[1]), w1, acc[m][c]);
                    }
                }
            }
        }
    } else {
        for (int k = lane; k < K; k += 32) {
#pragma unroll
            for (int c = 0; c < NC; c++) {
                const float code = (float)wr[c][k];
#pragma unroll
                for (int m = 0; m < R; m++)
                    if (m < M) acc[m][c] = fmaf(to_f32(x[(long long)m * K + k]), code, acc[m][c]);
            }
        }
    }

    // Lane m·NC + c keeps the sum of row m, column n0 + c.
    float mine = 0.0f;
#pragma unroll
    for (int m = 0; m < R; m++) {
#pragma unroll
        for (int c = 0; c < NC; c++) {
            const float v = warp_sum(acc[m][c]);
            if (lane == m * NC + c) mine = v;
        }
    }
    const int m = lane / NC;
    const long long n = n0 + lane % NC;
    if (m < M && m < R && n < N) {
        float v = mine;
        if (!C::Q4) v = __fmul_rn(v, scales[n]);
        if (bias != nullptr) v = __fadd_rn(v, bias[n]);
        out[(long long)m * N + n] = from_f32<T>(v);
    }
}

// ---------------------------------------------------------------------------
// wmatmul_tc_FMT_T: tensor cores, sm_80+.
//
// Per stage: x's tile [128][32 + 8 elements] (80-byte rows, as matmul_tc's
// A tile: ldmatrix's 8 rows of 16 bytes hit distinct banks), then w's code
// bytes [64][PITCH]: 16 bytes of a row per K-tile for the 4-bit formats,
// 32 for int8 (in 48-byte rows, so that the lanes' 32-bit reads of 8 rows
// hit distinct banks).

constexpr int TM = 128, TN = 64, TK = 32, TC_THREADS = 128, TC_STAGES = 3;
constexpr int TX_LD = TK + 8;                  // x tile pitch (elements)
constexpr int TX_BYTES = TM * TX_LD * 2;       // 10240
constexpr int TW_BYTES = TN * 48;              // 3072: int8's rows; the 4-bit formats use 1024
constexpr int TC_STAGE = TX_BYTES + TW_BYTES;  // 13312
constexpr int TC_SMEM = TC_STAGES * TC_STAGE;  // 39936
static_assert(TC_SMEM == 39936, "launch comment out of date");

template <int FMT> struct TcCodes {
    static constexpr int ROW = FMT == FMT_INT8 ? 32 : 16;   // code bytes of a row per K-tile
    static constexpr int PITCH = FMT == FMT_INT8 ? 48 : 16; // their pitch in shared memory
    static constexpr int CHUNKS = TN * ROW / 16;            // 16-byte copies per tile
    static_assert(CHUNKS <= TC_THREADS && TN * PITCH <= TW_BYTES, "w tile");
};

// Terms is the number of T values whose sum is a level in the B fragments:
// one where the levels are exact in T (int8 codes and int4 levels are small
// integers); for nf4, 2 in f16 (within 2⁻²³ of the float32 level: the
// second term's subnormals end there) and 3 in bf16 (exactly it).
template <int FMT, typename T> struct Terms {
    static constexpr int N = FMT != FMT_NF4 ? 1 : 3;
};
template <int FMT> struct Terms<FMT, __half> {
    static constexpr int N = FMT != FMT_NF4 ? 1 : 2;
};

#if __CUDA_ARCH__ >= 800

// TcLoader issues the cp.async copies of one stage: x's tile (512 chunks of
// 8 elements, 4 per thread: row tid/4 + 32i, elements 8(tid%4)..) and w's
// code bytes (CHUNKS chunks of 16 bytes, one per thread below CHUNKS: row
// tid/(ROW/16), bytes 16(tid%(ROW/16)).. of the tile's ROW). Chunks outside
// the matrices are zero-filled; K % 8 == 0 (x) and row bytes % 16 == 0 (w)
// make each entirely inside or outside.
template <typename T, int FMT> struct TcLoader {
    using W = TcCodes<FMT>;
    const T* x;
    const int8_t* w;
    const T* xp;        // chunk 0's source for the next tile
    const int8_t* wp;   // the w chunk's source for the next tile
    long long xstride;  // elements between x chunk i and i+1
    unsigned xoff, woff; // shared byte offsets in the stage
    unsigned xmask;     // bit i: x chunk i's row is inside
    bool wrow;          // the w chunk exists and its row is inside
    int xklim, wklim;   // the tile at k0 is inside iff k0 < xklim; its w chunk iff k0/TK·ROW < wklim

    __device__ __forceinline__ TcLoader(const T* x_, const int8_t* w_, int M, int N, int K, int rb, int bm, int bn,
                                        int tid) {
        x = x_;
        w = w_;
        const int xr = tid >> 2, xc = (tid & 3) * 8;
        xp = x + (long long)(bm + xr) * K + xc;
        xstride = 32LL * K;
        xoff = (unsigned)((xr * TX_LD + xc) * 2);
        xmask = 0;
#pragma unroll
        for (int i = 0; i < 4; i++) xmask |= (bm + xr + 32 * i < M ? 1u : 0u) << i;
        xklim = K - xc;
        constexpr int CPR = W::ROW / 16; // chunks of a row
        const int wr = tid / CPR, wc = (tid % CPR) * 16;
        wp = w + (long long)(bn + wr) * rb + wc;
        woff = (unsigned)(TX_BYTES + wr * W::PITCH + wc);
        wrow = tid < W::CHUNKS && bn + wr < N;
        wklim = rb - wc;
    }

    // load copies the tile at k0 into the stage at shared address s, then
    // advances to the next tile.
    __device__ __forceinline__ void load(unsigned s, int k0) {
#pragma unroll
        for (int i = 0; i < 4; i++) {
            const bool ok = ((xmask >> i) & 1u) && k0 < xklim;
            cp_async16(s + xoff + (unsigned)(i * 32 * TX_LD * 2), ok ? xp + i * xstride : x, ok);
        }
        xp += TK;
        if (threadIdx.x < W::CHUNKS) {
            const bool ok = wrow && k0 / TK * W::ROW < wklim;
            cp_async16(s + woff, ok ? wp : w, ok);
        }
        wp += W::ROW;
    }
};

// tc_stage runs the MMAs of one stage (TK = 32: two k16 steps) for this
// warp's 64×32 tile into part: A fragments by ldmatrix from x's tile, B
// fragments built from the code bytes (g = lane/4, t = lane%4: b0 holds
// codes k = 2t, 2t+1 of column g, b1 codes 2t+8, 2t+9; for the 4-bit
// formats those are the nibbles of byte t of the k16 step's 8 bytes, and
// of byte t+4).
template <typename T, int FMT>
__device__ __forceinline__ void tc_stage(unsigned sx, const unsigned char* sw, const float (*tab)[16], int wm0,
                                         int wn0, int lane, float (&part)[4][4][4]) {
    using W = TcCodes<FMT>;
    constexpr int NT = Terms<FMT, T>::N;
    const int g = lane >> 2, t = lane & 3;
    // ldmatrix: matrices (m0-7, k0-7) (m8-15, k0-7) (m0-7, k8-15) (m8-15, k8-15).
    const unsigned aoff = (unsigned)(((wm0 + (lane & 15)) * TX_LD + (lane >> 4) * 8) * 2);
#pragma unroll
    for (int kk = 0; kk < TK / 16; kk++) {
        unsigned af[4][4];
#pragma unroll
        for (int i = 0; i < 4; i++) ldsm_x4(af[i], sx + aoff + (unsigned)((i * 16 * TX_LD + kk * 16) * 2));
#pragma unroll
        for (int j = 0; j < 4; j++) {
            const unsigned char* row = sw + (wn0 + 8 * j + g) * W::PITCH;
            unsigned b[NT][2];
            if constexpr (FMT == FMT_INT8) {
                // Codes 16kk + 2t, +1 are bytes 2t, 2t+1 of the step's 16;
                // codes +8 are 8 bytes on.
#pragma unroll
                for (int h = 0; h < 2; h++) {
                    const unsigned u = *reinterpret_cast<const unsigned*>(row + kk * 16 + h * 8 + (t >> 1) * 4);
                    const unsigned p = u >> (16 * (t & 1));
                    b[0][h] = pack2((float)(int8_t)(p & 0xffu), (float)(int8_t)((p >> 8) & 0xffu), T());
                }
            } else {
#pragma unroll
                for (int h = 0; h < 2; h++) {
                    const unsigned u = *reinterpret_cast<const unsigned*>(row + kk * 8 + h * 4);
                    const unsigned byte = (u >> (8 * t)) & 0xffu;
#pragma unroll
                    for (int e = 0; e < NT; e++) b[e][h] = pack2(tab[e][byte & 15u], tab[e][byte >> 4], T());
                }
            }
#pragma unroll
            for (int e = 0; e < NT; e++)
#pragma unroll
                for (int i = 0; i < 4; i++) mma16816(part[i][j], af[i], b[e][0], b[e][1], T());
        }
    }
}

#endif // __CUDA_ARCH__ >= 800

// tc_gemm is wmatmul_tc_FMT_T: 4 warps in 2 × 2, each 64×32 (4 m16 × 4 n8
// tiles), a 3-stage cp.async pipeline over K-tiles of 32.
template <typename T, int FMT>
__device__ __forceinline__ void tc_gemm(T* __restrict__ out, const T* __restrict__ x, const int8_t* __restrict__ w,
                                        const float* __restrict__ scales, const float* __restrict__ bias, int M,
                                        int N, int K, int group) {
#if __CUDA_ARCH__ >= 800
    extern __shared__ __align__(16) unsigned char wq_tc_smem[];
    constexpr int S = TC_STAGES, NT = Terms<FMT, T>::N;
    constexpr bool Q4 = FMT != FMT_INT8;
    // tab[e][c]: term e of level c (Terms), each a value of T held as
    // float32.
    __shared__ float tab[3][16];
    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    if (Q4 && tid < 16) {
        float r = FMT == FMT_NF4 ? NF4[tid] : (float)(tid - 8);
#pragma unroll
        for (int e = 0; e < NT; e++) {
            const float v = to_f32(from_f32<T>(r));
            tab[e][tid] = v;
            r -= v; // exact: v is r rounded
        }
    }
    // The first barrier of the main loop publishes tab.
    int tm, tn;
    tile_coords(tm, tn);
    const int bm = tm * TM, bn = tn * TN;
    const int wm0 = (warp >> 1) * 64, wn0 = (warp & 1) * 32;
    const int g = lane >> 2, t = lane & 3;
    const int rb = Q4 ? K / 2 : K;
    const int ng = Q4 ? K / group : 1;
    const int kTiles = (K + TK - 1) / TK;
    // K-tiles per group: the sums of a group's tiles are scaled together.
    const int per_group = Q4 ? group / TK : kTiles;

    float acc[4][4][4], part[4][4][4];
#pragma unroll
    for (int i = 0; i < 4; i++)
#pragma unroll
        for (int j = 0; j < 4; j++)
#pragma unroll
            for (int e = 0; e < 4; e++) acc[i][j][e] = part[i][j][e] = 0.0f;

    const unsigned s0 = smem_u32(wq_tc_smem);
    TcLoader<T, FMT> ld(x, w, M, N, K, rb, bm, bn, tid);
#pragma unroll
    for (int s = 0; s < S - 1; s++) {
        if (s < kTiles) ld.load(s0 + s * TC_STAGE, s * TK);
        cp_async_commit();
    }
    // The scales of this lane's columns (wn0 + 8j + 2t + e) in the current
    // group, read at its first tile.
    long long sidx[4][2];
    bool sok[4][2];
#pragma unroll
    for (int j = 0; j < 4; j++)
#pragma unroll
        for (int e = 0; e < 2; e++) {
            const int n = bn + wn0 + 8 * j + 2 * t + e;
            sok[j][e] = n < N;
            sidx[j][e] = (long long)n * ng;
        }
    float sc[4][2];
    int rs = 0, ws = S - 1, gt = 0, grp = 0;
    for (int kt = 0; kt < kTiles; kt++) {
        if (gt == 0) {
#pragma unroll
            for (int j = 0; j < 4; j++)
#pragma unroll
                for (int e = 0; e < 2; e++) sc[j][e] = sok[j][e] ? scales[sidx[j][e] + grp] : 0.0f;
        }
        // At most S-2 groups pending: tile kt has landed (this thread's
        // copies; the barrier makes everyone's visible and ends every warp's
        // reads of tile kt-1, whose stage ws is refilled below).
        cp_async_wait<S - 2>();
        __syncthreads();
        const int nt = kt + S - 1;
        if (nt < kTiles) ld.load(s0 + ws * TC_STAGE, nt * TK);
        cp_async_commit();
        tc_stage<T, FMT>(s0 + rs * TC_STAGE, wq_tc_smem + rs * TC_STAGE + TX_BYTES, tab, wm0, wn0, lane, part);
        if (++gt == per_group) {
#pragma unroll
            for (int i = 0; i < 4; i++)
#pragma unroll
                for (int j = 0; j < 4; j++)
#pragma unroll
                    for (int e = 0; e < 4; e++) {
                        acc[i][j][e] = fmaf(part[i][j][e], sc[j][e & 1], acc[i][j][e]);
                        part[i][j][e] = 0.0f;
                    }
            gt = 0;
            grp++;
        }
        rs = rs + 1 == S ? 0 : rs + 1;
        ws = ws + 1 == S ? 0 : ws + 1;
    }
    cp_async_wait<0>(); // only empty groups remain

    // acc[i][j]: rows g, g+8 of m-tile i, columns 2t, 2t+1 of n-tile j.
#pragma unroll
    for (int j = 0; j < 4; j++) {
#pragma unroll
        for (int e = 0; e < 2; e++) {
            const int n = bn + wn0 + 8 * j + 2 * t + e;
            if (n >= N) continue;
            const float bv = bias != nullptr ? bias[n] : 0.0f;
#pragma unroll
            for (int i = 0; i < 4; i++) {
#pragma unroll
                for (int h = 0; h < 2; h++) {
                    const int m = bm + wm0 + 16 * i + g + 8 * h;
                    if (m >= M) continue;
                    float v = acc[i][j][2 * h + e];
                    if (bias != nullptr) v = __fadd_rn(v, bv);
                    out[(long long)m * N + n] = from_f32<T>(v);
                }
            }
        }
    }
#else
    __trap();
#endif
}

// ---------------------------------------------------------------------------
// wmatmul_simt_FMT_T: any K and alignment.

constexpr int SM = 64, SN = 64, SK = 16, SIMT_THREADS = 256;
constexpr int S_LD = 64 + 4; // pitch of the k-major tiles (floats)

// dequant is W[n, k] in float32: level·scale rounded once, as the CPU
// dequantizes.
template <int FMT>
__device__ __forceinline__ float dequant(const int8_t* __restrict__ w, const float* __restrict__ scales, long long n,
                                         int k, int K, int group, const float* tab) {
    if constexpr (FMT == FMT_INT8) {
        return __fmul_rn((float)w[n * K + k], scales[n]);
    } else {
        const unsigned byte = (unsigned)(uint8_t)w[n * (K / 2) + k / 2];
        const unsigned c = k & 1 ? byte >> 4 : byte & 15u;
        return __fmul_rn(level<FMT>(c, tab), scales[n * (K / group) + k / group]);
    }
}

// simt_gemm is wmatmul_simt_FMT_T: thread (ty, tx) = (tid/16, tid%16) of
// the 64×64 block tile computes rows ty + 16i and columns tx + 16j, i, j <
// 4.
template <typename T, int FMT>
__device__ __forceinline__ void simt_gemm(T* __restrict__ out, const T* __restrict__ x,
                                          const int8_t* __restrict__ w, const float* __restrict__ scales,
                                          const float* __restrict__ bias, int M, int N, int K, int group) {
    __shared__ float xs[SK][S_LD], ws[SK][S_LD], tab[16];
    const int tid = threadIdx.x, tx = tid & 15, ty = tid >> 4;
    if (tid < 16) tab[tid] = FMT == FMT_NF4 ? NF4[tid] : (float)(tid - 8);
    const int bm = blockIdx.y * SM, bn = blockIdx.x * SN;
    float acc[4][4];
#pragma unroll
    for (int i = 0; i < 4; i++)
#pragma unroll
        for (int j = 0; j < 4; j++) acc[i][j] = 0.0f;
    __syncthreads(); // tab
    for (int k0 = 0; k0 < K; k0 += SK) {
        // Element q·256 + tid of each tile: row (x) or column (w)
        // (q·256 + tid)/16, k0 + tid%16.
#pragma unroll
        for (int q = 0; q < SM * SK / SIMT_THREADS; q++) {
            const int e = q * SIMT_THREADS + tid, r = e / SK, kk = e % SK, k = k0 + kk;
            const int m = bm + r, n = bn + r;
            xs[kk][r] = m < M && k < K ? to_f32(x[(long long)m * K + k]) : 0.0f;
            ws[kk][r] = n < N && k < K ? dequant<FMT>(w, scales, n, k, K, group, tab) : 0.0f;
        }
        __syncthreads();
#pragma unroll
        for (int kk = 0; kk < SK; kk++) {
            float a[4], b[4];
#pragma unroll
            for (int i = 0; i < 4; i++) {
                a[i] = xs[kk][ty + 16 * i];
                b[i] = ws[kk][tx + 16 * i];
            }
#pragma unroll
            for (int i = 0; i < 4; i++)
#pragma unroll
                for (int j = 0; j < 4; j++) acc[i][j] = fmaf(a[i], b[j], acc[i][j]);
        }
        __syncthreads(); // the tiles are rewritten
    }
#pragma unroll
    for (int j = 0; j < 4; j++) {
        const int n = bn + tx + 16 * j;
        if (n >= N) continue;
        const float bv = bias != nullptr ? bias[n] : 0.0f;
#pragma unroll
        for (int i = 0; i < 4; i++) {
            const int m = bm + ty + 16 * i;
            if (m >= M) continue;
            float v = acc[i][j];
            if (bias != nullptr) v = __fadd_rn(v, bv);
            out[(long long)m * N + n] = from_f32<T>(v);
        }
    }
}

} // namespace wq

// ---------------------------------------------------------------------------
// Entry points.

#define WMM_PARAMS(T)                                                                                            \
    T *out, const T *__restrict__ x, const int8_t *__restrict__ w, const float *__restrict__ scales,             \
        const float *__restrict__ bias, int M, int N, int K, int group
#define WMM_ARGS out, x, w, scales, bias, M, N, K, group

// wmatmul_gemvR_FMT_T: M ≤ R; grid ceil(N/8), block 128; every target.
#define WMM_GEMV(R, FMT, F, SUF, T)                                                                              \
    extern "C" __global__ void __launch_bounds__(wq::GEMV_THREADS) wmatmul_gemv##R##_##FMT##_##SUF(WMM_PARAMS(T)) { \
        wq::gemv<T, F, R>(WMM_ARGS);                                                                             \
    }

// wmatmul_tc_FMT_T: grid (ceil(N/64), ceil(M/128)), block 128, dynamic
// smem 39936 bytes; sm_80+, K % 16 == 0, x and w 16-byte aligned.
// wmatmul_simt_FMT_T: grid (ceil(N/64), ceil(M/64)), block 256; every
// target.
#define WMM_DEFINE(FMT, F, SUF, T)                                                                               \
    WMM_GEMV(1, FMT, F, SUF, T)                                                                                  \
    WMM_GEMV(2, FMT, F, SUF, T)                                                                                  \
    WMM_GEMV(4, FMT, F, SUF, T)                                                                                  \
    WMM_GEMV(8, FMT, F, SUF, T)                                                                                  \
    extern "C" __global__ void __launch_bounds__(wq::SIMT_THREADS) wmatmul_simt_##FMT##_##SUF(WMM_PARAMS(T)) {   \
        wq::simt_gemm<T, F>(WMM_ARGS);                                                                           \
    }
#define WMM_DEFINE_TC(FMT, F, SUF, T)                                                                            \
    extern "C" __global__ void __launch_bounds__(wq::TC_THREADS) wmatmul_tc_##FMT##_##SUF(WMM_PARAMS(T)) {       \
        wq::tc_gemm<T, F>(WMM_ARGS);                                                                             \
    }

#define WMM_FORMATS(SUF, T)                      \
    WMM_DEFINE(int8, wq::FMT_INT8, SUF, T)       \
    WMM_DEFINE(int4, wq::FMT_INT4, SUF, T)       \
    WMM_DEFINE(nf4, wq::FMT_NF4, SUF, T)

WMM_FORMATS(f32, float)
WMM_FORMATS(f16, __half)
WMM_FORMATS(bf16, __nv_bfloat16)

WMM_DEFINE_TC(int8, wq::FMT_INT8, f16, __half)
WMM_DEFINE_TC(int4, wq::FMT_INT4, f16, __half)
WMM_DEFINE_TC(nf4, wq::FMT_NF4, f16, __half)
WMM_DEFINE_TC(int8, wq::FMT_INT8, bf16, __nv_bfloat16)
WMM_DEFINE_TC(int4, wq::FMT_INT4, bf16, __nv_bfloat16)
WMM_DEFINE_TC(nf4, wq::FMT_NF4, bf16, __nv_bfloat16)
