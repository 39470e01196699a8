// quant.cu: the Quant op group (kernels/quant.go): symmetric int8
// quantization with the narrow range [−127, 127] and static or dynamic
// scales, dequantization, and the int8 product a·bᵀ with exact int32 sums
// and a fused float epilogue. Semantics: kernels.Quant.
//
// The scheme (kernels.QuantizeValue): q = clamp(round_half_even(x/s),
// −127, 127) with an IEEE float32 division, NaN → 0. Scales are F32, one per
// tensor (per_row = 0: scale[0]) or one per row (per_row = 1: scale[r]).
//
// Kernels:
//
//  quantize_T (T = f32, f16, bf16): q (int8 [rows, k]) from x (T [rows, k]).
//    dynamic = 0: scale is read. dynamic = 1: scale[r] is written first,
//    max_k |x[r, k]| / 127, 1 for a row of zeros, NaN for a row holding a
//    NaN (whose values then quantize to 0); per_row is ignored.
//  dequantize_T: out (T) = float32(q)·scale rounded once to T.
//    Both: a group of blockDim.x threads (a multiple of 32, at most 256) per
//    row, blockDim.y = 256/blockDim.x rows per block, grid-stride over row
//    blocks; no dynamic shared memory. Any k ≥ 0 (4-element vector accesses
//    when k % 4 == 0 and the pointers allow).
//
//  QMatMul, all with the signature
//    (T* c, const int8_t* a, const int8_t* b, const float* ascale,
//     const float* bscale, const float* bias, const float* out_scale,
//     const T* residual, int M, int N, int K, int ldc, int a_per_row,
//     int b_per_row, int act)
//  for T = f32, f16, bf16, int8, i32 (the out dtype): a [M, K] times bᵀ,
//  b [N, K] (nn.Linear's weight), summed exactly in int32, into the first
//  N columns of c [M, ldc] (ldc ≥ N; QMatMul passes ldc = N):
//    i32:   c = acc (the scales, bias, out_scale and residual are not read);
//    float: c = act(float(acc)·(ascale[m]·bscale[n]) + bias[n] + residual[m, n])
//           in float32, each operation rounded in turn from the left, then
//           rounded once to T; bias and residual may be NULL; residual,
//           [M, ldc] like c, may be c itself (each element is read before
//           it is written, by the same thread);
//    int8:  that value without a residual (NULL) requantized with
//           out_scale[0] as quantize_T does.
//  M, N ≥ 1 (a grid with no blocks must not be launched), any K ≥ 0.
//  QConv2D (qconv.go) launches them on blocks of its output, one group's
//  channels of a slab of pixels (ldc = Co), with its residual.
//  Rows are read in 16-byte chunks when K % 16 == 0 and a, b are 16-byte
//  aligned, in 4-byte chunks when K % 4 == 0 and they are 4-byte aligned,
//  and otherwise in 4-byte chunks assembled from single bytes.
//
//  qmatmul_tc_T (sm_80+): mma.sync m16n8k32 s8 with s32 accumulation,
//    ldmatrix, 4-stage cp.async pipeline of 16-byte copies. Block tile
//    128x128x64, 4 warps of 64x64. Needs K % 16 == 0 and a, b 16-byte
//    aligned. grid = (ceil(N/128), ceil(M/128)), block = 128, dynamic shared
//    memory 81920 bytes (set MAX_DYNAMIC_SHARED_SIZE_BYTES). Traps below
//    sm_80.
//  qmatmul_mma_T (every target): the same block tile and fragments through
//    two shared buffers filled from registers (any K), 8 warps of 64x32;
//    m16n8k32 on sm_80+, four m8n8k16 products per m16n8k32 step on sm_75.
//    grid = (ceil(N/128), ceil(M/128)), block = 256, dynamic shared memory
//    40960 bytes.
//  qmatmul_gemv_T (every target): M ≤ 8 (decode): one warp per output
//    column, dp4a over chunks of b's row and a's rows, warp-reduced. grid =
//    ceil(N/8), block = 256, no dynamic shared memory.
//  qmatmul_sm90_T (qmatmul_sm90.cu, sm_90a only): the same product and
//    epilogue by wgmma m64n256k32 from TMA-loaded tiles, a and b passed as
//    tensor maps.
//
// Both tiled kernels rasterise blocks in groups of 8 block rows, as the
// matmul kernels do. The scheme's helpers and the epilogue (qk::Epi,
// qk::Out) are in quant.cuh, shared with qmatmul_sm90.cu.

#include "common.cuh"
#include "quant.cuh"
#include "sm80.cuh"

namespace qk {

// ---------------------------------------------------------------------------
// quantize and dequantize: a group of blockDim.x threads per row.

// group_umax returns the largest v of the threads with this threadIdx.y (a
// whole number of warps), in each of them. Every thread of the block calls
// it; sh holds one word per warp.
__device__ __forceinline__ unsigned group_umax(unsigned v, unsigned* sh) {
    v = warp_umax(v);
    const int wpg = (int)blockDim.x >> 5; // warps per group
    if (wpg == 1) return v;
    const int wid = (int)(threadIdx.y * blockDim.x + threadIdx.x) >> 5;
    __syncthreads(); // sh may still be read by the previous row
    if ((threadIdx.x & 31) == 0) sh[wid] = v;
    __syncthreads();
    const int first = (int)threadIdx.y * wpg;
    for (int i = 0; i < wpg; i++) v = max(v, sh[first + i]);
    return v;
}

template <typename T>
__device__ void quantize_impl(int8_t* __restrict__ q, float* __restrict__ scale, const T* __restrict__ x,
                              long long rows, int k, int per_row, int dynamic) {
    __shared__ unsigned sh[32];
    const int tx = threadIdx.x, w = blockDim.x, ry = blockDim.y;
    const bool vec = k % 4 == 0 && aligned_to(x, 4 * sizeof(T)) && aligned_to(q, 4);
    // The trip count is the same for every thread of the block (group_umax
    // has barriers).
    for (long long r0 = (long long)blockIdx.x * ry; r0 < rows; r0 += (long long)gridDim.x * ry) {
        const long long r = r0 + threadIdx.y;
        const bool live = r < rows;
        const T* xr = x + (live ? r : 0) * k;
        int8_t* qr = q + (live ? r : 0) * k;
        float s;
        if (dynamic) {
            unsigned m = 0;
            if (live) {
                if (vec) {
                    for (int j = 4 * tx; j < k; j += 4 * w) {
                        float v[4];
                        ld4(xr + j, v);
                        m = max(max(m, max(absbits(v[0]), absbits(v[1]))), max(absbits(v[2]), absbits(v[3])));
                    }
                } else {
                    for (int j = tx; j < k; j += w) m = max(m, absbits(to_f32(xr[j])));
                }
            }
            m = group_umax(m, sh);
            // amax/127 is NaN when amax is.
            s = m == 0 ? 1.0f : __fdiv_rn(__uint_as_float(m), 127.0f);
            if (live && tx == 0) scale[r] = s;
        } else {
            s = live ? scale[per_row ? r : 0] : 1.0f;
        }
        if (!live) continue;
        if (vec) {
            for (int j = 4 * tx; j < k; j += 4 * w) {
                float v[4];
                ld4(xr + j, v);
                *reinterpret_cast<unsigned*>(qr + j) = pack4(quantize_value(v[0], s), quantize_value(v[1], s),
                                                             quantize_value(v[2], s), quantize_value(v[3], s));
            }
        } else {
            for (int j = tx; j < k; j += w) qr[j] = (int8_t)quantize_value(to_f32(xr[j]), s);
        }
    }
}

template <typename T>
__device__ void dequantize_impl(T* __restrict__ out, const int8_t* __restrict__ q, const float* __restrict__ scale,
                                long long rows, int k, int per_row) {
    const int tx = threadIdx.x, w = blockDim.x, ry = blockDim.y;
    const bool vec = k % 4 == 0 && aligned_to(out, 4 * sizeof(T)) && aligned_to(q, 4);
    for (long long r = (long long)blockIdx.x * ry + threadIdx.y; r < rows; r += (long long)gridDim.x * ry) {
        const int8_t* qr = q + r * k;
        T* o = out + r * k;
        const float s = scale[per_row ? r : 0];
        if (vec) {
            for (int j = 4 * tx; j < k; j += 4 * w) {
                const unsigned u = *reinterpret_cast<const unsigned*>(qr + j);
                float v[4];
#pragma unroll
                for (int e = 0; e < 4; e++) v[e] = __fmul_rn((float)(int)(signed char)(u >> (8 * e)), s);
                st4(o + j, v);
            }
        } else {
            for (int j = tx; j < k; j += w) o[j] = from_f32<T>(__fmul_rn((float)qr[j], s));
        }
    }
}

// ---------------------------------------------------------------------------
// Tiled kernels: qmatmul_tc_T and qmatmul_mma_T.
//
// Block tile 128x128, BK = 64 int8 along K per stage. Both operands are
// k-major in shared memory (A [M,K] and B [N,K] as stored): [128][80 bytes]
// (64 bytes of K and 16 of padding, so that ldmatrix's 8 rows of 16 bytes
// hit distinct banks), 10240 bytes per operand, A then B per stage. The
// int8 fragments of m16n8k32 are the 16-bit fragments of m16n8k16 viewed
// as bytes, so ldmatrix.b16 loads them: a 16x32 A fragment is one x4
// (rows 0-7 / 8-15 × bytes 0-15 / 16-31), and one x4 gives the 8x32 B
// fragments of two n8 tiles.

constexpr int BM = 128, BN = 128, BK = 64;
constexpr int LDK = BK + 16;           // shared pitch of an operand row (bytes)
constexpr int OP_BYTES = BM * LDK;     // 10240
constexpr int STAGE_BYTES = 2 * OP_BYTES;
constexpr int TC_STAGES = 4, TC_THREADS = 128;
constexpr int TC_SMEM = TC_STAGES * STAGE_BYTES; // 81920
constexpr int MMA_THREADS = 256;
constexpr int MMA_SMEM = 2 * STAGE_BYTES; // 40960
constexpr int LDS = BN + 8; // epilogue staging pitch (ints): the int2 fragment stores are conflict-free
static_assert(TC_SMEM == 81920 && MMA_SMEM == 40960 && BM == 128 && BN == 128, "launch comment out of date");
static_assert(BM * LDS * 4 <= TC_SMEM, "qmatmul_tc staging tile does not fit");
static_assert(BM / 2 * LDS * 4 <= MMA_SMEM, "qmatmul_mma staging half tile does not fit");

// mma_s8 is d += a·b for a 16x32 s8 A fragment and a 32x8 s8 B fragment
// (g = lane/4, t = lane%4): a0 (row g, k 4t..4t+3), a1 (g+8, 4t..), a2
// (g, 16+4t..), a3 (g+8, 16+4t..); b0 (k 4t..4t+3, column g), b1 (k
// 16+4t..); d0, d1 (row g, columns 2t, 2t+1), d2, d3 (row g+8). On sm_75,
// which lacks m16n8k32, it is four m8n8k16 products, whose A, B and D
// fragments are exactly those pieces: rows g and g+8 times k 0-15 and 16-31.
__device__ __forceinline__ void mma_s8(int (&d)[4], const unsigned (&a)[4], unsigned b0, unsigned b1) {
#if __CUDA_ARCH__ >= 800
    asm volatile("mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32 "
                 "{%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
                 : "+r"(d[0]), "+r"(d[1]), "+r"(d[2]), "+r"(d[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
#else
#define QK_MMA8816(D0, D1, A, B)                                                                  \
    asm volatile("mma.sync.aligned.m8n8k16.row.col.s32.s8.s8.s32 {%0,%1}, {%2}, {%3}, {%0,%1};\n" \
                 : "+r"(D0), "+r"(D1)                                                             \
                 : "r"(A), "r"(B))
    QK_MMA8816(d[0], d[1], a[0], b0);
    QK_MMA8816(d[0], d[1], a[2], b1);
    QK_MMA8816(d[2], d[3], a[1], b0);
    QK_MMA8816(d[2], d[3], a[3], b1);
#undef QK_MMA8816
#endif
}

// stage_mma runs one stage (BK = 64: two k32 steps) of MMAs for a warp
// whose tile is MT m16 tiles by NT n8 tiles from (wm0, wn0) of the block
// tile; sA, sB are the shared-space addresses of the stage's operands.
template <int MT, int NT>
__device__ __forceinline__ void stage_mma(unsigned sA, unsigned sB, int wm0, int wn0, int lane,
                                          int (&acc)[MT][NT][4]) {
    static_assert(NT % 2 == 0, "B fragments come in pairs of n8 tiles");
    const int j4 = lane >> 3, r8 = lane & 7; // ldmatrix: matrix index, row in it
    // A: matrices (m0-7, k0-15) (m8-15, k0-15) (m0-7, k16-31) (m8-15, k16-31).
    const unsigned aoff = (unsigned)((wm0 + (lane & 15)) * LDK + (lane >> 4) * 16);
    // B: matrices (n0-7, k0-15) (n0-7, k16-31) (n8-15, k0-15) (n8-15, k16-31).
    const unsigned boff = (unsigned)((wn0 + r8 + (j4 >> 1) * 8) * LDK + (j4 & 1) * 16);
#pragma unroll
    for (int kk = 0; kk < BK / 32; kk++) {
        unsigned af[MT][4], bf[NT][2];
#pragma unroll
        for (int i = 0; i < MT; i++) ldsm_x4(af[i], sA + aoff + i * 16 * LDK + kk * 32);
#pragma unroll
        for (int p = 0; p < NT / 2; p++) ldsm_b_pair(bf[2 * p], bf[2 * p + 1], sB + boff + p * 16 * LDK + kk * 32);
#pragma unroll
        for (int i = 0; i < MT; i++)
#pragma unroll
            for (int j = 0; j < NT; j++) mma_s8(acc[i][j], af[i], bf[j][0], bf[j][1]);
    }
}

// store_tile applies the epilogue to the block tile's sums and stores them.
// The warps are WM x WN over the block tile (warp w: rows (w / WN)·BM/WM..,
// columns (w % WN)·BN/WN..); acc[i][j] holds rows (g, g+8) of m-tile i,
// columns (2t, 2t+1) of n-tile j. In each of PASSES passes, BM/PASSES rows
// are staged as int32 in shared memory S (pitch LDS), then stored
// row-coalesced: thread tid takes columns 4(tid%32)..+3 of staged rows
// tid/32, tid/32 + NTHREADS/32, ... Row m of c (and of the residual)
// starts ldc elements after row m−1. The caller has ended every read of
// the pipeline's shared memory with a barrier.
template <typename T, int NTHREADS, int WM, int WN, int MT, int NT, int PASSES>
__device__ __forceinline__ void store_tile(T* c, int* S, const int (&acc)[MT][NT][4], int bm, int bn, int M,
                                           int N, int ldc, const Epi& ep) {
    constexpr int ROWS = BM / PASSES, WROWS = BM / WM, WCOLS = BN / WN;
    static_assert(WROWS == MT * 16 && WCOLS == NT * 8 && WM * WN * 32 == NTHREADS, "warp layout");
    static_assert(ROWS % WROWS == 0, "a warp's rows are staged in one pass");
    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    const int wm0 = (warp / WN) * WROWS, wn0 = (warp % WN) * WCOLS;
    const int g = lane >> 2, t = lane & 3;
    const int scol = (tid & 31) * 4, col = bn + scol;
    Cols cl;
    cl.load(ep, col, N);
    const float os = out_scale(ep);
    // col is a multiple of 4: with ldc one too, every row's four columns
    // are as aligned as c and the residual.
    const bool vec = ldc % 4 == 0 && aligned_to(c, 4 * sizeof(T)) &&
                     (ep.residual == nullptr || aligned_to(ep.residual, 4 * sizeof(T))) && col + 3 < N;
#pragma unroll
    for (int pass = 0; pass < PASSES; pass++) {
        if (wm0 / ROWS == pass) {
#pragma unroll
            for (int i = 0; i < MT; i++) {
#pragma unroll
                for (int j = 0; j < NT; j++) {
                    const int row = wm0 - pass * ROWS + i * 16 + g, cc = wn0 + j * 8 + 2 * t;
                    *reinterpret_cast<int2*>(&S[row * LDS + cc]) = make_int2(acc[i][j][0], acc[i][j][1]);
                    *reinterpret_cast<int2*>(&S[(row + 8) * LDS + cc]) = make_int2(acc[i][j][2], acc[i][j][3]);
                }
            }
        }
        __syncthreads();
        if (col < N) {
#pragma unroll 1
            for (int r = tid >> 5; r < ROWS; r += NTHREADS / 32) {
                const int row = bm + pass * ROWS + r;
                if (row >= M) break;
                const int4 s = *reinterpret_cast<const int4*>(&S[r * LDS + scol]);
                const int v[4] = {s.x, s.y, s.z, s.w};
                const long long off = (long long)row * ldc + col;
                Out<T>::put4(c + off, res_ptr<T>(ep, off), v, N - col, vec, row_scale(ep, row), cl, ep, os);
            }
        }
        if (PASSES > 1) __syncthreads(); // S is rewritten by the next pass
    }
}

#if __CUDA_ARCH__ >= 800

// AsyncLoader issues the cp.async copies of one operand's tile per stage
// (qmatmul_tc_T): 128 rows x 64 bytes, 512 chunks of 16 bytes, 4 per thread.
// g is [D, K] (K % 16 == 0, 16-byte aligned); chunk i of thread tid is row
// d0 + tid/4 + 32i, bytes 16(tid%4).. of the tile's K. Chunks outside [0,
// D) x [0, K) are zero-filled (each is entirely inside or outside).
struct AsyncLoader {
    const int8_t* base; // fallback source of zero-filled chunks
    const int8_t* p;    // chunk 0's source for the next tile
    long long rstride;  // bytes between chunk i and chunk i+1 sources
    unsigned soff;      // chunk 0's shared byte offset in the operand region
    unsigned okmask;    // bit i: chunk i's row is inside
    int klim;           // the tile at k0 is inside iff k0 < klim

    __device__ __forceinline__ AsyncLoader(const int8_t* g, int D, int K, int d0, int tid) {
        const int r0 = tid >> 2, cc = (tid & 3) * 16;
        base = g;
        p = g + (long long)(d0 + r0) * K + cc;
        rstride = 32LL * K;
        soff = (unsigned)(r0 * LDK + cc);
        okmask = 0;
#pragma unroll
        for (int i = 0; i < 4; i++) okmask |= (d0 + r0 + 32 * i < D ? 1u : 0u) << i;
        klim = K - cc;
    }

    // load copies the tile at k0 into the operand region at shared address
    // s, then advances to the next tile.
    __device__ __forceinline__ void load(unsigned s, int k0) {
#pragma unroll
        for (int i = 0; i < 4; i++) {
            const bool ok = ((okmask >> i) & 1u) && k0 < klim;
            cp_async16(s + soff + (unsigned)(i * 32 * LDK), ok ? p + i * rstride : base, ok);
        }
        p += BK;
    }
};

#endif // __CUDA_ARCH__ >= 800

// tc_gemm is qmatmul_tc_T: 4 warps of 64x64, a 4-stage cp.async pipeline.
template <typename T>
__device__ __forceinline__ void tc_gemm(T* c, const int8_t* __restrict__ a, const int8_t* __restrict__ b,
                                        const Epi& ep, int M, int N, int K, int ldc) {
#if __CUDA_ARCH__ >= 800
    extern __shared__ __align__(16) unsigned char qk_tc_smem[];
    constexpr int S = TC_STAGES;
    int tm, tn;
    tile_coords(tm, tn);
    const int bm = tm * BM, bn = tn * BN;
    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    const int wm0 = (warp >> 1) * 64, wn0 = (warp & 1) * 64;

    int acc[4][8][4];
#pragma unroll
    for (int i = 0; i < 4; i++)
#pragma unroll
        for (int j = 0; j < 8; j++)
#pragma unroll
            for (int e = 0; e < 4; e++) acc[i][j][e] = 0;

    const int kTiles = (K + BK - 1) / BK;
    const unsigned s0 = smem_u32(qk_tc_smem);
    AsyncLoader la(a, M, K, bm, tid), lb(b, N, K, bn, tid);
    cp_async_pipeline<S>(
        kTiles,
        [&](int st, int kt) {
            la.load(s0 + st * STAGE_BYTES, kt * BK);
            lb.load(s0 + st * STAGE_BYTES + OP_BYTES, kt * BK);
        },
        [&](int st) { stage_mma<4, 8>(s0 + st * STAGE_BYTES, s0 + st * STAGE_BYTES + OP_BYTES, wm0, wn0, lane, acc); });
    __syncthreads(); // every warp is done with the pipeline's shared memory
    store_tile<T, TC_THREADS, 2, 2, 4, 8, 1>(c, reinterpret_cast<int*>(qk_tc_smem), acc, bm, bn, M, N, ldc, ep);
#else
    __trap();
#endif
}

// How the register-staged kernels read rows of a and b: LOAD_V16 in 16-byte
// chunks (K % 16 == 0, 16-byte aligned rows), LOAD_W4 in 4-byte chunks
// (K % 4 == 0, 4-byte aligned rows), LOAD_B4 in 4-byte chunks assembled
// from bytes (any K and alignment).
constexpr int LOAD_V16 = 0, LOAD_W4 = 1, LOAD_B4 = 2;

// load_mode picks the widest way to read rows of K bytes from a and b.
__device__ __forceinline__ int load_mode(const int8_t* a, const int8_t* b, int K) {
    if (K % 16 == 0 && aligned_to(a, 16) && aligned_to(b, 16)) return LOAD_V16;
    if (K % 4 == 0 && aligned_to(a, 4) && aligned_to(b, 4)) return LOAD_W4;
    return LOAD_B4;
}

// bytes4 returns the n (< 4 means a partial chunk; ≤ 0 none) bytes at p
// packed little-endian, zeros after them.
__device__ __forceinline__ unsigned bytes4(const int8_t* p, int n) {
    unsigned w = 0;
#pragma unroll
    for (int e = 0; e < 4; e++)
        if (e < n) w |= (unsigned)(uint8_t)p[e] << (8 * e);
    return w;
}

// RegLoader moves one operand's tile per stage through registers
// (qmatmul_mma_T, 256 threads): 128 rows x 64 bytes in chunks of CH = 16
// bytes (LOAD_V16) or 4 bytes (LOAD_W4, LOAD_B4), NCH chunks per thread.
// g is [D, K]; chunk i of thread tid is row d0 + tid/CPR + RPP·i, bytes
// CH·(tid%CPR).. of the tile's K. Bytes outside [0, D) x [0, K) read as
// zeros.
template <int MODE> struct RegLoader {
    static constexpr int CH = MODE == LOAD_V16 ? 16 : 4; // bytes per chunk
    static constexpr int CPR = BK / CH;                  // chunks per tile row
    static constexpr int RPP = MMA_THREADS / CPR;        // rows between a thread's chunks
    static constexpr int NCH = BM / RPP;                 // chunks per thread
    struct alignas(CH) Chunk {
        unsigned w[CH / 4];
    };

    const int8_t* p;   // chunk 0's source for the next tile
    long long rstride; // bytes between chunk i and chunk i+1 sources
    unsigned soff;     // chunk 0's byte offset in the operand region
    unsigned okmask;   // bit i: chunk i's row is inside
    int klim;          // bytes of K from chunk 0's first byte of tile 0 on
    Chunk v[NCH];

    __device__ __forceinline__ RegLoader(const int8_t* g, int D, int K, int d0, int tid) {
        const int r0 = tid / CPR, cc = (tid % CPR) * CH;
        p = g + (long long)(d0 + r0) * K + cc;
        rstride = (long long)RPP * K;
        soff = (unsigned)(r0 * LDK + cc);
        okmask = 0;
#pragma unroll
        for (int i = 0; i < NCH; i++) okmask |= (d0 + r0 + RPP * i < D ? 1u : 0u) << i;
        klim = K - cc;
    }

    // fetch loads the tile at k0 into registers and advances to the next.
    // Whole chunks (LOAD_V16, LOAD_W4) are entirely inside K or outside.
    __device__ __forceinline__ void fetch(int k0) {
#pragma unroll
        for (int i = 0; i < NCH; i++) {
            const bool row = (okmask >> i) & 1u;
            if (MODE == LOAD_B4) {
                v[i].w[0] = row ? bytes4(p + i * rstride, klim - k0) : 0u;
            } else if (row && k0 < klim) {
                v[i] = *reinterpret_cast<const Chunk*>(p + i * rstride);
            } else {
#pragma unroll
                for (int e = 0; e < CH / 4; e++) v[i].w[e] = 0u;
            }
        }
        p += BK;
    }

    // store writes the fetched tile to the operand region at s.
    __device__ __forceinline__ void store(unsigned char* s) const {
#pragma unroll
        for (int i = 0; i < NCH; i++) *reinterpret_cast<Chunk*>(s + soff + i * RPP * LDK) = v[i];
    }
};

// mma_main accumulates the block tile (bm, bn) for qmatmul_mma_T: two
// shared buffers, the next tile fetched into registers while the current
// one is multiplied.
template <int MODE>
__device__ __forceinline__ void mma_main(const int8_t* __restrict__ a, const int8_t* __restrict__ b, int M, int N,
                                         int K, int bm, int bn, unsigned char* smem, int wm0, int wn0,
                                         int (&acc)[4][4][4]) {
    const int tid = threadIdx.x, lane = tid & 31;
    const int kTiles = (K + BK - 1) / BK;
    if (kTiles == 0) return;
    const unsigned s0 = smem_u32(smem);
    RegLoader<MODE> la(a, M, K, bm, tid), lb(b, N, K, bn, tid);
    la.fetch(0);
    lb.fetch(0);
    la.store(smem);
    lb.store(smem + OP_BYTES);
    __syncthreads();
    int buf = 0;
    for (int kt = 0; kt < kTiles; kt++) {
        const bool more = kt + 1 < kTiles;
        if (more) { // in flight during the MMAs below
            la.fetch((kt + 1) * BK);
            lb.fetch((kt + 1) * BK);
        }
        stage_mma<4, 4>(s0 + buf * STAGE_BYTES, s0 + buf * STAGE_BYTES + OP_BYTES, wm0, wn0, lane, acc);
        // The other buffer was last read in the previous iteration, which
        // every thread finished before the barrier that ended it.
        if (more) {
            la.store(smem + (buf ^ 1) * STAGE_BYTES);
            lb.store(smem + (buf ^ 1) * STAGE_BYTES + OP_BYTES);
        }
        __syncthreads();
        buf ^= 1;
    }
}

// mma_gemm is qmatmul_mma_T: 8 warps in 2 x 4, each 64x32 (4 m16 x 4 n8
// tiles); the epilogue stages 64 rows at a time.
template <typename T>
__device__ __forceinline__ void mma_gemm(T* c, const int8_t* __restrict__ a, const int8_t* __restrict__ b,
                                         const Epi& ep, int M, int N, int K, int ldc) {
    extern __shared__ __align__(16) unsigned char qk_mma_smem[];
    int tm, tn;
    tile_coords(tm, tn);
    const int bm = tm * BM, bn = tn * BN;
    const int warp = threadIdx.x >> 5;
    const int wm0 = (warp >> 2) * 64, wn0 = (warp & 3) * 32;

    int acc[4][4][4];
#pragma unroll
    for (int i = 0; i < 4; i++)
#pragma unroll
        for (int j = 0; j < 4; j++)
#pragma unroll
            for (int e = 0; e < 4; e++) acc[i][j][e] = 0;

    switch (load_mode(a, b, K)) {
    case LOAD_V16: mma_main<LOAD_V16>(a, b, M, N, K, bm, bn, qk_mma_smem, wm0, wn0, acc); break;
    case LOAD_W4: mma_main<LOAD_W4>(a, b, M, N, K, bm, bn, qk_mma_smem, wm0, wn0, acc); break;
    default: mma_main<LOAD_B4>(a, b, M, N, K, bm, bn, qk_mma_smem, wm0, wn0, acc); break;
    }
    // mma_main ends with a barrier (or read no shared memory).
    store_tile<T, MMA_THREADS, 2, 4, 4, 4, 2>(c, reinterpret_cast<int*>(qk_mma_smem), acc, bm, bn, M, N, ldc, ep);
}

// ---------------------------------------------------------------------------
// qmatmul_gemv_T: M ≤ GEMV_ROWS.

constexpr int GEMV_ROWS = 8, GEMV_THREADS = 256;

__device__ __forceinline__ int warp_sum_int(int v) {
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}

// gemv_dot adds to acc[m] (m < M) the products of column n's row br of b
// with row m of a, this lane's share of K: chunks lane, lane+32, ... of 16
// bytes (LOAD_V16) or 4 (LOAD_W4, LOAD_B4).
template <int MODE>
__device__ __forceinline__ void gemv_dot(const int8_t* __restrict__ a, const int8_t* __restrict__ br, int M, int K,
                                         int lane, int (&acc)[GEMV_ROWS]) {
    if (MODE == LOAD_V16) {
#pragma unroll 2
        for (int k = lane * 16; k < K; k += 32 * 16) {
            const int4 bv = *reinterpret_cast<const int4*>(br + k);
#pragma unroll
            for (int m = 0; m < GEMV_ROWS; m++) {
                if (m < M) {
                    const int4 av = *reinterpret_cast<const int4*>(a + (long long)m * K + k);
                    acc[m] = __dp4a(av.x, bv.x, acc[m]);
                    acc[m] = __dp4a(av.y, bv.y, acc[m]);
                    acc[m] = __dp4a(av.z, bv.z, acc[m]);
                    acc[m] = __dp4a(av.w, bv.w, acc[m]);
                }
            }
        }
    } else if (MODE == LOAD_W4) {
#pragma unroll 4
        for (int k = lane * 4; k < K; k += 32 * 4) {
            const int bv = *reinterpret_cast<const int*>(br + k);
#pragma unroll
            for (int m = 0; m < GEMV_ROWS; m++)
                if (m < M) acc[m] = __dp4a(*reinterpret_cast<const int*>(a + (long long)m * K + k), bv, acc[m]);
        }
    } else {
        for (int k = lane * 4; k < K; k += 32 * 4) {
            const int bv = (int)bytes4(br + k, K - k);
#pragma unroll
            for (int m = 0; m < GEMV_ROWS; m++)
                if (m < M) acc[m] = __dp4a((int)bytes4(a + (long long)m * K + k, K - k), bv, acc[m]);
        }
    }
}

// gemv is qmatmul_gemv_T: warp w of block x computes column n = 8x + w
// (no grid-stride loop: nothing stays live across the epilogue's calls).
template <typename T>
__device__ __forceinline__ void gemv(T* c, const int8_t* __restrict__ a, const int8_t* __restrict__ b, const Epi& ep,
                                     int M, int N, int K, int ldc) {
    const int lane = threadIdx.x & 31;
    const long long n = (long long)blockIdx.x * (blockDim.x >> 5) + (threadIdx.x >> 5);
    if (n >= N) return; // whole warps
    int acc[GEMV_ROWS];
#pragma unroll
    for (int m = 0; m < GEMV_ROWS; m++) acc[m] = 0;
    const int8_t* br = b + n * K;
    switch (load_mode(a, b, K)) {
    case LOAD_V16: gemv_dot<LOAD_V16>(a, br, M, K, lane, acc); break;
    case LOAD_W4: gemv_dot<LOAD_W4>(a, br, M, K, lane, acc); break;
    default: gemv_dot<LOAD_B4>(a, br, M, K, lane, acc); break;
    }
    int mine = 0; // lane m < M stores row m
#pragma unroll
    for (int m = 0; m < GEMV_ROWS; m++) {
        const int s = warp_sum_int(acc[m]);
        if (m == lane) mine = s;
    }
    if (lane < M) {
        const float sb = ep.bscale != nullptr ? ep.bscale[ep.b_per_row ? n : 0] : 0.0f;
        const float bv = ep.bias != nullptr ? ep.bias[n] : 0.0f;
        const long long off = (long long)lane * ldc + n;
        Out<T>::put1(c + off, res_ptr<T>(ep, off), mine, row_scale(ep, lane), sb, bv, ep, out_scale(ep));
    }
}

} // namespace qk

// ---------------------------------------------------------------------------
// Entry points.

#define QUANT_DEFINE(SUF, T)                                                                                   \
    extern "C" __global__ void __launch_bounds__(256)                                                          \
        quantize_##SUF(int8_t* q, float* scale, const T* x, long long rows, int k, int per_row, int dynamic) { \
        qk::quantize_impl<T>(q, scale, x, rows, k, per_row, dynamic);                                          \
    }                                                                                                          \
    extern "C" __global__ void __launch_bounds__(256)                                                          \
        dequantize_##SUF(T* out, const int8_t* q, const float* scale, long long rows, int k, int per_row) {    \
        qk::dequantize_impl<T>(out, q, scale, rows, k, per_row);                                               \
    }

QUANT_DEFINE(f32, float)
QUANT_DEFINE(f16, __half)
QUANT_DEFINE(bf16, __nv_bfloat16)

// The residual may be c: neither is __restrict__.
#define QMM_PARAMS(T)                                                                                          \
    T *c, const int8_t *__restrict__ a, const int8_t *__restrict__ b, const float *__restrict__ ascale,        \
        const float *__restrict__ bscale, const float *__restrict__ bias, const float *__restrict__ out_scale, \
        const T *residual, int M, int N, int K, int ldc, int a_per_row, int b_per_row, int act
#define QMM_EPI {ascale, bscale, bias, out_scale, residual, a_per_row, b_per_row, act}

// qmatmul_tc_T: grid (ceil(N/128), ceil(M/128)), block 128, dynamic smem
// 81920 bytes; sm_80+, K % 16 == 0, a and b 16-byte aligned.
// qmatmul_mma_T: grid (ceil(N/128), ceil(M/128)), block 256, dynamic smem
// 40960 bytes; every target.
// qmatmul_gemv_T: M ≤ 8; grid ceil(N/8), block 256; every target.
#define QMM_DEFINE(SUF, T)                                                                             \
    extern "C" __global__ void __launch_bounds__(qk::TC_THREADS) qmatmul_tc_##SUF(QMM_PARAMS(T)) {     \
        qk::tc_gemm<T>(c, a, b, qk::Epi QMM_EPI, M, N, K, ldc);                                        \
    }                                                                                                  \
    extern "C" __global__ void __launch_bounds__(qk::MMA_THREADS) qmatmul_mma_##SUF(QMM_PARAMS(T)) {   \
        qk::mma_gemm<T>(c, a, b, qk::Epi QMM_EPI, M, N, K, ldc);                                       \
    }                                                                                                  \
    extern "C" __global__ void __launch_bounds__(qk::GEMV_THREADS) qmatmul_gemv_##SUF(QMM_PARAMS(T)) { \
        qk::gemv<T>(c, a, b, qk::Epi QMM_EPI, M, N, K, ldc);                                           \
    }

QMM_DEFINE(f32, float)
QMM_DEFINE(f16, __half)
QMM_DEFINE(bf16, __nv_bfloat16)
QMM_DEFINE(int8, int8_t)
QMM_DEFINE(i32, int)
