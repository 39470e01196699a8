// attention.cu: flash-attention forward (the FlashAttention-2 design on
// mma.sync tensor cores), the CUDA form of kernels/cpu/attention.go Attention:
//
//   out = softmax(scale·q·kᵀ + mask)·v
//
// q, out [B, Hq, Sq, D] and k, v [B, Hkv, Sk, D], all contiguous row-major, of
// one dtype (f16 or bf16), D = 64 or 128. Query head h reads KV head
// h / (Hq/Hkv). Masks: key j is hidden from query row i when j ≥ keylens[b]
// (keylens may be NULL) or, with causal ≠ 0, when j > i + (Sk − Sq) (aligned
// to the bottom right). A row that sees no key gives zeros, as the CPU does.
//
// Design (FlashAttention-2): one CTA of 4 warps per (128 query rows, query
// head, batch entry); each warp owns 32 query rows (two 16-row mma tiles). The
// CTA walks the 64-key tiles of K and V that any of its rows can see (tiles
// wholly past the causal diagonal or past keylens[b] are skipped), K and V
// double-buffered in shared memory by cp.async (the next tile loads while
// this one is used). Per tile: S = Q·Kᵀ with
// mma.m16n8k16 (f32 accumulate; K fragments by ldmatrix), the online softmax
// in float32 (scores prescaled by scale·log2(e), exp2, running row max and
// row sum, the output accumulator rescaled by exp2(m_old − m_new)), P rounded
// to the input dtype, O += P·V with mma (V fragments by ldmatrix.trans). At
// the end O is divided by the row sum and rounded once. Q stays in registers
// for D=64; for D=128 it stays in shared memory and is re-read by ldmatrix
// each tile (as FlashAttention-2 does for this size: Q, S and O would not fit
// in 255 registers together with 32 rows per warp).
//
// Shared memory rows are 16-byte chunks XOR-swizzled by (row & 7), so cp.async
// stores and ldmatrix loads are free of bank conflicts.
//
// Needs sm_80 (bf16 mma, cp.async); older targets get __trap() bodies.

#include "common.cuh"
#include "sm80.cuh"

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <stdint.h>

#define ATTN_THREADS 128 // 4 warps
#define ATTN_BM 128      // query rows per CTA
#define ATTN_LOG2E 1.4426950408889634f

// Per head-dim configuration: BN keys per K/V tile, Q kept in registers
// (QREG) or re-read from shared memory each tile. Both compile to no spills
// under 255 registers (FlashAttention-2's own d64 tile, BN = 128 with Q in
// shared memory, spills here on sm_80).
template <int D> struct AttnCfg;
template <> struct AttnCfg<64> {
    static constexpr int BN = 64;
    static constexpr bool QREG = true;
};
template <> struct AttnCfg<128> {
    static constexpr int BN = 64;
    static constexpr bool QREG = false;
};

// Dynamic shared memory in bytes: Q tile [128][D] + K and V [2][BN][D], 2-byte
// elements. D=64: 49152, D=128: 98304.
template <int D> constexpr int attn_smem_bytes() {
    return (ATTN_BM * D + 4 * AttnCfg<D>::BN * D) * 2;
}
static_assert(attn_smem_bytes<64>() == 49152 && attn_smem_bytes<128>() == 98304,
              "launch comment below states these sizes");

// ---------------------------------------------------------------------------
// Local helper (only compiled for __CUDA_ARCH__ >= 800, where attn_fwd runs).
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800

// 2^x (MUFU.EX2); 2^-inf = +0.
static __device__ __forceinline__ float attn_exp2(float x) {
    float y;
    asm("ex2.approx.ftz.f32 %0, %1;\n" : "=f"(y) : "f"(x));
    return y;
}

#endif // __CUDA_ARCH__ >= 800

// Element offset of 16-byte chunk c of row r in a swizzled [rows][D] tile.
template <int D> static __device__ __forceinline__ int attn_swz(int r, int c) {
    return r * D + ((c ^ (r & 7)) << 3);
}

// ---------------------------------------------------------------------------

template <typename T, int D>
static __device__ __forceinline__ void attn_fwd(T* __restrict__ out, const T* __restrict__ q,
                                                const T* __restrict__ k, const T* __restrict__ v,
                                                int B, int Hq, int Hkv, int Sq, int Sk, float scale,
                                                int causal, const int* __restrict__ keylens) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    constexpr int BM = ATTN_BM;
    constexpr int BN = AttnCfg<D>::BN;
    constexpr bool QREG = AttnCfg<D>::QREG;
    constexpr int MT = BM / (16 * (ATTN_THREADS / 32)); // 16-row mma tiles per warp (2)
    constexpr int KD = D / 16;                          // k-steps of Q·Kᵀ
    constexpr int NS = BN / 8;                          // 8-key n-blocks of S
    constexpr int KN = BN / 16;                         // k-steps of P·V
    constexpr int ND = D / 8; // 8-column n-blocks of O = 16-byte chunks per row
    static_assert(MT == 2, "4 warps x 32 rows");
    static_assert((BM * ND) % ATTN_THREADS == 0 && (BN * ND) % ATTN_THREADS == 0, "tile loads");

    extern __shared__ __align__(128) unsigned char attn_smem[];
    T* sQ = reinterpret_cast<T*>(attn_smem); // [BM][D]
    T* sK = sQ + BM * D;                     // [2][BN][D]
    T* sV = sK + 2 * BN * D;                 // [2][BN][D]

    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    // Heaviest (causal) row blocks first.
    const int m0 = ((int)gridDim.x - 1 - (int)blockIdx.x) * BM;
    const int h = blockIdx.y, b = blockIdx.z;
    if (m0 >= Sq) return;
    const int hk = h / (Hq / Hkv);
    if (scale == 0.0f) scale = 1.0f / sqrtf((float)D);
    (void)B;

    // Keys visible to row i: [0, min(kv_limit, causal ? i + diag + 1 : Sk)).
    int kv_limit = Sk;
    if (keylens != nullptr) kv_limit = min(max(keylens[b], 0), Sk);
    const int diag = Sk - Sq;
    const int rows = min(BM, Sq - m0);
    // Keys any row of this CTA sees: the last row sees the most.
    int kv_end = kv_limit;
    if (causal) kv_end = min(kv_end, m0 + rows + diag);

    const long long qoff = ((long long)b * Hq + h) * (long long)Sq * D;
    const long long kvoff = ((long long)b * Hkv + hk) * (long long)Sk * D;
    const T* qg = q + qoff;
    T* og = out + qoff;
    const T* kg = k + kvoff;
    const T* vg = v + kvoff;

    if (kv_end <= 0) { // every row fully masked: zeros
        const uint4 z = make_uint4(0u, 0u, 0u, 0u);
        for (int i = tid; i < rows * ND; i += ATTN_THREADS) {
            const int r = i / ND, c = i % ND;
            *reinterpret_cast<uint4*>(og + (long long)(m0 + r) * D + c * 8) = z;
        }
        return;
    }
    const int ntiles = (kv_end + BN - 1) / BN;

    const uint32_t sQa = smem_u32(sQ), sKa = smem_u32(sK), sVa = smem_u32(sV);

    // Tile loads: 16-byte chunk lc of rows lr + i·RPP. RPP is a multiple of 8,
    // so every row a thread loads has the same swizzle (row & 7).
    constexpr int RPP = ATTN_THREADS / ND; // rows per pass: 16 (D=64), 8 (D=128)
    static_assert(RPP % 8 == 0, "swizzle");
    const int lr = tid / ND, lc = tid % ND;
    const uint32_t lso = 2 * attn_swz<D>(lr, lc); // byte offset in a tile

    // Q tile, rows ≥ Sq zero-filled.
#pragma unroll
    for (int i = 0; i < BM / RPP; ++i) {
        const int row = m0 + lr + i * RPP; // source row clamped to Sq − 1 ≥ 0 when out
        const long long go = (long long)min(row, Sq - 1) * D + lc * 8;
        cp_async16(sQa + lso + i * (RPP * D * 2), qg + go, row < Sq);
    }
    cp_async_commit();

    // K and V tile t into buffer buf, keys ≥ kv_end zero-filled (their
    // source row is clamped to kv_end − 1 ≥ 0, a valid address not read).
    auto load_kv = [&](int t, int buf) {
        const int row0 = t * BN + lr;
        const uint32_t so = lso + buf * (BN * D * 2);
#pragma unroll
        for (int i = 0; i < BN / RPP; ++i) {
            const int row = row0 + i * RPP;
            const long long go = (long long)min(row, kv_end - 1) * D + lc * 8;
            cp_async16(sKa + so + i * (RPP * D * 2), kg + go, row < kv_end);
            cp_async16(sVa + so + i * (RPP * D * 2), vg + go, row < kv_end);
        }
    };
    load_kv(0, 0);
    cp_async_commit();

    // Per-lane ldmatrix geometry (x4: lanes 8i..8i+7 give the row addresses
    // of 8x8 matrix i, which lands in register i; lane l receives row l/4,
    // elements 2(l%4), 2(l%4)+1 of each matrix, or with .trans the transpose).
    //  Q and V: lane reads row (lane & 7) + 8·((lane >> 3) & 1) of a 16-row
    //    block, 16-byte chunk 2c + (lane >> 4) of a 16-column block, so matrix
    //    0 is (rows 0-7, cols 0-7), 1 (rows 8-15, cols 0-7), 2 (rows 0-7,
    //    cols 8-15), 3 (rows 8-15, cols 8-15).
    //    Q (A of S, rows = query rows, cols = k): a0..a3 of m16n8k16 exactly.
    //    V (B of O via .trans, rows = keys k0.., cols = d n0..): r0 = b0 and
    //      r1 = b1 of columns n0..n0+7, r2 = b0 and r3 = b1 of n0+8..n0+15.
    //  K (B of S, rows = keys n0.., cols = k; col-major B = K row-major):
    //    lane reads key (lane & 7) + 8·(lane >> 4), chunk 2c + ((lane >> 3) & 1),
    //    so r0 = b0 and r1 = b1 of keys n0..n0+7, r2 = b0 and r3 = b1 of keys
    //    n0+8..n0+15 (register pairs as mma takes them).
    // The lane's row ≡ lane (mod 8), so its swizzle key is x = lane & 7, and
    // chunk (2c + hi) ^ x = 8·(c >> 2) + ((2·(c & 3) + hi) ^ x) as x < 8:
    // four byte offsets lo[c & 3] plus immediates address every Q and V
    // block. K's offsets differ from them by one per-lane constant kd: its
    // row is ±8 off and its chunk (2c + khi) ^ x = ((2c + hi) ^ x) ^ (hi ^ khi)
    // flips bit 0 by the same amount for every c.
    uint32_t lo[4], kd;
    {
        const int x = lane & 7;
        const int row = (lane & 7) + (((lane >> 3) & 1) << 3), hi = lane >> 4;
        const int krow = (lane & 7) + ((lane >> 4) << 3), khi = (lane >> 3) & 1;
#pragma unroll
        for (int c = 0; c < 4; ++c) lo[c] = 2 * (row * D + (((2 * c + hi) ^ x) << 3));
        kd = 2 * (krow * D + ((khi ^ x) << 3)) - lo[0]; // (mod 2^32)
    }
    const uint32_t sQw = sQa + warp * (MT * 16 * D * 2); // this warp's Q rows

    // Accumulator rows of this lane: g and g + 8 of each 16-row tile.
    const int g = lane >> 2, tq = lane & 3;
    const int row_l = m0 + warp * (MT * 16) + g; // first of this lane's rows
    // Row r sees keys [0, min(kv_end, cl0 + r − m0)), cl0 being the causal
    // limit of the CTA's first row m0 (kv_end when not causal: r ≥ m0 never
    // binds then). lim_l is that bound for this lane's first row.
    const int cl0 = causal ? m0 + diag + 1 : kv_end;
    const int lim_l = cl0 + (row_l - m0);
    // Output: this lane's first element, and how many of its rows exist.
    T* const o_lane = og + (long long)row_l * D + 2 * tq;
    const int rows_l = Sq - row_l;
    // Row m0 sees the fewest keys: tiles ending at or before lim_min need no
    // mask (uniform over the CTA).
    const int lim_min = min(kv_end, cl0);
    const float sl2 = scale * ATTN_LOG2E;

    float o[MT][ND][4];
    float m_run[MT][2], l_run[MT][2];
#pragma unroll
    for (int mt = 0; mt < MT; ++mt) {
#pragma unroll
        for (int j = 0; j < ND; ++j)
#pragma unroll
            for (int e = 0; e < 4; ++e) o[mt][j][e] = 0.0f;
        m_run[mt][0] = m_run[mt][1] = -INFINITY;
        l_run[mt][0] = l_run[mt][1] = 0.0f;
    }

    uint32_t qf[QREG ? MT : 1][QREG ? KD : 1][4];
    if constexpr (QREG) {
        cp_async_wait<1>(); // Q landed (K/V tile 0 may still be in flight)
        __syncthreads();
#pragma unroll
        for (int mt = 0; mt < MT; ++mt)
#pragma unroll
            for (int kk = 0; kk < KD; ++kk)
                ldsm_x4(qf[mt][kk], sQw + lo[kk & 3] + mt * (16 * D * 2) + (kk >> 2) * 128);
    }

#pragma unroll 1
    for (int t = 0; t < ntiles; ++t) {
        // Tile t (and Q) landed for every thread; every warp is done with
        // tile t−1, so its buffer may be refilled with tile t+1.
        cp_async_wait<0>();
        __syncthreads();
        if (t + 1 < ntiles) {
            load_kv(t + 1, (t + 1) & 1);
            cp_async_commit();
        }
        const uint32_t cK = sKa + (t & 1) * (BN * D * 2) + kd;
        const uint32_t cV = sVa + (t & 1) * (BN * D * 2);

        // S = Q·Kᵀ (raw scores, f32).
        float s[MT][NS][4];
#pragma unroll
        for (int mt = 0; mt < MT; ++mt)
#pragma unroll
            for (int j = 0; j < NS; ++j)
#pragma unroll
                for (int e = 0; e < 4; ++e) s[mt][j][e] = 0.0f;
#pragma unroll
        for (int kk = 0; kk < KD; ++kk) {
            uint32_t a[MT][4];
#pragma unroll
            for (int mt = 0; mt < MT; ++mt) {
                if constexpr (QREG) {
#pragma unroll
                    for (int e = 0; e < 4; ++e) a[mt][e] = qf[mt][kk][e];
                } else {
                    ldsm_x4(a[mt], sQw + lo[kk & 3] + mt * (16 * D * 2) + (kk >> 2) * 128);
                }
            }
#pragma unroll
            for (int jj = 0; jj < BN / 16; ++jj) {
                uint32_t bk[4];
                ldsm_x4(bk, cK + lo[kk & 3] + jj * (16 * D * 2) + (kk >> 2) * 128);
#pragma unroll
                for (int mt = 0; mt < MT; ++mt) {
                    mma16816(s[mt][2 * jj], a[mt], bk[0], bk[1], T());
                    mma16816(s[mt][2 * jj + 1], a[mt], bk[2], bk[3], T());
                }
            }
        }

        // Scores in log2 units; masked ones −inf. Element e of n-block j is
        // row g + 8·(e >> 1), key key0 + 8j + 2·tq + (e & 1).
        const int key0 = t * BN;
#pragma unroll
        for (int mt = 0; mt < MT; ++mt)
#pragma unroll
            for (int j = 0; j < NS; ++j)
#pragma unroll
                for (int e = 0; e < 4; ++e) s[mt][j][e] *= sl2;
        if (key0 + BN > lim_min) {
#pragma unroll
            for (int mt = 0; mt < MT; ++mt)
#pragma unroll
                for (int j = 0; j < NS; ++j)
#pragma unroll
                    for (int e = 0; e < 4; ++e) {
                        const int lim = min(kv_end, lim_l + mt * 16 + (e >> 1) * 8);
                        const int col = key0 + j * 8 + 2 * tq + (e & 1);
                        if (col >= lim) s[mt][j][e] = -INFINITY;
                    }
        }

        // Online softmax. The four lanes of a quad (lane ^ 1, lane ^ 2) hold
        // the same rows; each keeps a partial row sum, reduced at the end.
#pragma unroll
        for (int mt = 0; mt < MT; ++mt)
#pragma unroll
            for (int hh = 0; hh < 2; ++hh) {
                float mx = m_run[mt][hh];
#pragma unroll
                for (int j = 0; j < NS; ++j)
                    mx = fmaxf(mx, fmaxf(s[mt][j][2 * hh], s[mt][j][2 * hh + 1]));
                mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
                mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
                // A row with no visible key so far keeps max −inf; subtract 0
                // then, so exp2(−inf − 0) = 0 and nothing becomes NaN.
                const float ms = mx == -INFINITY ? 0.0f : mx;
                const float alpha = attn_exp2(m_run[mt][hh] - ms); // 0 when m_run = −inf
                m_run[mt][hh] = mx;
                float ls = l_run[mt][hh] * alpha;
#pragma unroll
                for (int j = 0; j < ND; ++j) {
                    o[mt][j][2 * hh] *= alpha;
                    o[mt][j][2 * hh + 1] *= alpha;
                }
#pragma unroll
                for (int j = 0; j < NS; ++j) {
                    const float p0 = attn_exp2(s[mt][j][2 * hh] - ms);
                    const float p1 = attn_exp2(s[mt][j][2 * hh + 1] - ms);
                    s[mt][j][2 * hh] = p0;
                    s[mt][j][2 * hh + 1] = p1;
                    ls += p0 + p1;
                }
                l_run[mt][hh] = ls;
            }

        // O += P·V, P rounded to T. The A fragment of key step kn is the C
        // fragments of n-blocks 2kn (keys 0-7) and 2kn+1 (keys 8-15).
#pragma unroll
        for (int kn = 0; kn < KN; ++kn) {
            uint32_t pa[MT][4];
#pragma unroll
            for (int mt = 0; mt < MT; ++mt) {
                pa[mt][0] = pack2(s[mt][2 * kn][0], s[mt][2 * kn][1], T());
                pa[mt][1] = pack2(s[mt][2 * kn][2], s[mt][2 * kn][3], T());
                pa[mt][2] = pack2(s[mt][2 * kn + 1][0], s[mt][2 * kn + 1][1], T());
                pa[mt][3] = pack2(s[mt][2 * kn + 1][2], s[mt][2 * kn + 1][3], T());
            }
#pragma unroll
            for (int jj = 0; jj < D / 16; ++jj) {
                uint32_t bv[4];
                ldsm_x4_trans(bv, cV + lo[jj & 3] + kn * (16 * D * 2) + (jj >> 2) * 128);
#pragma unroll
                for (int mt = 0; mt < MT; ++mt) {
                    mma16816(o[mt][2 * jj], pa[mt], bv[0], bv[1], T());
                    mma16816(o[mt][2 * jj + 1], pa[mt], bv[2], bv[3], T());
                }
            }
        }
    }

    // out = O / rowsum, rounded once; a row that saw no key has sum 0 → zeros.
#pragma unroll
    for (int mt = 0; mt < MT; ++mt)
#pragma unroll
        for (int hh = 0; hh < 2; ++hh) {
            float l = l_run[mt][hh];
            l += __shfl_xor_sync(0xffffffffu, l, 1);
            l += __shfl_xor_sync(0xffffffffu, l, 2);
            const float inv = l > 0.0f ? 1.0f / l : 0.0f;
            if (mt * 16 + hh * 8 < rows_l) { // row row_l + 16mt + 8hh < Sq
                T* dst = o_lane + (mt * 16 + hh * 8) * D;
#pragma unroll
                for (int j = 0; j < ND; ++j)
                    *reinterpret_cast<uint32_t*>(dst + j * 8) =
                        pack2(o[mt][j][2 * hh] * inv, o[mt][j][2 * hh + 1] * inv, T());
            }
        }
#else
    __trap();
#endif
}

// ---------------------------------------------------------------------------
// Kernels. Launch configuration (all four):
//   grid  = (ceil(Sq / 128), Hq, B)   (gridDim.y ≤ 65535, gridDim.z ≤ 65535;
//                                      do not launch when B·Hq·Sq = 0)
//   block = (128, 1, 1)
//   dynamic shared bytes (independent of the arguments): d64 → 49152,
//     d128 → 98304. Set CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES to that
//     value on each function once before launching it: d128 is over 48 KB,
//     and the sm_90a image also holds 1 KB of static (reserved) shared
//     memory, so even d64's 48 KB exceeds the default limit there.
//   Occupancy: 2 CTAs per SM on A100/H100 (≤ 255 registers, 128 threads).
// Preconditions: q, k, v, out 16-byte aligned (cp.async and 16-byte stores);
//   Hkv ≥ 1 and Hq a multiple of Hkv; keylens NULL or int[B] (values are
//   clamped to [0, Sk]); out does not overlap q, k, v. scale 0 means
//   1/sqrt(D) (as AttentionParams.Scale). Needs compute capability ≥ 8.0.

#define ATTN_KERNEL(NAME, T, D)                                                                \
    extern "C" __global__ void __launch_bounds__(ATTN_THREADS, 2)                              \
        NAME(T* out, const T* q, const T* k, const T* v, int B, int Hq, int Hkv, int Sq, int Sk, \
             float scale, int causal, const int* keylens) {                                    \
        attn_fwd<T, D>(out, q, k, v, B, Hq, Hkv, Sq, Sk, scale, causal, keylens);              \
    }

ATTN_KERNEL(flash_attn_fwd_f16_d64, __half, 64)
ATTN_KERNEL(flash_attn_fwd_f16_d128, __half, 128)
ATTN_KERNEL(flash_attn_fwd_bf16_d64, __nv_bfloat16, 64)
ATTN_KERNEL(flash_attn_fwd_bf16_d128, __nv_bfloat16, 128)
