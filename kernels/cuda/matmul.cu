// matmul.cu: general batched matrix multiply with a fused epilogue
// (semantics: kernels/cpu/matmul.go, kernels.MatMulParams):
//
//   C[z] = act(alpha·op(A[z])·op(B[z]) + beta·C_old[z] + bias[n])
//
// Row-major matrices. op(A) is [M,K]: A is stored [M,K], or [K,M] when
// transA. op(B) is [K,N]: B is stored [K,N], or [N,K] when transB. C is
// [M,N]. Batch z = blockIdx.z; A[z] = a + z·strideA, B[z] = b + z·strideB
// (strideB = 0: one B shared by every batch), C[z] = c + z·strideC (strides
// in elements). bias ([N]) may be NULL. beta == 0 means C_old is never read
// (it may hold NaN). alpha is used as given (the Go launcher turns
// MatMulParams' "0 means 1" into 1).
// Products accumulate in float32; f16/bf16 round once on store (RNE).
// act: 0 none, 1 relu, 2 gelu (erf), 3 gelu tanh, 4 silu, 5 tanh (common.cuh).
//
// Kernels, all with the signature
//   (T* c, const T* a, const T* b, const T* bias, int M, int N, int K,
//    int transA, int transB, long long strideA, long long strideB,
//    long long strideC, float alpha, float beta, int act):
//
//  matmul_f32, matmul_f16, matmul_bf16: SIMT, no tensor cores; every target,
//    every shape (any M, N, K ≥ 0 including 1 and odd sizes), any alignment
//    (element-aligned pointers), all four transA/transB combinations.
//    128x128x8 block tile, 256 threads, 8x8 outputs per thread, double
//    buffered shared memory. Vector loads where the pointer and leading
//    dimension allow, and an unchecked fast path when M%128 == N%128 == 0,
//    K%8 == 0 and the loads are vectorisable.
//      grid  = (ceil(N/128), ceil(M/128), batch), block = (256, 1, 1)
//      exactly, dynamic shared memory 0 (16896 bytes static).
//
//  matmul_splitk_f32, then splitk_reduce_f32: the SIMT kernel over slices
//  of K for one f32 product of few output tiles, which would leave most
//  multiprocessors idle. (float* ws, const float* a, const float* b, int M,
//  int N, int K, int transA, int transB, int kslice): block z of grid
//  (ceil(N/128), ceil(M/128), splits) multiplies k in [z·kslice,
//  min(K, (z+1)·kslice)) and stores the product to ws + z·M·N; kslice is a
//  multiple of 8. (float* c, const float* ws, const float* bias, int M,
//  int N, int splits, float alpha, float beta, int act): each output the
//  sum of its splits in order, then the epilogue; any 1-D grid. (The
//  16-bit SIMT kernels, which run where tensor cores do not, spill
//  registers in this form and are left whole.) splitk_reduce_f16 and
//  splitk_reduce_bf16, the same with T c and bias, reduce the slices of
//  the Hopper kernel's split-K (matmul_sm90.cu).
//
//  matmul_gemvR_f16, matmul_gemvR_bf16, R = 1, 2, 4, 8 (every target): a
//    decode step's product, M <= R rows of a [M, K] times b stored [N, K]
//    (transB), one product (a batch sharing b folded into M rows); one warp
//    per 2 output columns reading 16-byte chunks of b. (T* c, const T* a,
//    const T* b, const T* bias, int M, int N, int K, float alpha, float
//    beta, int act); needs K % 8 == 0 and a and b 16-byte aligned.
//      grid = ceil(N/8), block = 128, no dynamic shared memory.
//
//  matmul_tc_f16, matmul_tc_bf16 (sm_80+): tensor cores, mma.sync m16n8k16
//    with f32 accumulation, ldmatrix, 4-stage cp.async pipeline.
//    128x128x32 block tile, 4 warps of 64x64, padded shared memory.
//  matmul_tf32 (sm_80+): f32 in/out on TF32 tensor cores, mma.sync m16n8k8
//    (inputs rounded with cvt.rna.tf32.f32), same pipeline with a 128x128x16
//    block tile.
//    All four transA/transB combinations are supported by all three.
//      grid  = (ceil(N/128), ceil(M/128), batch), block = (128, 1, 1)
//      exactly, dynamic shared memory = 81920 bytes: needs
//      cuFuncSetAttribute(CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
//      81920) once per function (and preferably
//      CU_FUNC_ATTRIBUTE_PREFERRED_SHARED_MEMORY_CARVEOUT = 100 so two
//      blocks fit per SM).
//    Preconditions (the launcher falls back to matmul_T otherwise), with
//    E = 8 for f16/bf16 and E = 4 for tf32 (16 bytes of elements):
//      compute capability ≥ 8.0;
//      M % E == 0, N % E == 0, K % E == 0 (exactly needed: K % E when
//      transA == 0 or transB == 1, M % E when transA == 1, N % E when
//      transB == 0);
//      a and b 16-byte aligned, strideA and strideB multiples of E, so every
//      batch's A and B are 16-byte aligned too. c and bias need only element
//      alignment (stores are vectorised where aligned).
//    Partial tiles at the M, N and K edges are handled (zero-filled loads,
//    masked stores) within those preconditions. On targets below sm_80 the
//    tensor-core kernels exist but trap.
//
//  All kernels: batch = gridDim.z ≤ 65535, ceil(M/128) ≤ 65535. A grid with
//  no blocks (M == 0 or N == 0) must not be launched.
//
// Blocks are rasterised in groups of 8 block rows (M) so that neighbouring
// blocks share A and B panels in L2; the grid shape is the plain one above.

#include "common.cuh"
#include "sm80.cuh"

namespace mm {

// ---------------------------------------------------------------------------
// Shared helpers.

// SigmoidFast is the logistic function of the matmul epilogues:
// __fdividef(1, 1+e^-x) (2 ulp; 0 once e^-x > 2^126, where σ(x) < 2^-126)
// instead of an IEEE division. The division's slow path is a subroutine
// call, and that call alone makes the register-bound SIMT kernel spill in
// its main loop.
struct SigmoidFast {
    __device__ __forceinline__ float operator()(float x) const { return __fdividef(1.0f, 1.0f + expf(-x)); }
};

// epilogue returns act(alpha·acc + beta·old + bias) for one element; old is
// only used when beta != 0 (the caller only reads it then).
__device__ __forceinline__ float epilogue(float acc, float old, float bv, float alpha, float beta, int code) {
    float v = alpha * acc;
    if (beta != 0.0f) v = fmaf(beta, old, v);
    v += bv;
    return act_apply(v, code, SigmoidFast());
}

// load_bias returns bias[col..col+3] as float, 0 past N or without bias.
template <typename T>
__device__ __forceinline__ void load_bias(const T* __restrict__ bias, int col, int N, float (&bv)[4]) {
#pragma unroll
    for (int e = 0; e < 4; e++) bv[e] = (bias != nullptr && col + e < N) ? to_f32(bias[col + e]) : 0.0f;
}

// store_tile applies the epilogue to nrows x 128 block results held in
// shared memory S (float32, row pitch lds; row r is global row row_of(r),
// column j is global column bn + j) and stores them to c. Thread t (of NT)
// takes columns 4(t%32)..+3 of rows t/32, t/32 + NT/32, ...: a warp reads
// one row of S and writes 128 consecutive outputs. bv holds the bias of the
// thread's 4 columns (load_bias(bias, bn + 4(t%32), ...)).
template <typename T, int NT, typename RowOf>
__device__ __forceinline__ void store_tile(T* c, const float* S, int lds, int nrows, RowOf row_of, int M, int N,
                                           int bn, const float (&bv)[4], float alpha, float beta, int act,
                                           bool vecC) {
    const int t = threadIdx.x;
    const int scol = (t & 31) * 4;
    const int col = bn + scol;
    if (col >= N) return;
    const bool vec = vecC && col + 3 < N;
#pragma unroll 1
    for (int r = t >> 5; r < nrows; r += NT / 32) {
        const int row = row_of(r);
        if (row >= M) continue;
        const float4 s = *reinterpret_cast<const float4*>(&S[r * lds + scol]);
        const float acc[4] = {s.x, s.y, s.z, s.w};
        T* p = c + (long long)row * N + col;
        float old[4] = {0.0f, 0.0f, 0.0f, 0.0f}, v[4];
        if (beta != 0.0f) {
            if (vec) {
                ld4(p, old);
            } else {
#pragma unroll
                for (int e = 0; e < 4; e++)
                    if (col + e < N) old[e] = to_f32(p[e]);
            }
        }
#pragma unroll
        for (int e = 0; e < 4; e++) v[e] = epilogue(acc[e], old[e], bv[e], alpha, beta, act);
        if (vec) {
            st4(p, v);
        } else {
#pragma unroll
            for (int e = 0; e < 4; e++)
                if (col + e < N) p[e] = from_f32<T>(v[e]);
        }
    }
}

// ---------------------------------------------------------------------------
// SIMT kernel: matmul_T.
//
// Shared tiles hold float32 and are k-major: As[k][m], Bs[k][n], BK = 8 rows
// of 128 (+4 padding, so the transposing stores of a [M,K] A or a [N,K] B
// are free of bank conflicts). Thread (tr, tc), tr, tc in 0..15, owns rows
// {4tr..4tr+3, 64+4tr..64+4tr+3} and the same columns for tc; a warp spans
// 4 values of tr and 8 of tc, so each float4 read of a k-row touches 64 or
// 128 contiguous bytes (one wavefront).

constexpr int S_BM = 128, S_BN = 128, S_BK = 8, S_THREADS = 256, S_LD = 132;
constexpr int S_TILE = S_BK * S_LD; // floats per operand per buffer

// Raw4 holds 4 loaded elements as stored (16-bit types stay packed, two per
// register, until they are written to shared memory as float32).
template <typename T> struct Raw4 {
    unsigned w[2];
    __device__ __forceinline__ void zero() { w[0] = w[1] = 0u; }
    __device__ __forceinline__ void vload(const T* p) {
        const uint2 x = *reinterpret_cast<const uint2*>(p);
        w[0] = x.x;
        w[1] = x.y;
    }
    __device__ __forceinline__ void sload(const T* p, int n) { // first n of 4, rest 0
        const unsigned short* q = reinterpret_cast<const unsigned short*>(p);
        unsigned e[4];
#pragma unroll
        for (int i = 0; i < 4; i++) e[i] = i < n ? (unsigned)q[i] : 0u;
        w[0] = e[0] | (e[1] << 16);
        w[1] = e[2] | (e[3] << 16);
    }
    __device__ __forceinline__ float get(int i) const;
};
template <> __device__ __forceinline__ float Raw4<__half>::get(int i) const {
    return __half2float(__ushort_as_half((unsigned short)((w[i >> 1] >> ((i & 1) * 16)) & 0xffffu)));
}
template <> __device__ __forceinline__ float Raw4<__nv_bfloat16>::get(int i) const {
    return __uint_as_float(((w[i >> 1] >> ((i & 1) * 16)) & 0xffffu) << 16);
}
template <> struct Raw4<float> {
    float v[4];
    __device__ __forceinline__ void zero() { v[0] = v[1] = v[2] = v[3] = 0.0f; }
    __device__ __forceinline__ void vload(const float* p) { ld4(p, v); }
    __device__ __forceinline__ void sload(const float* p, int n) {
#pragma unroll
        for (int i = 0; i < 4; i++) v[i] = i < n ? p[i] : 0.0f;
    }
    __device__ __forceinline__ float get(int i) const { return v[i]; }
};

// Loader4 streams 4 contiguous elements of one operand per thread per
// k-tile, along the stored matrix's contiguous dimension. KCONT: that
// dimension is K (A [M,K], B [N,K]): the row (m or n) is fixed and the
// column k0+koff moves by S_BK per tile. Otherwise it is M or N (A [K,M],
// B [K,N]): the column is fixed and the row k0+koff moves. Elements outside
// the matrix read as 0. CHECK=false: no bounds checks, every load is an
// aligned 4-element vector load (the fast path's preconditions).
template <typename T, bool KCONT, bool CHECK> struct Loader4 {
    const T* p;     // this thread's first element of the current tile
    long long step; // elements between consecutive k-tiles
    int lim;        // KCONT: K-koff if the row is inside, else 0; !KCONT: K-koff
    int fixed;      // !KCONT: valid columns, 0..4
    bool vec;       // 4-element vector loads allowed (alignment)

    // The stored matrix is rows x cols (ld = cols); (row, col) is this
    // thread's first element in the first tile; K is the k extent.
    __device__ __forceinline__ Loader4(const T* base, int rows, int cols, int row, int col, int K, bool v) {
        p = base + (long long)row * cols + col;
        vec = v;
        if (KCONT) {
            step = S_BK;
            lim = row < rows ? K - col : 0;
            fixed = 0;
        } else {
            step = (long long)S_BK * cols;
            lim = K - row;
            fixed = min(max(cols - col, 0), 4);
        }
    }

    // load fills r with the tile at k0 and advances to the next tile.
    __device__ __forceinline__ void load(int k0, Raw4<T>& r) {
        if (!CHECK) {
            r.vload(p);
        } else {
            // n: valid elements, a prefix of the 4.
            const int n = KCONT ? min(max(lim - k0, 0), 4) : (k0 < lim ? fixed : 0);
            if (vec && n == 4)
                r.vload(p);
            else
                r.sload(p, n);
        }
        p += step;
    }
};

// simt_main accumulates the block tile (bm, bn) of op(A)·op(B) into acc,
// over K values of k; ldk is the leading dimension of an operand stored
// with K contiguous (A [M,K], B [N,K]): K itself, or the whole product's K
// when a and b start at a slice of it (split-K).
// acc[i][j]: row bm + (i<4 ? 4tr+i : 64+4tr+i-4), column likewise with tc.
// Thread tid loads: A [M,K]: row m = tid/2, k = 4(tid%2)..+3; A [K,M]:
// k = tid/32, m = 4(tid%32)..+3; B [K,N]: k = tid/32, n = 4(tid%32)..+3;
// B [N,K]: n = tid/2, k = 4(tid%2)..+3.
template <typename T, bool TA, bool TB, bool CHECK>
__device__ __forceinline__ void simt_main(const T* __restrict__ a, const T* __restrict__ b, int M, int N, int K,
                                          int ldk, int bm, int bn, bool vecA, bool vecB, float* As, float* Bs, int tr,
                                          int tc, float (&acc)[8][8]) {
    const int tid = threadIdx.x;
    const int rh = tid >> 1, ch = (tid & 1) * 4;  // K-contiguous operand: row, k
    const int rw = tid >> 5, cw = (tid & 31) * 4; // M/N-contiguous operand: k, column
    Loader4<T, !TA, CHECK> la = !TA ? Loader4<T, !TA, CHECK>(a, M, ldk, bm + rh, ch, K, vecA)
                                    : Loader4<T, !TA, CHECK>(a, K, M, rw, bm + cw, K, vecA);
    Loader4<T, TB, CHECK> lb = TB ? Loader4<T, TB, CHECK>(b, N, ldk, bn + rh, ch, K, vecB)
                                  : Loader4<T, TB, CHECK>(b, K, N, rw, bn + cw, K, vecB);
    Raw4<T> ra, rb;
    ra.zero();
    rb.zero();

    // Registers → shared (k-major).
    auto store = [&](float* as, float* bs) {
        if (!TA) {
#pragma unroll
            for (int i = 0; i < 4; i++) as[(ch + i) * S_LD + rh] = ra.get(i);
        } else {
            *reinterpret_cast<float4*>(&as[rw * S_LD + cw]) = make_float4(ra.get(0), ra.get(1), ra.get(2), ra.get(3));
        }
        if (!TB) {
            *reinterpret_cast<float4*>(&bs[rw * S_LD + cw]) = make_float4(rb.get(0), rb.get(1), rb.get(2), rb.get(3));
        } else {
#pragma unroll
            for (int i = 0; i < 4; i++) bs[(ch + i) * S_LD + rh] = rb.get(i);
        }
    };

    la.load(0, ra);
    lb.load(0, rb);
    store(As, Bs);
    __syncthreads();

    int buf = 0;
    for (int k0 = 0; k0 < K; k0 += S_BK) {
        const bool more = k0 + S_BK < K;
        if (more) { // in flight during the FMAs below
            la.load(k0 + S_BK, ra);
            lb.load(k0 + S_BK, rb);
        }

        const float* as = As + buf * S_TILE;
        const float* bs = Bs + buf * S_TILE;
#pragma unroll
        for (int kk = 0; kk < S_BK; kk++) {
            const float4 a0 = *reinterpret_cast<const float4*>(&as[kk * S_LD + tr * 4]);
            const float4 a1 = *reinterpret_cast<const float4*>(&as[kk * S_LD + 64 + tr * 4]);
            const float4 b0 = *reinterpret_cast<const float4*>(&bs[kk * S_LD + tc * 4]);
            const float4 b1 = *reinterpret_cast<const float4*>(&bs[kk * S_LD + 64 + tc * 4]);
            const float av[8] = {a0.x, a0.y, a0.z, a0.w, a1.x, a1.y, a1.z, a1.w};
            const float bv[8] = {b0.x, b0.y, b0.z, b0.w, b1.x, b1.y, b1.z, b1.w};
#pragma unroll
            for (int i = 0; i < 8; i++)
#pragma unroll
                for (int j = 0; j < 8; j++) acc[i][j] = fmaf(av[i], bv[j], acc[i][j]);
        }
        // The other buffer was last read in the previous iteration, which
        // every thread finished before the barrier that ended it.
        if (more) store(As + (buf ^ 1) * S_TILE, Bs + (buf ^ 1) * S_TILE);
        __syncthreads();
        buf ^= 1;
    }
}

// stage_rows writes two accumulator rows (8 values each: columns 4tc..+3
// and 64+4tc..+3) to staging rows srow and srow + S_LD.
__device__ __forceinline__ void stage_rows(float* srow, const float (&r0)[8], const float (&r1)[8]) {
    *reinterpret_cast<float4*>(srow) = make_float4(r0[0], r0[1], r0[2], r0[3]);
    *reinterpret_cast<float4*>(srow + 64) = make_float4(r0[4], r0[5], r0[6], r0[7]);
    *reinterpret_cast<float4*>(srow + S_LD) = make_float4(r1[0], r1[1], r1[2], r1[3]);
    *reinterpret_cast<float4*>(srow + S_LD + 64) = make_float4(r1[4], r1[5], r1[6], r1[7]);
}

// simt_block computes the block tile of c [M, N] (element type C) of
// act(alpha·op(A)·op(B) + beta·c + bias) over K values of k, ldk being the
// leading dimension of a K-contiguous operand (simt_main).
template <typename T, typename C>
__device__ __forceinline__ void simt_block(C* c, const T* __restrict__ a, const T* __restrict__ b,
                                           const C* __restrict__ bias, int M, int N, int K, int ldk, int transA,
                                           int transB, float alpha, float beta, int act) {
    // Main loop: As = smem[0, 2·S_TILE), Bs = smem[2·S_TILE, 4·S_TILE).
    // Epilogue: smem is a [32][S_LD] staging tile (4·S_TILE = 32·S_LD).
    __shared__ __align__(16) float smem[4 * S_TILE];
    float* As = smem;
    float* Bs = smem + 2 * S_TILE;

    int tm, tn;
    tile_coords(tm, tn);
    const int bm = tm * S_BM, bn = tn * S_BN;

    const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;
    const int tr = (warp >> 1) * 4 + (lane >> 3); // 0..15
    const int tc = (warp & 1) * 8 + (lane & 7);   // 0..15

    const bool ta = transA != 0, tb = transB != 0;
    const bool vecA = ((ta ? M : ldk) % 4 == 0) && aligned_to(a, 4 * sizeof(T));
    const bool vecB = ((tb ? ldk : N) % 4 == 0) && aligned_to(b, 4 * sizeof(T));
    const bool fast = vecA && vecB && M % S_BM == 0 && N % S_BN == 0 && K % S_BK == 0 && K > 0;

    float acc[8][8];
#pragma unroll
    for (int i = 0; i < 8; i++)
#pragma unroll
        for (int j = 0; j < 8; j++) acc[i][j] = 0.0f;

    const int sel = (ta ? 2 : 0) + (tb ? 1 : 0);
    if (fast) {
        switch (sel) {
        case 0: simt_main<T, false, false, false>(a, b, M, N, K, ldk, bm, bn, vecA, vecB, As, Bs, tr, tc, acc); break;
        case 1: simt_main<T, false, true, false>(a, b, M, N, K, ldk, bm, bn, vecA, vecB, As, Bs, tr, tc, acc); break;
        case 2: simt_main<T, true, false, false>(a, b, M, N, K, ldk, bm, bn, vecA, vecB, As, Bs, tr, tc, acc); break;
        default: simt_main<T, true, true, false>(a, b, M, N, K, ldk, bm, bn, vecA, vecB, As, Bs, tr, tc, acc); break;
        }
    } else {
        switch (sel) {
        case 0: simt_main<T, false, false, true>(a, b, M, N, K, ldk, bm, bn, vecA, vecB, As, Bs, tr, tc, acc); break;
        case 1: simt_main<T, false, true, true>(a, b, M, N, K, ldk, bm, bn, vecA, vecB, As, Bs, tr, tc, acc); break;
        case 2: simt_main<T, true, false, true>(a, b, M, N, K, ldk, bm, bn, vecA, vecB, As, Bs, tr, tc, acc); break;
        default: simt_main<T, true, true, true>(a, b, M, N, K, ldk, bm, bn, vecA, vecB, As, Bs, tr, tc, acc); break;
        }
    }

    // Epilogue in 4 passes through shared memory (all of it; the main loop
    // ended with a barrier). Pass q stages acc[2q] and acc[2q+1], i.e. block
    // rows off + 4·tr + 2(q%2) + e (off = 64 for q ≥ 2, e = 0, 1) as staging
    // row 2·tr + e; the 32 staging rows x 128 columns are then stored
    // row-coalesced by store_tile.
    static_assert(4 * S_TILE == 32 * S_LD, "staging tile size");
    const bool vecC = (N % 4 == 0) && aligned_to(c, 4 * sizeof(C));
    float bv[4];
    load_bias(bias, bn + (tid & 31) * 4, N, bv);
#pragma unroll 1
    for (int q = 0; q < 4; q++) {
        float* srow = smem + (2 * tr) * S_LD + tc * 4;
        // Static accumulator indices in every branch keep acc in registers.
        switch (q) {
        case 0: stage_rows(srow, acc[0], acc[1]); break;
        case 1: stage_rows(srow, acc[2], acc[3]); break;
        case 2: stage_rows(srow, acc[4], acc[5]); break;
        default: stage_rows(srow, acc[6], acc[7]); break;
        }
        __syncthreads();
        const int base = bm + (q >= 2 ? 64 : 0) + 2 * (q & 1);
        store_tile<C, S_THREADS>(
            c, smem, S_LD, 32, [=](int r) { return base + 4 * (r >> 1) + (r & 1); }, M, N, bn, bv, alpha, beta, act,
            vecC);
        __syncthreads(); // staging tile is rewritten by the next pass
    }
}

// simt_gemm is matmul_T: batch blockIdx.z's block tile over all of K.
template <typename T>
__device__ __forceinline__ void simt_gemm(T* c, const T* __restrict__ a, const T* __restrict__ b,
                                          const T* __restrict__ bias, int M, int N, int K, int transA, int transB,
                                          long long strideA, long long strideB, long long strideC, float alpha,
                                          float beta, int act) {
    const long long z = blockIdx.z;
    simt_block<T, T>(c + z * strideC, a + z * strideA, b + z * strideB, bias, M, N, K, K, transA, transB, alpha,
                     beta, act);
}

// simt_splitk is matmul_splitk_f32: slice blockIdx.z of K, k in
// [z·kslice, min(K, (z+1)·kslice)), its plain product stored in float32 to
// ws + z·M·N. kslice is a multiple of S_BK, so a slice's operands keep the
// whole product's alignment.
template <typename T>
__device__ __forceinline__ void simt_splitk(float* ws, const T* __restrict__ a, const T* __restrict__ b, int M,
                                            int N, int K, int transA, int transB, int kslice) {
    const int z = blockIdx.z;
    const int k0 = z * kslice, kn = min(K, k0 + kslice) - k0;
    a += transA != 0 ? (long long)k0 * M : k0;
    b += transB != 0 ? k0 : (long long)k0 * N;
    simt_block<T, float>(ws + (long long)z * M * N, a, b, nullptr, M, N, kn, K, transA, transB, 1.0f, 0.0f, 0);
}

// splitk_reduce is splitk_reduce_f32: each output the sum of its splits'
// partial products in slice order, then the epilogue, as simt_gemm's
// store gives it.
template <typename T>
__device__ __forceinline__ void splitk_reduce(T* c, const float* __restrict__ ws, const T* __restrict__ bias, int M,
                                              int N, int splits, float alpha, float beta, int act) {
    const long long MN = (long long)M * N;
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < MN;
         i += (long long)gridDim.x * blockDim.x) {
        float s = 0.0f;
        for (int z = 0; z < splits; z++) s += ws[z * MN + i];
        const float old = beta != 0.0f ? to_f32(c[i]) : 0.0f;
        const float bv = bias != nullptr ? to_f32(bias[i % N]) : 0.0f;
        c[i] = from_f32<T>(epilogue(s, old, bv, alpha, beta, act));
    }
}

// ---------------------------------------------------------------------------
// Tensor-core kernels: matmul_tc_f16, matmul_tc_bf16, matmul_tf32.
//
// Block tile 128x128, BK = 64 bytes of K per row (32 f16/bf16, 16 f32),
// 4 warps in 2x2, each warp 64x64 (4 m16 tiles x 8 n8 tiles), 4 stages.
// Per stage: A region then B region, 10240 bytes each. An operand tile whose
// rows run along K (A [M,K], B [N,K]) is [128][BK + 16 bytes] ("k-major",
// pitch 80 bytes); one whose rows run along M or N (A [K,M], B [K,N]) is
// [BK][128 + 8 elements] ("mn-major", pitch 272 bytes for f16, 544 for f32).
// Both paddings make ldmatrix (8 rows of 16 bytes) and the tf32 scalar
// fragment loads free of bank conflicts and keep rows 16-byte aligned.

constexpr int TC_BM = 128, TC_BN = 128, TC_THREADS = 128, TC_STAGES = 4;
constexpr int TC_OP_BYTES = 10240;
constexpr int TC_STAGE_BYTES = 2 * TC_OP_BYTES;
constexpr int TC_SMEM_BYTES = TC_STAGES * TC_STAGE_BYTES; // 81920
constexpr int TC_LDS = 136; // epilogue staging pitch (floats)
static_assert(TC_SMEM_BYTES == 81920 && TC_BM == 128 && TC_BN == 128, "launch comment out of date");
static_assert(TC_BM * TC_LDS * 4 <= TC_SMEM_BYTES, "epilogue staging tile does not fit");

template <typename T> struct TcGeom {
    static constexpr int EPC = 16 / (int)sizeof(T); // elements per 16-byte chunk
    static constexpr int BK = 64 / (int)sizeof(T);  // K per stage
    static constexpr int LDK = BK + EPC;            // pitch of a k-major tile
    static constexpr int LDX = 128 + 8;             // pitch of an mn-major tile
    static_assert(128 * LDK * (int)sizeof(T) <= TC_OP_BYTES, "k-major tile too big");
    static_assert(BK * LDX * (int)sizeof(T) <= TC_OP_BYTES, "mn-major tile too big");
};

#if __CUDA_ARCH__ >= 800

// TcLoader issues the cp.async copies of one operand tile per stage: 512
// chunks of 16 bytes, 4 per thread. g is stored [D][K] when KMAJOR (row d,
// K contiguous), else [K][D]; the block's tile covers rows/columns
// d0..d0+127 and, for the i-th load, k = i·BK .. i·BK+BK-1. Chunks outside
// [0,D) x [0,K) are zero-filled; the preconditions (D and K multiples of EPC
// where they are the contiguous dimension) make every chunk entirely inside
// or entirely outside.
//   KMAJOR: chunk i of thread tid is row r0 + 32i (r0 = tid/4), k offset
//     cc = EPC·(tid%4): shared [r][LDK] at (r0 + 32i)·LDK + cc.
//   else:   chunk i is k row r0 + RS·i (r0 = tid/CPR, RS = 128/CPR, CPR =
//     128/EPC chunks per row), column cc = EPC·(tid%CPR): shared [k][LDX]
//     at (r0 + RS·i)·LDX + cc.
template <typename T, bool KMAJOR> struct TcLoader {
    using G = TcGeom<T>;
    static constexpr int CPR = KMAJOR ? 4 : 128 / G::EPC;   // chunks per shared row
    static constexpr int RS = TC_THREADS / CPR;              // rows between a thread's chunks
    static constexpr int LD = KMAJOR ? G::LDK : G::LDX;       // shared pitch (elements)

    const T* base;      // the operand (fallback address for zero-filled chunks)
    const T* p;         // chunk 0's source for the next tile
    long long rstride;  // elements between chunk i and chunk i+1 sources
    long long tstep;    // elements between consecutive tiles
    unsigned soff;      // chunk 0's shared byte offset within the operand region
    unsigned okmask;    // bit i: chunk i's row (KMAJOR) / column (else) is inside
    int klim;           // KMAJOR: tile at k0 inside iff k0 < klim; else chunk i iff k0 + RS·i < klim

    __device__ __forceinline__ TcLoader(const T* g, int D, int K, int d0, int tid) {
        const int r0 = tid / CPR, cc = (tid % CPR) * G::EPC;
        base = g;
        soff = (unsigned)((r0 * LD + cc) * (int)sizeof(T));
        if (KMAJOR) {
            p = g + (long long)(d0 + r0) * K + cc;
            rstride = (long long)RS * K;
            tstep = G::BK;
            okmask = 0;
#pragma unroll
            for (int i = 0; i < 4; i++) okmask |= (d0 + r0 + RS * i < D ? 1u : 0u) << i;
            klim = K - cc;
        } else {
            p = g + (long long)r0 * D + d0 + cc;
            rstride = (long long)RS * D;
            tstep = (long long)G::BK * D;
            okmask = d0 + cc < D ? 0xfu : 0u;
            klim = K - r0;
        }
    }

    // load copies the tile at k0 into the operand region at shared address
    // s, then advances to the next tile.
    __device__ __forceinline__ void load(unsigned s, int k0) {
#pragma unroll
        for (int i = 0; i < 4; i++) {
            const bool ok = ((okmask >> i) & 1u) && (KMAJOR ? k0 < klim : k0 + RS * i < klim);
            const T* src = p + i * rstride;
            cp_async16(s + soff + (unsigned)(i * RS * LD * (int)sizeof(T)), ok ? src : base, ok);
        }
        p += tstep;
    }
};

// tc_compute_16 runs one stage (BK = 32) of f16/bf16 MMAs for this warp;
// sA, sB are the shared-space addresses of the stage's operand regions.
template <typename T, bool TA, bool TB>
__device__ __forceinline__ void tc_compute_16(unsigned sA, unsigned sB, int wm0, int wn0, int lane,
                                              float (&acc)[4][8][4]) {
    using G = TcGeom<T>;
    constexpr int E = (int)sizeof(T);
    const int j4 = lane >> 3, r8 = lane & 7; // ldmatrix: matrix index, row in it
    // Per-thread byte offsets of the ldmatrix row addresses for m-tile 0,
    // n-tile pair 0 and kk = 0; the other tiles add compile-time constants.
    unsigned aoff, boff;
    if (!TA) // As[m][k]: matrices (m0-7,k0-7) (m8-15,k0-7) (m0-7,k8-15) (m8-15,k8-15)
        aoff = (unsigned)(((wm0 + (lane & 15)) * G::LDK + (lane >> 4) * 8) * E);
    else // As[k][m], transposed on load: matrix j4 covers k 8(j4/2).., m 8(j4%2)..
        aoff = (unsigned)(((r8 + (j4 >> 1) * 8) * G::LDX + wm0 + (j4 & 1) * 8) * E);
    if (TB) // Bs[n][k]: matrices (n0-7,k0-7) (n0-7,k8-15) (n8-15,k0-7) (n8-15,k8-15)
        boff = (unsigned)(((wn0 + r8 + (j4 >> 1) * 8) * G::LDK + (j4 & 1) * 8) * E);
    else // Bs[k][n], transposed on load: matrix j4 covers k 8(j4%2).., n 8(j4/2)..
        boff = (unsigned)(((r8 + (j4 & 1) * 8) * G::LDX + wn0 + (j4 >> 1) * 8) * E);
#pragma unroll
    for (int kk = 0; kk < G::BK / 16; kk++) {
        unsigned af[4][4], bf[8][2];
#pragma unroll
        for (int i = 0; i < 4; i++) {
            if (!TA)
                ldsm_x4(af[i], sA + aoff + (i * 16 * G::LDK + kk * 16) * E);
            else
                ldsm_x4_trans(af[i], sA + aoff + (kk * 16 * G::LDX + i * 16) * E);
        }
#pragma unroll
        for (int p = 0; p < 4; p++) {
            if (TB)
                ldsm_b_pair(bf[2 * p], bf[2 * p + 1], sB + boff + (p * 16 * G::LDK + kk * 16) * E);
            else
                ldsm_b_pair<true>(bf[2 * p], bf[2 * p + 1], sB + boff + (kk * 16 * G::LDX + p * 16) * E);
        }
#pragma unroll
        for (int i = 0; i < 4; i++)
#pragma unroll
            for (int j = 0; j < 8; j++) mma16816(acc[i][j], af[i], bf[j][0], bf[j][1], T());
    }
}

// tc_compute_tf32 runs one stage (BK = 16) of TF32 MMAs for this warp.
// Fragments (g = lane/4, t = lane%4): a0 (g,t) a1 (g+8,t) a2 (g,t+4)
// a3 (g+8,t+4); b0 (k=t, n=g) b1 (k=t+4, n=g).
template <bool TA, bool TB>
__device__ __forceinline__ void tc_compute_tf32(const float* As, const float* Bs, int wm0, int wn0, int lane,
                                                float (&acc)[4][8][4]) {
    using G = TcGeom<float>;
    const int g = lane >> 2, t = lane & 3;
#pragma unroll
    for (int ks = 0; ks < G::BK / 8; ks++) {
        const int k = ks * 8 + t;
        unsigned af[4][4], bf[8][2];
#pragma unroll
        for (int i = 0; i < 4; i++) {
            const int m = wm0 + i * 16 + g;
            if (!TA) {
                af[i][0] = tf32(As[m * G::LDK + k]);
                af[i][1] = tf32(As[(m + 8) * G::LDK + k]);
                af[i][2] = tf32(As[m * G::LDK + k + 4]);
                af[i][3] = tf32(As[(m + 8) * G::LDK + k + 4]);
            } else {
                af[i][0] = tf32(As[k * G::LDX + m]);
                af[i][1] = tf32(As[k * G::LDX + m + 8]);
                af[i][2] = tf32(As[(k + 4) * G::LDX + m]);
                af[i][3] = tf32(As[(k + 4) * G::LDX + m + 8]);
            }
        }
#pragma unroll
        for (int j = 0; j < 8; j++) {
            const int n = wn0 + j * 8 + g;
            if (TB) {
                bf[j][0] = tf32(Bs[n * G::LDK + k]);
                bf[j][1] = tf32(Bs[n * G::LDK + k + 4]);
            } else {
                bf[j][0] = tf32(Bs[k * G::LDX + n]);
                bf[j][1] = tf32(Bs[(k + 4) * G::LDX + n]);
            }
        }
#pragma unroll
        for (int i = 0; i < 4; i++)
#pragma unroll
            for (int j = 0; j < 8; j++) mma1688_tf32(acc[i][j], af[i], bf[j][0], bf[j][1]);
    }
}

// tc_main runs the multistage pipeline over K for block tile (bm, bn).
template <typename T, bool TA, bool TB>
__device__ __forceinline__ void tc_main(const T* __restrict__ a, const T* __restrict__ b, int M, int N, int K,
                                        int bm, int bn, unsigned char* smem, int wm0, int wn0,
                                        float (&acc)[4][8][4]) {
    using G = TcGeom<T>;
    const int tid = threadIdx.x, lane = tid & 31;
    const int kTiles = (K + G::BK - 1) / G::BK;
    const unsigned s0 = smem_u32(smem);

    TcLoader<T, !TA> la(a, M, K, bm, tid); // A [M,K] is k-major, A [K,M] is not
    TcLoader<T, TB> lb(b, N, K, bn, tid);  // B [N,K] is k-major, B [K,N] is not

    cp_async_pipeline<TC_STAGES>(
        kTiles,
        [&](int st, int kt) {
            la.load(s0 + st * TC_STAGE_BYTES, kt * G::BK);
            lb.load(s0 + st * TC_STAGE_BYTES + TC_OP_BYTES, kt * G::BK);
        },
        [&](int st) {
            if constexpr (sizeof(T) == 4) {
                const float* As = reinterpret_cast<const float*>(smem + st * TC_STAGE_BYTES);
                const float* Bs = reinterpret_cast<const float*>(smem + st * TC_STAGE_BYTES + TC_OP_BYTES);
                tc_compute_tf32<TA, TB>(As, Bs, wm0, wn0, lane, acc);
            } else {
                const unsigned sa = s0 + st * TC_STAGE_BYTES;
                tc_compute_16<T, TA, TB>(sa, sa + TC_OP_BYTES, wm0, wn0, lane, acc);
            }
        });
}

#endif // __CUDA_ARCH__ >= 800

template <typename T>
__device__ __forceinline__ void tc_gemm(T* c, const T* __restrict__ a, const T* __restrict__ b,
                                        const T* __restrict__ bias, int M, int N, int K, int transA, int transB,
                                        long long strideA, long long strideB, long long strideC, float alpha,
                                        float beta, int act) {
#if __CUDA_ARCH__ >= 800
    extern __shared__ __align__(16) unsigned char mm_smem[];

    int tm, tn;
    tile_coords(tm, tn);
    const int bm = tm * TC_BM, bn = tn * TC_BN;
    const long long z = blockIdx.z;
    a += z * strideA;
    b += z * strideB;
    c += z * strideC;

    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    const int wm0 = (warp >> 1) * 64, wn0 = (warp & 1) * 64;

    float acc[4][8][4];
#pragma unroll
    for (int i = 0; i < 4; i++)
#pragma unroll
        for (int j = 0; j < 8; j++)
#pragma unroll
            for (int e = 0; e < 4; e++) acc[i][j][e] = 0.0f;

    const int sel = (transA != 0 ? 2 : 0) + (transB != 0 ? 1 : 0);
    switch (sel) {
    case 0: tc_main<T, false, false>(a, b, M, N, K, bm, bn, mm_smem, wm0, wn0, acc); break;
    case 1: tc_main<T, false, true>(a, b, M, N, K, bm, bn, mm_smem, wm0, wn0, acc); break;
    case 2: tc_main<T, true, false>(a, b, M, N, K, bm, bn, mm_smem, wm0, wn0, acc); break;
    default: tc_main<T, true, true>(a, b, M, N, K, bm, bn, mm_smem, wm0, wn0, acc); break;
    }

    // Epilogue through shared memory: stage the 128x128 f32 tile (pitch
    // TC_LDS = 136 floats: the float2 fragment stores are conflict-free),
    // then store it row-coalesced. acc[i][j] holds rows (g, g+8) of m-tile
    // i, columns (2t, 2t+1) of n-tile j.
    float* S = reinterpret_cast<float*>(mm_smem);
    __syncthreads(); // every warp is done with the pipeline's shared memory
    {
        const int g = lane >> 2, t = lane & 3;
#pragma unroll
        for (int i = 0; i < 4; i++) {
#pragma unroll
            for (int j = 0; j < 8; j++) {
                const int row = wm0 + i * 16 + g, col = wn0 + j * 8 + 2 * t;
                *reinterpret_cast<float2*>(&S[row * TC_LDS + col]) = make_float2(acc[i][j][0], acc[i][j][1]);
                *reinterpret_cast<float2*>(&S[(row + 8) * TC_LDS + col]) = make_float2(acc[i][j][2], acc[i][j][3]);
            }
        }
    }
    __syncthreads();
    const bool vecC = aligned_to(c, 4 * sizeof(T)) && N % 4 == 0;
    float bv[4];
    load_bias(bias, bn + (tid & 31) * 4, N, bv);
    store_tile<T, TC_THREADS>(
        c, S, TC_LDS, TC_BM, [=](int r) { return bm + r; }, M, N, bn, bv, alpha, beta, act, vecC);
#else
    __trap();
#endif
}

// ---------------------------------------------------------------------------
// Matrix-vector kernels: matmul_gemvR_f16, matmul_gemvR_bf16.
//
// A decode step's product of M <= R rows with a linear layer's [N, K]
// weight is bound by reading the weight once; the tile kernels give it a
// block per 128 (Hopper: 256) columns, too few blocks to keep the memory
// system busy. Here warp w of block blk computes columns n0 = 2(4·blk + w) and
// n0 + 1 for all M rows: each lane reads 16-byte chunks (8 elements) of the
// two columns' rows of b, chunk lane, lane + 32, ..., the next chunk's while
// it multiplies this one's with the M rows of a (16-byte loads, L1/L2
// resident), and the lanes' float32 sums are reduced across the warp. A
// column past N repeats column N - 1, whose sums are not stored.

constexpr int GV_WARPS = 4, GV_COLS = 2, GV_THREADS = 32 * GV_WARPS, GV_VEC = 8;

template <typename T, int R>
__device__ __forceinline__ void gemv(T* c, const T* __restrict__ a, const T* __restrict__ b,
                                     const T* __restrict__ bias, int M, int N, int K, float alpha, float beta,
                                     int act, long long blk) {
    constexpr int NC = GV_COLS;
    const int lane = threadIdx.x & 31;
    const long long n0 = (blk * GV_WARPS + (threadIdx.x >> 5)) * NC;
    if (n0 >= N) return; // whole warps
    const T* br[NC];
#pragma unroll
    for (int j = 0; j < NC; j++) br[j] = b + min(n0 + j, (long long)N - 1) * K;
    float acc[R][NC];
#pragma unroll
    for (int m = 0; m < R; m++)
#pragma unroll
        for (int j = 0; j < NC; j++) acc[m][j] = 0.0f;

    const int chunks = K / GV_VEC;
    uint4 q[NC] = {}, qn[NC] = {};
    if (lane < chunks) {
#pragma unroll
        for (int j = 0; j < NC; j++) q[j] = *reinterpret_cast<const uint4*>(br[j] + (long long)lane * GV_VEC);
    }
#pragma unroll 1
    for (int ch = lane; ch < chunks; ch += 32) {
        if (ch + 32 < chunks) {
#pragma unroll
            for (int j = 0; j < NC; j++)
                qn[j] = *reinterpret_cast<const uint4*>(br[j] + (long long)(ch + 32) * GV_VEC);
        }
        float w[NC][GV_VEC];
#pragma unroll
        for (int j = 0; j < NC; j++) widen8<T>(q[j], w[j]);
#pragma unroll
        for (int m = 0; m < R; m++) {
            if (m < M) {
                float xv[GV_VEC];
                ldx<GV_VEC>(a + (long long)m * K + (long long)ch * GV_VEC, xv);
#pragma unroll
                for (int j = 0; j < NC; j++)
#pragma unroll
                    for (int e = 0; e < GV_VEC; e++) acc[m][j] = fmaf(xv[e], w[j][e], acc[m][j]);
            }
        }
#pragma unroll
        for (int j = 0; j < NC; j++) q[j] = qn[j];
    }
#pragma unroll
    for (int m = 0; m < R; m++)
#pragma unroll
        for (int j = 0; j < NC; j++)
#pragma unroll
            for (int o = 16; o > 0; o >>= 1) acc[m][j] += __shfl_xor_sync(0xffffffffu, acc[m][j], o);
    // Every lane holds every sum: lane m·NC + j stores row m, column n0 + j.
#pragma unroll
    for (int m = 0; m < R; m++)
#pragma unroll
        for (int j = 0; j < NC; j++) {
            const long long n = n0 + j;
            if (lane == m * NC + j && m < M && n < N) {
                T* out = c + (long long)m * N + n;
                const float old = beta != 0.0f ? to_f32(*out) : 0.0f;
                const float bv = bias != nullptr ? to_f32(bias[n]) : 0.0f;
                *out = from_f32<T>(epilogue(acc[m][j], old, bv, alpha, beta, act));
            }
        }
}

} // namespace mm

// ---------------------------------------------------------------------------
// Entry points.

#define MM_PARAMS(T)                                                                                         \
    T *c, const T *__restrict__ a, const T *__restrict__ b, const T *__restrict__ bias, int M, int N, int K, \
        int transA, int transB, long long strideA, long long strideB, long long strideC, float alpha,        \
        float beta, int act
#define MM_ARGS c, a, b, bias, M, N, K, transA, transB, strideA, strideB, strideC, alpha, beta, act

// SIMT: grid (ceil(N/128), ceil(M/128), batch), block 256, no dynamic smem.
extern "C" __global__ void __launch_bounds__(mm::S_THREADS, 2) matmul_f32(MM_PARAMS(float)) {
    mm::simt_gemm<float>(MM_ARGS);
}
extern "C" __global__ void __launch_bounds__(mm::S_THREADS, 2) matmul_f16(MM_PARAMS(__half)) {
    mm::simt_gemm<__half>(MM_ARGS);
}
extern "C" __global__ void __launch_bounds__(mm::S_THREADS, 2) matmul_bf16(MM_PARAMS(__nv_bfloat16)) {
    mm::simt_gemm<__nv_bfloat16>(MM_ARGS);
}

// SIMT split-K, f32, one product (no batch): grid (ceil(N/128), ceil(M/128),
// splits), block 256, no dynamic smem; then splitk_reduce_f32 over the M·N
// outputs, any 1-D grid (a grid-stride loop), ws holding splits·M·N floats.
extern "C" __global__ void __launch_bounds__(mm::S_THREADS, 2)
    matmul_splitk_f32(float* ws, const float* __restrict__ a, const float* __restrict__ b, int M, int N, int K,
                      int transA, int transB, int kslice) {
    mm::simt_splitk<float>(ws, a, b, M, N, K, transA, transB, kslice);
}
extern "C" __global__ void splitk_reduce_f32(float* c, const float* __restrict__ ws, const float* __restrict__ bias,
                                             int M, int N, int splits, float alpha, float beta, int act) {
    mm::splitk_reduce<float>(c, ws, bias, M, N, splits, alpha, beta, act);
}
// The reduction of the Hopper kernel's slices (matmul_sm90.cu), f16 and bf16
// outputs: the same as splitk_reduce_f32.
extern "C" __global__ void splitk_reduce_f16(__half* c, const float* __restrict__ ws, const __half* __restrict__ bias,
                                             int M, int N, int splits, float alpha, float beta, int act) {
    mm::splitk_reduce<__half>(c, ws, bias, M, N, splits, alpha, beta, act);
}
extern "C" __global__ void splitk_reduce_bf16(__nv_bfloat16* c, const float* __restrict__ ws,
                                              const __nv_bfloat16* __restrict__ bias, int M, int N, int splits,
                                              float alpha, float beta, int act) {
    mm::splitk_reduce<__nv_bfloat16>(c, ws, bias, M, N, splits, alpha, beta, act);
}

// Tensor cores (sm_80+): grid (ceil(N/128), ceil(M/128), batch), block 128,
// dynamic smem 81920 bytes (set MAX_DYNAMIC_SHARED_SIZE_BYTES). See the
// preconditions at the top of the file.
extern "C" __global__ void __launch_bounds__(mm::TC_THREADS) matmul_tc_f16(MM_PARAMS(__half)) {
    mm::tc_gemm<__half>(MM_ARGS);
}
extern "C" __global__ void __launch_bounds__(mm::TC_THREADS) matmul_tc_bf16(MM_PARAMS(__nv_bfloat16)) {
    mm::tc_gemm<__nv_bfloat16>(MM_ARGS);
}
extern "C" __global__ void __launch_bounds__(mm::TC_THREADS) matmul_tf32(MM_PARAMS(float)) {
    mm::tc_gemm<float>(MM_ARGS);
}

// Matrix-vector, M <= R rows times a weight stored [N, K] (transB), one
// product: grid ceil(N/8), block 128, no dynamic smem. K % 8 == 0, a and b
// 16-byte aligned; c and bias element-aligned.
#define MM_GEMV_PARAMS(T)                                                                                  \
    T *c, const T *__restrict__ a, const T *__restrict__ b, const T *__restrict__ bias, int M, int N, int K, \
        float alpha, float beta, int act
#define MM_GEMV(R, SUF, T)                                                                                  \
    extern "C" __global__ void __launch_bounds__(mm::GV_THREADS) matmul_gemv##R##_##SUF(MM_GEMV_PARAMS(T)) { \
        mm::gemv<T, R>(c, a, b, bias, M, N, K, alpha, beta, act, blockIdx.x);                              \
    }
// Matrix-vector of M <= R rows times two or three weights (MatMulShared;
// R = 1, 2, 4: at 8 the choice of product costs registers that spill):
// product i of Ni columns from bi [Ni, K] into ci [M, Ni] (N2 = 0 for two),
// the blocks of product 0 first, then 1, then 2; no epilogue. Grid
// ceil(N0/8) + ceil(N1/8) + ceil(N2/8), block 128, no dynamic smem; the
// rest as matmul_gemvR.
#define MM_GEMV_SHARED(R, SUF, T)                                                                            \
    extern "C" __global__ void __launch_bounds__(mm::GV_THREADS)                                             \
        matmul_gemv##R##_shared_##SUF(T* c0, const T* __restrict__ b0, int N0, T* c1, const T* __restrict__ b1, \
                                      int N1, T* c2, const T* __restrict__ b2, int N2, const T* __restrict__ a,  \
                                      int M, int K) {                                                        \
        const long long g0 = (N0 + 7) / 8, g1 = (N1 + 7) / 8;                                                \
        long long blk = blockIdx.x;                                                                          \
        T* c = c0;                                                                                           \
        const T* b = b0;                                                                                     \
        int N = N0;                                                                                          \
        if (blk >= g0 + g1) {                                                                                \
            c = c2, b = b2, N = N2, blk -= g0 + g1;                                                          \
        } else if (blk >= g0) {                                                                              \
            c = c1, b = b1, N = N1, blk -= g0;                                                               \
        }                                                                                                    \
        mm::gemv<T, R>(c, a, b, nullptr, M, N, K, 1.0f, 0.0f, 0, blk);                                       \
    }
MM_GEMV(1, f16, __half)
MM_GEMV(2, f16, __half)
MM_GEMV(4, f16, __half)
MM_GEMV(8, f16, __half)
MM_GEMV(1, bf16, __nv_bfloat16)
MM_GEMV(2, bf16, __nv_bfloat16)
MM_GEMV(4, bf16, __nv_bfloat16)
MM_GEMV(8, bf16, __nv_bfloat16)
#undef MM_GEMV
MM_GEMV_SHARED(1, f16, __half)
MM_GEMV_SHARED(2, f16, __half)
MM_GEMV_SHARED(4, f16, __half)
MM_GEMV_SHARED(1, bf16, __nv_bfloat16)
MM_GEMV_SHARED(2, bf16, __nv_bfloat16)
MM_GEMV_SHARED(4, bf16, __nv_bfloat16)
#undef MM_GEMV_SHARED
