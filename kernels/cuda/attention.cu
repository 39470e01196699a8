// attention.cu: flash-attention forward (the FlashAttention-2 design on
// mma.sync tensor cores), the CUDA form of kernels/cpu/attention.go Attention:
//
//   out = softmax(scale·q·kᵀ + mask)·v
//
// q, out [B, Hq, Sq, D] and k, v [B, Hkv, Sk, D] of one dtype (f16 or bf16),
// D = 64 or 128, each row of D contiguous and rows, heads and batch entries
// at the strides AttnStrides gives (contiguous tensors, or a packed
// projection's heads read in place). Query head h reads KV head
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
#include "sm90.cuh"

#include <cuda.h>
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

// The per-lane steps of a tile of scores, shared by the mma.sync and the
// wgmma kernels, whose accumulators have the same layout: in a 16-row
// slice of the tile, n-block j (8 keys) of a lane holds s[j][e], row
// g + 8·(e >> 1) and key 8j + 2·tq + (e & 1) (g = lane / 4, tq = lane % 4),
// so the four lanes of a quad (lane ^ 1, lane ^ 2) hold the same two rows.

// attn_scores scales the raw scores s of keys from key0 to log2 units (sl2
// = scale·log2(e)) and, when mask is set, hides with −inf the keys at or past
// each row's limit: min(kv_end, lim) for the lane's first row, min(kv_end,
// lim + 8) for its second (lim grows by one a row under a causal mask and
// is at least kv_end otherwise).
template <int NS>
static __device__ __forceinline__ void attn_scores(float (&s)[NS][4], float sl2, bool mask, int key0, int lim,
                                                   int kv_end, int tq) {
#pragma unroll
    for (int j = 0; j < NS; ++j)
#pragma unroll
        for (int e = 0; e < 4; ++e) s[j][e] *= sl2;
    if (mask) {
#pragma unroll
        for (int j = 0; j < NS; ++j)
#pragma unroll
            for (int e = 0; e < 4; ++e) {
                const int l = min(kv_end, lim + (e >> 1) * 8);
                if (key0 + j * 8 + 2 * tq + (e & 1) >= l) s[j][e] = -INFINITY;
            }
    }
}

// attn_softmax is the online softmax of a tile: it raises the running row
// maxima m to the tile's, turns s into exp2(s − m), sets alpha to the factor
// by which earlier sums and outputs shrink, and updates the running sums l
// (each lane's share of its rows; attn_store adds the quad's up).
template <int NS>
static __device__ __forceinline__ void attn_softmax(float (&s)[NS][4], float (&m)[2], float (&l)[2],
                                                    float (&alpha)[2]) {
#pragma unroll
    for (int hh = 0; hh < 2; ++hh) {
        float mx = m[hh];
#pragma unroll
        for (int j = 0; j < NS; ++j) mx = fmaxf(mx, fmaxf(s[j][2 * hh], s[j][2 * hh + 1]));
        mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
        mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
        // A row with no visible key so far keeps max −inf; subtract 0
        // then, so exp2(−inf − 0) = 0 and nothing becomes NaN.
        const float ms = mx == -INFINITY ? 0.0f : mx;
        alpha[hh] = attn_exp2(m[hh] - ms); // 0 when m = −inf
        m[hh] = mx;
        float ls = l[hh] * alpha[hh];
#pragma unroll
        for (int j = 0; j < NS; ++j) {
            const float p0 = attn_exp2(s[j][2 * hh] - ms);
            const float p1 = attn_exp2(s[j][2 * hh + 1] - ms);
            s[j][2 * hh] = p0;
            s[j][2 * hh + 1] = p1;
            ls += p0 + p1;
        }
        l[hh] = ls;
    }
}

// attn_rescale multiplies the output accumulators o of the lane's two rows
// by alpha.
template <int ND> static __device__ __forceinline__ void attn_rescale(float (&o)[ND][4], const float (&alpha)[2]) {
#pragma unroll
    for (int j = 0; j < ND; ++j) {
        o[j][0] *= alpha[0];
        o[j][1] *= alpha[0];
        o[j][2] *= alpha[1];
        o[j][3] *= alpha[1];
    }
}

// attn_p_frag sets a to the A fragment (m16k16, rounded to T) of keys
// 16kn … 16kn + 15 of the probabilities p: the C fragments of n-blocks 2kn
// (keys 0-7) and 2kn + 1 (keys 8-15).
template <typename T, int NS>
static __device__ __forceinline__ void attn_p_frag(const float (&p)[NS][4], int kn, uint32_t (&a)[4]) {
    a[0] = pack2(p[2 * kn][0], p[2 * kn][1], T());
    a[1] = pack2(p[2 * kn][2], p[2 * kn][3], T());
    a[2] = pack2(p[2 * kn + 1][0], p[2 * kn + 1][1], T());
    a[3] = pack2(p[2 * kn + 1][2], p[2 * kn + 1][3], T());
}

// attn_store writes the lane's two rows of out = o / rowsum, rounded once,
// from o_lane (its first row, column 2·tq; the second row is 8 rows of
// rs elements down), rows_l being how many rows from the first exist; a
// row that saw no key has sum 0 and gives zeros.
template <typename T, int ND>
static __device__ __forceinline__ void attn_store(const float (&o)[ND][4], const float (&l)[2], T* o_lane,
                                                  int rows_l, long long rs) {
#pragma unroll
    for (int hh = 0; hh < 2; ++hh) {
        float sum = l[hh];
        sum += __shfl_xor_sync(0xffffffffu, sum, 1);
        sum += __shfl_xor_sync(0xffffffffu, sum, 2);
        const float inv = sum > 0.0f ? 1.0f / sum : 0.0f;
        if (hh * 8 < rows_l) {
            T* dst = o_lane + hh * 8 * rs;
#pragma unroll
            for (int j = 0; j < ND; ++j)
                *reinterpret_cast<uint32_t*>(dst + j * 8) = pack2(o[j][2 * hh] * inv, o[j][2 * hh + 1] * inv, T());
        }
    }
}

// attn_kv_limit is how many keys batch entry b's rows may see at most:
// keylens[b] clamped to [0, Sk], or Sk without keylens. The first CTA of
// each batch entry reports a length outside [0, Sk] in lens_err, so that
// the kernels need no check of their own launched before them.
static __device__ __forceinline__ int attn_kv_limit(const int* keylens, int* lens_err, int b, int Sk) {
    if (keylens == nullptr) return Sk;
    const int x = keylens[b];
    if ((x < 0 || x > Sk) && threadIdx.x == 0 && blockIdx.x == 0 && blockIdx.y == 0) flag_value(lens_err, x, b);
    return min(max(x, 0), Sk);
}

#endif // __CUDA_ARCH__ >= 800

// Element offset of 16-byte chunk c of row r in a swizzled [rows][D] tile.
template <int D> static __device__ __forceinline__ int attn_swz(int r, int c) {
    return r * D + ((c ^ (r & 7)) << 3);
}

// AttnStrides are the elements between consecutive rows (positions), heads
// and batch entries of q, of k and v, and of out: {D, S·D, H·S·D} for
// [B, H, S, D] tensors; for a packed projection [B, S, Hq+2·Hkv, D]
// (AttentionPacked) q, k and v are {(Hq+2·Hkv)·D, D, S·(Hq+2·Hkv)·D} from
// their first heads, and out [B, S, Hq, D] is {Hq·D, D, S·Hq·D}.
struct AttnStrides {
    long long q_row, q_head, q_batch, kv_row, kv_head, kv_batch, o_row, o_head, o_batch;
};
// ATTN_STRIDE_PARAMS are the kernels' parameters that ATTN_STRIDES gathers.
#define ATTN_STRIDE_PARAMS                                                                                    \
    long long q_row, long long q_head, long long q_batch, long long kv_row, long long kv_head, long long kv_batch, \
        long long o_row, long long o_head, long long o_batch
#define ATTN_STRIDES AttnStrides{q_row, q_head, q_batch, kv_row, kv_head, kv_batch, o_row, o_head, o_batch}

// ---------------------------------------------------------------------------

template <typename T, int D>
static __device__ __forceinline__ void attn_fwd(T* __restrict__ out, const T* __restrict__ q,
                                                const T* __restrict__ k, const T* __restrict__ v, AttnStrides st,
                                                int Hq, int Hkv, int Sq, int Sk, float scale,
                                                int causal, const int* __restrict__ keylens, int* lens_err) {
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

    // Keys visible to row i: [0, min(kv_limit, causal ? i + diag + 1 : Sk)).
    const int kv_limit = attn_kv_limit(keylens, lens_err, b, Sk);
    const int diag = Sk - Sq;
    const int rows = min(BM, Sq - m0);
    // Keys any row of this CTA sees: the last row sees the most.
    int kv_end = kv_limit;
    if (causal) kv_end = min(kv_end, m0 + rows + diag);

    const T* qg = q + b * st.q_batch + h * st.q_head;
    T* og = out + b * st.o_batch + h * st.o_head;
    const long long kvoff = b * st.kv_batch + hk * st.kv_head;
    const T* kg = k + kvoff;
    const T* vg = v + kvoff;

    if (kv_end <= 0) { // every row fully masked: zeros
        const uint4 z = make_uint4(0u, 0u, 0u, 0u);
        for (int i = tid; i < rows * ND; i += ATTN_THREADS) {
            const int r = i / ND, c = i % ND;
            *reinterpret_cast<uint4*>(og + (m0 + r) * st.o_row + c * 8) = z;
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
        const long long go = min(row, Sq - 1) * st.q_row + lc * 8;
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
            const long long go = min(row, kv_end - 1) * st.kv_row + lc * 8;
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
    T* const o_lane = og + row_l * st.o_row + 2 * tq;
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

        // Scores in log2 units, masked ones −inf; the online softmax.
        const int key0 = t * BN;
#pragma unroll
        for (int mt = 0; mt < MT; ++mt) {
            float alpha[2];
            attn_scores(s[mt], sl2, key0 + BN > lim_min, key0, lim_l + mt * 16, kv_end, tq);
            attn_softmax(s[mt], m_run[mt], l_run[mt], alpha);
            attn_rescale(o[mt], alpha);
        }

        // O += P·V, P rounded to T. The A fragment of key step kn is the C
        // fragments of n-blocks 2kn (keys 0-7) and 2kn+1 (keys 8-15).
#pragma unroll
        for (int kn = 0; kn < KN; ++kn) {
            uint32_t pa[MT][4];
#pragma unroll
            for (int mt = 0; mt < MT; ++mt) attn_p_frag<T>(s[mt], kn, pa[mt]);
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

    // out = O / rowsum.
#pragma unroll
    for (int mt = 0; mt < MT; ++mt)
        attn_store<T>(o[mt], l_run[mt], o_lane + mt * 16 * st.o_row, rows_l - mt * 16, st.o_row);
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
// Parameters: out, q, k, v; the strides (ATTN_STRIDE_PARAMS); Hq, Hkv, Sq,
//   Sk; scale; causal; keylens; lens_err, the error record where a length
//   outside [0, Sk] is reported (NULL with keylens NULL). The batch size is
//   the grid's.
// Preconditions: q, k, v, out 16-byte aligned (cp.async and 16-byte stores)
//   and every stride a multiple of 8 elements;
//   Hkv ≥ 1 and Hq a multiple of Hkv; keylens NULL or int[B] (values are
//   clamped to [0, Sk]); out does not overlap q, k, v. scale 0 means
//   1/sqrt(D) (as AttentionParams.Scale). Needs compute capability ≥ 8.0.

#define ATTN_KERNEL(NAME, T, D)                                                                         \
    extern "C" __global__ void __launch_bounds__(ATTN_THREADS, 2)                                       \
        NAME(T* out, const T* q, const T* k, const T* v, ATTN_STRIDE_PARAMS, int Hq, int Hkv, int Sq,   \
             int Sk, float scale, int causal, const int* keylens, int* lens_err) {                      \
        attn_fwd<T, D>(out, q, k, v, ATTN_STRIDES, Hq, Hkv, Sq, Sk, scale, causal, keylens, lens_err);  \
    }

ATTN_KERNEL(flash_attn_fwd_f16_d64, __half, 64)
ATTN_KERNEL(flash_attn_fwd_f16_d128, __half, 128)
ATTN_KERNEL(flash_attn_fwd_bf16_d64, __nv_bfloat16, 64)
ATTN_KERNEL(flash_attn_fwd_bf16_d128, __nv_bfloat16, 128)

// ---------------------------------------------------------------------------
// Hopper (sm_90a): the same attention with wgmma and TMA, in the structure of
// FlashAttention-3. One CTA of three warpgroups per (128 query rows, query
// head, batch entry):
//   warpgroup 0  producer (setmaxnreg.dec to 24): one thread loads the CTA's
//                Q tile once and then K and V tiles of 128 keys into a ring of
//                STAGES stages (full and empty mbarriers, sm90_pipeline_init),
//                all by TMA with the 128-byte swizzle;
//   warpgroups 1, 2  consumers (setmaxnreg.inc to 240): consumer c owns query
//                rows [64c, 64c + 64) of the tile. S = Q·Kᵀ is wgmma
//                m64n128k16 from shared memory (Q and K both K-major); P stays
//                in registers as wgmma's A fragments and O += P·V is wgmma
//                m64nDk16 with A from registers and V N-major (imm-trans-b 1).
//                The scores of tile t are computed while P·V of tile t − 1
//                runs: both groups are issued, the consumer waits for the
//                first, runs the online softmax on it, then waits for the
//                second before rescaling O, and gives tile t − 1's stage back.
// The two consumers interleave on the tensor cores by themselves: while one
// runs its softmax, the other's wgmma runs. Masks, the online softmax and
// the output rounding are the mma.sync kernel's (attn_scores, attn_softmax,
// attn_store).
//
// Shared memory (dynamic, base rounded up to 1024 bytes for the swizzle):
//   Q: D/64 panels of 128 rows × 128 bytes (64 elements of d), panel p at
//      16 KiB·p; consumer c's rows start 8 KiB into each panel. As wgmma A
//      (K-major): SBO 1024 (8 rows), the k-th 16-wide slice at
//      16 KiB·(k / 4) + 32·(k % 4).
//   stage s: K then V, each D/64 panels of 128 keys × 128 bytes at 16 KiB·p.
//      K as B of S (K-major, N = keys): as Q. V as B of O (N-major, K =
//      keys): LBO 16 KiB (next 64 columns of d), SBO 1024 (next 8 keys), the
//      kn-th 16-key slice at 2048·kn.
//   then one mbarrier for Q, STAGES full and STAGES empty ones.
// Tensor maps (kernels/cuda/attention.go; 4-D, innermost first, 128B
// swizzle, zeros outside): q {D, Sq, Hq, B}, k and v {D, Sk, Hkv, B}, their
// byte strides those of AttnStrides (rows, heads, batch entries), box
// {64, 128, 1, 1}. The head and the batch entry are outer dimensions, so a
// tile never reads past its head's rows: rows past Sq or Sk read zeros.
// out is written at AttnStrides' o_row, o_head and o_batch.

#define FA90_BM 128 // query rows per CTA
#define FA90_BN 128 // keys per K/V tile
#define FA90_THREADS 384
#define FA90_PANEL 16384 // one 128-row × 128-byte box

// fa90_stages is the depth of the K/V ring by head dimension: as deep as
// 227 KiB of shared memory allows (a stage is 32 KiB at d64, 64 KiB at d128).
template <int D> __host__ __device__ constexpr int fa90_stages() { return D == 64 ? 4 : 3; }

// fa90_smem_bytes is the dynamic shared memory of the kernel of head
// dimension D: alignment slack, Q, the stages and 1 + 2·STAGES mbarriers.
template <int D> constexpr int fa90_smem_bytes() {
    return 1024 + FA90_BM * D * 2 + fa90_stages<D>() * 2 * FA90_BN * D * 2 + 8 * (1 + 2 * fa90_stages<D>());
}
static_assert(fa90_smem_bytes<64>() == 148552 && fa90_smem_bytes<128>() == 230456,
              "the launch comment below states these sizes");

#if defined(__CUDA_ARCH_FEAT_SM90_ALL)

// fa90_qk issues s[64×128] (+)= A[64×16]·B[128×16]ᵀ, A and B K-major in
// shared memory (descriptors da, db); acc 0 overwrites s.
template <typename T> __device__ __forceinline__ void fa90_qk(float (&s)[64], uint64_t da, uint64_t db, int acc);
// fa90_pv issues o[64×N] += a[64×16]·B[16×N], a a register fragment and B
// N-major in shared memory (descriptor db); N = 2·len(o).
template <typename T, int N>
__device__ __forceinline__ void fa90_pv(float (&o)[N / 2], const uint32_t (&a)[4], uint64_t db);

#define FA90_MMA(T, AB)                                                                                            \
    template <> __device__ __forceinline__ void fa90_qk<T>(float (&s)[64], uint64_t da, uint64_t db, int acc) {    \
        asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %66, 0;\n"                                                  \
                     "wgmma.mma_async.sync.aligned.m64n128k16.f32." AB " " SM90_ACC64_REGS                         \
                     ", %64, %65, p, 1, 1, 0, 0;\n}\n"                                                             \
                     : SM90_ACC64_OPERANDS("+f", s)                                                                \
                     : "l"(da), "l"(db), "r"(acc));                                                                \
    }                                                                                                              \
    template <> __device__ __forceinline__ void fa90_pv<T, 128>(float (&o)[64], const uint32_t (&a)[4], uint64_t db) { \
        asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %69, 0;\n"                                                  \
                     "wgmma.mma_async.sync.aligned.m64n128k16.f32." AB " " SM90_ACC64_REGS                         \
                     ", {%64, %65, %66, %67}, %68, p, 1, 1, 1;\n}\n"                                               \
                     : SM90_ACC64_OPERANDS("+f", o)                                                                \
                     : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(db), "r"(1));                               \
    }                                                                                                              \
    template <> __device__ __forceinline__ void fa90_pv<T, 64>(float (&o)[32], const uint32_t (&a)[4], uint64_t db) { \
        asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %37, 0;\n"                                                  \
                     "wgmma.mma_async.sync.aligned.m64n64k16.f32." AB " " SM90_ACC32_REGS                          \
                     ", {%32, %33, %34, %35}, %36, p, 1, 1, 1;\n}\n"                                               \
                     : SM90_ACC32_OPERANDS("+f", o)                                                                \
                     : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(db), "r"(1));                               \
    }
FA90_MMA(__half, "f16.f16")
FA90_MMA(__nv_bfloat16, "bf16.bf16")
#undef FA90_MMA

// fa90_flat views an accumulator tile [NB][4] as the flat list wgmma binds.
template <int NB> __device__ __forceinline__ float (&fa90_flat(float (&d)[NB][4]))[NB * 4] {
    return reinterpret_cast<float(&)[NB * 4]>(d);
}

// fa90_fence_frags keeps the compiler from reusing the registers of P's
// fragments while a wgmma still reads them (as sm90_fence_acc for
// accumulators).
__device__ __forceinline__ void fa90_fence_frags(uint32_t (&p)[FA90_BN / 16][4]) {
#pragma unroll
    for (int kn = 0; kn < FA90_BN / 16; ++kn)
#pragma unroll
        for (int e = 0; e < 4; ++e) asm volatile("" : "+r"(p[kn][e])::"memory");
}

// fa90_fwd is the kernel body; see the comment above.
template <typename T, int D>
__device__ __forceinline__ void fa90_fwd(const CUtensorMap* tmQ, const CUtensorMap* tmK, const CUtensorMap* tmV,
                                         T* __restrict__ out, long long o_row, long long o_head, long long o_batch,
                                         int Hq, int Hkv, int Sq, int Sk, float scale, int causal,
                                         const int* __restrict__ keylens, int* lens_err) {
    constexpr int STAGES = fa90_stages<D>(), PANELS = D / 64, ND = D / 8, NS = FA90_BN / 8;
    constexpr int KV_BYTES = FA90_BN * D * 2, STAGE_BYTES = 2 * KV_BYTES, Q_BYTES = FA90_BM * D * 2;
    extern __shared__ uint8_t fa90_dyn[];
    const uint32_t raw = (uint32_t)__cvta_generic_to_shared(fa90_dyn);
    const uint32_t sQ = (raw + 1023u) & ~1023u, st0 = sQ + Q_BYTES;
    const uint32_t qbar = st0 + STAGES * STAGE_BYTES, full0 = qbar + 8, empty0 = full0 + 8 * STAGES;

    // Heaviest (causal) row blocks first.
    const int m0 = ((int)gridDim.x - 1 - (int)blockIdx.x) * FA90_BM;
    const int h = blockIdx.y, b = blockIdx.z, hk = h / (Hq / Hkv);
    if (scale == 0.0f) scale = 1.0f / sqrtf((float)D);
    const int kv_limit = attn_kv_limit(keylens, lens_err, b, Sk);
    const int diag = Sk - Sq, rows = min(FA90_BM, Sq - m0);
    int kv_end = kv_limit; // keys any row of the CTA sees
    if (causal) kv_end = min(kv_end, m0 + rows + diag);
    T* const og = out + b * o_batch + h * o_head;
    if (kv_end <= 0) { // every row fully masked: zeros
        const uint4 z = make_uint4(0u, 0u, 0u, 0u);
        for (int i = threadIdx.x; i < rows * (D / 8); i += FA90_THREADS)
            *reinterpret_cast<uint4*>(og + (m0 + i / (D / 8)) * o_row + (i % (D / 8)) * 8) = z;
        return;
    }
    const int ntiles = (kv_end + FA90_BN - 1) / FA90_BN;

    if (threadIdx.x == 0) sm90_mbar_init(qbar, 1);
    sm90_pipeline_init<STAGES>(full0, empty0); // fences the inits, syncs the CTA

    const int wg = threadIdx.x / 128;
    if (wg == 0) { // the producer
        asm volatile("setmaxnreg.dec.sync.aligned.u32 24;\n" ::: "memory");
        if (threadIdx.x == 0) {
            sm90_prefetch_map(tmQ);
            sm90_prefetch_map(tmK);
            sm90_prefetch_map(tmV);
            sm90_mbar_expect_tx(qbar, Q_BYTES);
#pragma unroll
            for (int p = 0; p < PANELS; ++p) sm90_tma_load_4d(sQ + FA90_PANEL * p, tmQ, qbar, 64 * p, m0, h, b);
            int stage = 0;
            uint32_t phase = 0;
            for (int t = 0; t < ntiles; ++t) {
                sm90_mbar_wait(empty0 + 8 * stage, phase ^ 1);
                const uint32_t full = full0 + 8 * stage, kst = st0 + stage * STAGE_BYTES;
                sm90_mbar_expect_tx(full, STAGE_BYTES);
#pragma unroll
                for (int p = 0; p < PANELS; ++p) {
                    sm90_tma_load_4d(kst + FA90_PANEL * p, tmK, full, 64 * p, t * FA90_BN, hk, b);
                    sm90_tma_load_4d(kst + KV_BYTES + FA90_PANEL * p, tmV, full, 64 * p, t * FA90_BN, hk, b);
                }
                if (++stage == STAGES) {
                    stage = 0;
                    phase ^= 1;
                }
            }
        }
        return;
    }

    // Consumers: rows [r0, r0 + 64); this lane's rows row_l and row_l + 8.
    asm volatile("setmaxnreg.inc.sync.aligned.u32 240;\n" ::: "memory");
    const int cw = wg - 1, lane = threadIdx.x % 32, warp = (threadIdx.x % 128) / 32;
    const int tq = lane % 4, r0 = m0 + 64 * cw, row_l = r0 + 16 * warp + lane / 4;
    const bool leader = threadIdx.x % 128 == 0;
    // Row r sees keys [0, min(kv_end, lim0 + r − r0)): see attn_scores.
    const int lim0 = causal ? r0 + diag + 1 : kv_end;
    const int lim_l = lim0 + (row_l - r0), lim_min = min(kv_end, lim0);
    const float sl2 = scale * ATTN_LOG2E;
    const uint32_t qa = sQ + cw * (64 * 128);

    float s[NS][4], o[ND][4], m_run[2] = {-INFINITY, -INFINITY}, l_run[2] = {0.0f, 0.0f}, alpha[2];
    uint32_t pf[FA90_BN / 16][4];
#pragma unroll
    for (int j = 0; j < ND; ++j)
#pragma unroll
        for (int e = 0; e < 4; ++e) o[j][e] = 0.0f;

    // issue_qk: S = Q·K of the stage at kst; issue_pv: O += P·V of the
    // stage whose V is at vst.
    auto issue_qk = [&](uint32_t kst) {
#pragma unroll
        for (int kk = 0; kk < D / 16; ++kk) {
            const uint32_t off = FA90_PANEL * (kk / 4) + 32 * (kk % 4);
            fa90_qk<T>(fa90_flat(s), sm90_desc(qa + off, 16, 1024), sm90_desc(kst + off, 16, 1024), kk);
        }
    };
    auto issue_pv = [&](uint32_t vst) {
#pragma unroll
        for (int kn = 0; kn < FA90_BN / 16; ++kn)
            fa90_pv<T, D>(fa90_flat(o), pf[kn], sm90_desc(vst + 2048 * kn, FA90_PANEL, 1024));
    };
    // softmax: tile t's scores in s to probabilities, alpha set.
    auto softmax = [&](int t) {
        const int key0 = t * FA90_BN;
        attn_scores(s, sl2, key0 + FA90_BN > lim_min, key0, lim_l, kv_end, tq);
        attn_softmax(s, m_run, l_run, alpha);
    };
    auto pack = [&] {
#pragma unroll
        for (int kn = 0; kn < FA90_BN / 16; ++kn) attn_p_frag<T>(s, kn, pf[kn]);
    };

    sm90_mbar_wait(qbar, 0);
    int stage = 0;
    uint32_t phase = 0;
    sm90_mbar_wait(full0, 0);
    sm90_wgmma_fence();
    issue_qk(st0);
    sm90_wgmma_commit();
    sm90_wgmma_wait<0>();
    sm90_fence_acc(fa90_flat(s));
    softmax(0); // O is still zero: nothing to rescale
    pack();
    int prev = 0;
    if (++stage == STAGES) {
        stage = 0;
        phase ^= 1;
    }
#pragma unroll 1
    for (int t = 1; t < ntiles; ++t) {
        sm90_mbar_wait(full0 + 8 * stage, phase);
        sm90_wgmma_fence();
        issue_qk(st0 + stage * STAGE_BYTES);
        sm90_wgmma_commit();
        issue_pv(st0 + prev * STAGE_BYTES + KV_BYTES);
        sm90_wgmma_commit();
        sm90_wgmma_wait<1>(); // S of tile t
        sm90_fence_acc(fa90_flat(s));
        softmax(t);
        sm90_wgmma_wait<0>(); // P·V of tile t − 1
        sm90_fence_acc(fa90_flat(o));
        fa90_fence_frags(pf);
        if (leader) sm90_mbar_arrive(empty0 + 8 * prev);
        attn_rescale(o, alpha);
        pack();
        prev = stage;
        if (++stage == STAGES) {
            stage = 0;
            phase ^= 1;
        }
    }
    sm90_wgmma_fence();
    issue_pv(st0 + prev * STAGE_BYTES + KV_BYTES);
    sm90_wgmma_commit();
    sm90_wgmma_wait<0>();
    sm90_fence_acc(fa90_flat(o));
    fa90_fence_frags(pf);

    attn_store<T>(o, l_run, og + row_l * o_row + 2 * tq, Sq - row_l, o_row);
}

#endif // __CUDA_ARCH_FEAT_SM90_ALL

// Kernels. Launch configuration (all four):
//   grid  = (ceil(Sq / 128), Hq, B)   (do not launch when B·Hq·Sq = 0)
//   block = (384, 1, 1)
//   dynamic shared bytes: d64 → 148552, d128 → 230456 (set
//     CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES first).
// Parameters: the tensor maps above; out and its strides (rows, heads,
// batch entries); then as the mma.sync kernels. Preconditions: compute
// capability 9.0; out 16-byte aligned; q, k, v as their tensor maps need
// (16-byte aligned, byte strides multiples of 16); the rest as the
// mma.sync kernels.
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
#define FA90_BODY(T, D) \
    fa90_fwd<T, D>(&tmQ, &tmK, &tmV, out, o_row, o_head, o_batch, Hq, Hkv, Sq, Sk, scale, causal, keylens, lens_err);
#else
#define FA90_BODY(T, D) __trap();
#endif

#define FA90_KERNEL(NAME, T, D)                                                                                   \
    extern "C" __global__ void __launch_bounds__(FA90_THREADS, 1)                                                 \
        NAME(const __grid_constant__ CUtensorMap tmQ, const __grid_constant__ CUtensorMap tmK,                    \
             const __grid_constant__ CUtensorMap tmV, T* out, long long o_row, long long o_head,                 \
             long long o_batch, int Hq, int Hkv, int Sq, int Sk, float scale, int causal, const int* keylens,    \
             int* lens_err) {                                                                             \
        FA90_BODY(T, D)                                                                                           \
    }

FA90_KERNEL(flash_attn_sm90_f16_d64, __half, 64)
FA90_KERNEL(flash_attn_sm90_f16_d128, __half, 128)
FA90_KERNEL(flash_attn_sm90_bf16_d64, __nv_bfloat16, 64)
FA90_KERNEL(flash_attn_sm90_bf16_d128, __nv_bfloat16, 128)
