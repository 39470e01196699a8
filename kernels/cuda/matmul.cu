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
// (it may hold NaN). alpha == 0 is taken as 1 (MatMulParams: "0 means 1").
// Products accumulate in float32; f16/bf16 round once on store (RNE).
// act: 0 none, 1 relu, 2 gelu (erf), 3 gelu tanh, 4 silu (common.cuh).
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
//      grid  = (ceil(N/128), ceil(M/128), batch), block = (256, 1, 1),
//      dynamic shared memory 0 (16896 bytes static).
//
//  matmul_tc_f16, matmul_tc_bf16 (sm_80+): tensor cores, mma.sync m16n8k16
//    with f32 accumulation, ldmatrix, 4-stage cp.async pipeline.
//    128x128x32 block tile, 4 warps of 64x64, padded shared memory.
//  matmul_tf32 (sm_80+): f32 in/out on TF32 tensor cores, mma.sync m16n8k8
//    (inputs rounded with cvt.rna.tf32.f32), same pipeline with a 128x128x16
//    block tile.
//    All four transA/transB combinations are supported by all three.
//      grid  = (ceil(N/128), ceil(M/128), batch), block = (128, 1, 1),
//      dynamic shared memory = 81920 bytes: needs
//      cuFuncSetAttribute(CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
//      81920) once per function (and preferably
//      CU_FUNC_ATTRIBUTE_PREFERRED_SHARED_MEMORY_CARVEOUT = 100 so two
//      blocks fit per SM).
//    Preconditions (the launcher falls back to matmul_T otherwise):
//      compute capability ≥ 8.0;
//      f16/bf16: M % 8 == 0, N % 8 == 0, K % 8 == 0;
//      tf32:     M % 4 == 0, N % 4 == 0, K % 4 == 0;
//      a, b, c 16-byte aligned and strideA, strideB, strideC multiples of 8
//      elements (f16/bf16) or 4 elements (tf32), so that every batch's
//      matrices are 16-byte aligned too; bias needs only element alignment.
//    Partial tiles at the M, N and K edges are handled (zero-filled loads,
//    masked stores) within those preconditions. On targets below sm_80 the
//    tensor-core kernels exist but trap.
//
// Blocks are rasterised in groups of 8 block rows (M) so that neighbouring
// blocks share A and B panels in L2; the grid shape is the plain one above.

#include "common.cuh"

namespace mm {

// ---------------------------------------------------------------------------
// Shared helpers.

__device__ __forceinline__ bool aligned_to(const void* p, unsigned bytes) {
    return ((uintptr_t)p & (uintptr_t)(bytes - 1)) == 0;
}

// tile_coords maps the linear block index to (block row, block column) in
// groups of GROUP block rows, a bijection onto gridDim.y x gridDim.x.
__device__ __forceinline__ void tile_coords(int& tm, int& tn) {
    constexpr int GROUP = 8;
    const int gx = (int)gridDim.x, gy = (int)gridDim.y;
    const int pid = (int)blockIdx.y * gx + (int)blockIdx.x;
    const int per_group = GROUP * gx;
    const int group = pid / per_group;
    const int first = group * GROUP;
    const int size = min(gy - first, GROUP);
    const int in = pid - group * per_group;
    tm = first + in % size;
    tn = in / size;
}

// epilogue returns act(alpha·acc + beta·old + bias) for one element; old is
// only used when beta != 0 (the caller only reads it then).
__device__ __forceinline__ float epilogue(float acc, float old, float bv, float alpha, float beta, int act) {
    float v = alpha * acc;
    if (beta != 0.0f) v = fmaf(beta, old, v);
    v += bv;
    return act_apply(v, act);
}

// 4-element vector load/store between T memory and float registers. p must
// be aligned to 4·sizeof(T).
__device__ __forceinline__ void ld4(const float* p, float (&v)[4]) {
    const float4 x = *reinterpret_cast<const float4*>(p);
    v[0] = x.x; v[1] = x.y; v[2] = x.z; v[3] = x.w;
}
__device__ __forceinline__ void ld4(const __half* p, float (&v)[4]) {
    const uint2 x = *reinterpret_cast<const uint2*>(p);
    v[0] = __half2float(__ushort_as_half((unsigned short)(x.x & 0xffffu)));
    v[1] = __half2float(__ushort_as_half((unsigned short)(x.x >> 16)));
    v[2] = __half2float(__ushort_as_half((unsigned short)(x.y & 0xffffu)));
    v[3] = __half2float(__ushort_as_half((unsigned short)(x.y >> 16)));
}
__device__ __forceinline__ void ld4(const __nv_bfloat16* p, float (&v)[4]) {
    const uint2 x = *reinterpret_cast<const uint2*>(p);
    v[0] = __uint_as_float(x.x << 16);
    v[1] = __uint_as_float(x.x & 0xffff0000u);
    v[2] = __uint_as_float(x.y << 16);
    v[3] = __uint_as_float(x.y & 0xffff0000u);
}
__device__ __forceinline__ unsigned bits16(__half h) { return (unsigned)__half_as_ushort(h); }
__device__ __forceinline__ unsigned bits16(__nv_bfloat16 h) { return (unsigned)__bfloat16_as_ushort(h); }

__device__ __forceinline__ void st4(float* p, const float (&v)[4]) {
    *reinterpret_cast<float4*>(p) = make_float4(v[0], v[1], v[2], v[3]);
}
template <typename T> __device__ __forceinline__ void st4(T* p, const float (&v)[4]) {
    uint2 x;
    x.x = bits16(from_f32<T>(v[0])) | (bits16(from_f32<T>(v[1])) << 16);
    x.y = bits16(from_f32<T>(v[2])) | (bits16(from_f32<T>(v[3])) << 16);
    *reinterpret_cast<uint2*>(p) = x;
}

// 2-element load/store; p aligned to 2·sizeof(T).
__device__ __forceinline__ void ld2(const float* p, float& v0, float& v1) {
    const float2 x = *reinterpret_cast<const float2*>(p);
    v0 = x.x; v1 = x.y;
}
__device__ __forceinline__ void ld2(const __half* p, float& v0, float& v1) {
    const unsigned x = *reinterpret_cast<const unsigned*>(p);
    v0 = __half2float(__ushort_as_half((unsigned short)(x & 0xffffu)));
    v1 = __half2float(__ushort_as_half((unsigned short)(x >> 16)));
}
__device__ __forceinline__ void ld2(const __nv_bfloat16* p, float& v0, float& v1) {
    const unsigned x = *reinterpret_cast<const unsigned*>(p);
    v0 = __uint_as_float(x << 16);
    v1 = __uint_as_float(x & 0xffff0000u);
}
__device__ __forceinline__ void st2(float* p, float v0, float v1) {
    *reinterpret_cast<float2*>(p) = make_float2(v0, v1);
}
template <typename T> __device__ __forceinline__ void st2(T* p, float v0, float v1) {
    *reinterpret_cast<unsigned*>(p) = bits16(from_f32<T>(v0)) | (bits16(from_f32<T>(v1)) << 16);
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

// gload4 loads base[row·ld + col .. +3] into v, zero outside
// [0,rows) x [0,cols). CHECK=false: in bounds and vectorisable (no checks).
// vec: base and ld allow a 4-element vector load at any col % 4 == 0.
template <typename T, bool CHECK>
__device__ __forceinline__ void gload4(const T* __restrict__ base, int row, int rows, int ld, int col, int cols,
                                       bool vec, float (&v)[4]) {
    if (!CHECK) {
        ld4(base + (long long)row * ld + col, v);
        return;
    }
    v[0] = v[1] = v[2] = v[3] = 0.0f;
    if (row < rows) {
        const T* p = base + (long long)row * ld;
        if (vec && col + 3 < cols) {
            ld4(p + col, v);
        } else {
#pragma unroll
            for (int i = 0; i < 4; i++)
                if (col + i < cols) v[i] = to_f32(p[col + i]);
        }
    }
}

// simt_main accumulates the block tile (bm, bn) of op(A)·op(B) into acc.
// acc[i][j]: row bm + (i<4 ? 4tr+i : 64+4tr+i-4), column likewise with tc.
template <typename T, bool TA, bool TB, bool CHECK>
__device__ __forceinline__ void simt_main(const T* __restrict__ a, const T* __restrict__ b, int M, int N, int K,
                                          int bm, int bn, bool vecA, bool vecB, float* As, float* Bs, int tr,
                                          int tc, float (&acc)[8][8]) {
    const int tid = threadIdx.x;
    float ra[4], rb[4];

    // Global → registers. A [M,K]: thread loads row m = tid/2, k = 4(tid%2)
    // .. +3; A [K,M]: row k = tid/32, m = 4(tid%32) .. +3. B likewise.
    auto load = [&](int k0) {
        if (!TA)
            gload4<T, CHECK>(a, bm + (tid >> 1), M, K, k0 + (tid & 1) * 4, K, vecA, ra);
        else
            gload4<T, CHECK>(a, k0 + (tid >> 5), K, M, bm + (tid & 31) * 4, M, vecA, ra);
        if (!TB)
            gload4<T, CHECK>(b, k0 + (tid >> 5), K, N, bn + (tid & 31) * 4, N, vecB, rb);
        else
            gload4<T, CHECK>(b, bn + (tid >> 1), N, K, k0 + (tid & 1) * 4, K, vecB, rb);
    };
    // Registers → shared (k-major).
    auto store = [&](float* as, float* bs) {
        if (!TA) {
            const int m = tid >> 1, k = (tid & 1) * 4;
#pragma unroll
            for (int i = 0; i < 4; i++) as[(k + i) * S_LD + m] = ra[i];
        } else {
            const int k = tid >> 5, m = (tid & 31) * 4;
            *reinterpret_cast<float4*>(&as[k * S_LD + m]) = make_float4(ra[0], ra[1], ra[2], ra[3]);
        }
        if (!TB) {
            const int k = tid >> 5, n = (tid & 31) * 4;
            *reinterpret_cast<float4*>(&bs[k * S_LD + n]) = make_float4(rb[0], rb[1], rb[2], rb[3]);
        } else {
            const int n = tid >> 1, k = (tid & 1) * 4;
#pragma unroll
            for (int i = 0; i < 4; i++) bs[(k + i) * S_LD + n] = rb[i];
        }
    };

    load(0);
    store(As, Bs);
    __syncthreads();

    int buf = 0;
    for (int k0 = 0; k0 < K; k0 += S_BK) {
        const bool more = k0 + S_BK < K;
        if (more) load(k0 + S_BK); // in flight during the FMAs below

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

template <typename T>
__device__ __forceinline__ void simt_gemm(T* c, const T* __restrict__ a, const T* __restrict__ b,
                                          const T* __restrict__ bias, int M, int N, int K, int transA, int transB,
                                          long long strideA, long long strideB, long long strideC, float alpha,
                                          float beta, int act) {
    __shared__ __align__(16) float As[2 * S_TILE];
    __shared__ __align__(16) float Bs[2 * S_TILE];

    int tm, tn;
    tile_coords(tm, tn);
    const int bm = tm * S_BM, bn = tn * S_BN;
    const long long z = blockIdx.z;
    a += z * strideA;
    b += z * strideB;
    c += z * strideC;
    if (alpha == 0.0f) alpha = 1.0f;

    const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;
    const int tr = (warp >> 1) * 4 + (lane >> 3); // 0..15
    const int tc = (warp & 1) * 8 + (lane & 7);   // 0..15

    const bool ta = transA != 0, tb = transB != 0;
    const bool vecA = ((ta ? M : K) % 4 == 0) && aligned_to(a, 4 * sizeof(T));
    const bool vecB = ((tb ? K : N) % 4 == 0) && aligned_to(b, 4 * sizeof(T));
    const bool fast = vecA && vecB && M % S_BM == 0 && N % S_BN == 0 && K % S_BK == 0 && K > 0;

    float acc[8][8];
#pragma unroll
    for (int i = 0; i < 8; i++)
#pragma unroll
        for (int j = 0; j < 8; j++) acc[i][j] = 0.0f;

    const int sel = (ta ? 2 : 0) + (tb ? 1 : 0);
    if (fast) {
        switch (sel) {
        case 0: simt_main<T, false, false, false>(a, b, M, N, K, bm, bn, vecA, vecB, As, Bs, tr, tc, acc); break;
        case 1: simt_main<T, false, true, false>(a, b, M, N, K, bm, bn, vecA, vecB, As, Bs, tr, tc, acc); break;
        case 2: simt_main<T, true, false, false>(a, b, M, N, K, bm, bn, vecA, vecB, As, Bs, tr, tc, acc); break;
        default: simt_main<T, true, true, false>(a, b, M, N, K, bm, bn, vecA, vecB, As, Bs, tr, tc, acc); break;
        }
    } else {
        switch (sel) {
        case 0: simt_main<T, false, false, true>(a, b, M, N, K, bm, bn, vecA, vecB, As, Bs, tr, tc, acc); break;
        case 1: simt_main<T, false, true, true>(a, b, M, N, K, bm, bn, vecA, vecB, As, Bs, tr, tc, acc); break;
        case 2: simt_main<T, true, false, true>(a, b, M, N, K, bm, bn, vecA, vecB, As, Bs, tr, tc, acc); break;
        default: simt_main<T, true, true, true>(a, b, M, N, K, bm, bn, vecA, vecB, As, Bs, tr, tc, acc); break;
        }
    }

    // Epilogue: 8 rows x 2 groups of 4 consecutive columns per thread.
    const bool vecC = (N % 4 == 0) && aligned_to(c, 4 * sizeof(T));
#pragma unroll
    for (int i = 0; i < 8; i++) {
        const int row = bm + (i < 4 ? tr * 4 + i : 64 + tr * 4 + (i - 4));
        if (row >= M) continue;
        T* crow = c + (long long)row * N;
#pragma unroll
        for (int h = 0; h < 2; h++) {
            const int col = bn + h * 64 + tc * 4;
            if (col >= N) continue;
            float v[4];
            if (vecC && col + 3 < N) {
                float old[4] = {0.0f, 0.0f, 0.0f, 0.0f};
                if (beta != 0.0f) ld4(crow + col, old);
#pragma unroll
                for (int e = 0; e < 4; e++) {
                    const float bv = bias != nullptr ? to_f32(bias[col + e]) : 0.0f;
                    v[e] = epilogue(acc[i][h * 4 + e], old[e], bv, alpha, beta, act);
                }
                st4(crow + col, v);
            } else {
#pragma unroll
                for (int e = 0; e < 4; e++) {
                    if (col + e >= N) break;
                    const float old = beta != 0.0f ? to_f32(crow[col + e]) : 0.0f;
                    const float bv = bias != nullptr ? to_f32(bias[col + e]) : 0.0f;
                    crow[col + e] = from_f32<T>(epilogue(acc[i][h * 4 + e], old, bv, alpha, beta, act));
                }
            }
        }
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

template <typename T> struct TcGeom {
    static constexpr int EPC = 16 / (int)sizeof(T); // elements per 16-byte chunk
    static constexpr int BK = 64 / (int)sizeof(T);  // K per stage
    static constexpr int LDK = BK + EPC;            // pitch of a k-major tile
    static constexpr int LDX = 128 + 8;             // pitch of an mn-major tile
    static_assert(128 * LDK * (int)sizeof(T) <= TC_OP_BYTES, "k-major tile too big");
    static_assert(BK * LDX * (int)sizeof(T) <= TC_OP_BYTES, "mn-major tile too big");
};

#if __CUDA_ARCH__ >= 800

__device__ __forceinline__ unsigned smem_u32(const void* p) { return (unsigned)__cvta_generic_to_shared(p); }

// cp_async16 copies 16 bytes global → shared, or writes 16 zero bytes when
// !ok (src-size 0: nothing is read; src is still a valid address).
__device__ __forceinline__ void cp_async16(void* dst, const void* src, bool ok) {
    const int n = ok ? 16 : 0;
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(smem_u32(dst)), "l"(src), "r"(n)
                 : "memory");
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::: "memory"); }
template <int N> __device__ __forceinline__ void cp_async_wait() {
    asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory");
}

__device__ __forceinline__ void ldsm_x4(unsigned (&r)[4], const void* p) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(smem_u32(p)));
}
__device__ __forceinline__ void ldsm_x4_trans(unsigned (&r)[4], const void* p) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(smem_u32(p)));
}

__device__ __forceinline__ void mma16816(float (&d)[4], const unsigned (&a)[4], unsigned b0, unsigned b1,
                                         __half) {
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 "
                 "{%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}
__device__ __forceinline__ void mma16816(float (&d)[4], const unsigned (&a)[4], unsigned b0, unsigned b1,
                                         __nv_bfloat16) {
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 "
                 "{%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}
__device__ __forceinline__ void mma1688_tf32(float (&d)[4], const unsigned (&a)[4], unsigned b0, unsigned b1) {
    asm volatile("mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 "
                 "{%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}
__device__ __forceinline__ unsigned tf32(float x) {
    unsigned u;
    asm("cvt.rna.tf32.f32 %0, %1;\n" : "=r"(u) : "f"(x));
    return u;
}

// tc_load_operand issues the cp.async copies of one operand tile for one
// stage: 512 chunks of 16 bytes, 4 per thread. g is stored [D][K] when
// KMAJOR (row d, K contiguous), else [K][D]; the tile covers d0..d0+127 and
// k0..k0+BK-1. Chunks outside [0,D) x [0,K) are zero-filled; the
// preconditions (D and K multiples of EPC where they are the contiguous
// dimension) make every chunk entirely inside or entirely outside.
template <typename T, bool KMAJOR>
__device__ __forceinline__ void tc_load_operand(T* s, const T* __restrict__ g, int D, int K, int d0, int k0,
                                                int tid) {
    using G = TcGeom<T>;
#pragma unroll
    for (int i = 0; i < 4; i++) {
        const int q = tid + i * TC_THREADS; // 0..511
        int gd, gk;
        long long off;
        T* dst;
        if (KMAJOR) {
            const int r = q >> 2, cc = (q & 3) * G::EPC; // 128 rows x 4 chunks
            gd = d0 + r;
            gk = k0 + cc;
            off = (long long)gd * K + gk;
            dst = s + r * G::LDK + cc;
        } else {
            constexpr int CPR = 128 / G::EPC; // chunks per row: 16 or 32
            const int r = q / CPR, cc = (q % CPR) * G::EPC; // BK rows x CPR chunks
            gk = k0 + r;
            gd = d0 + cc;
            off = (long long)gk * D + gd;
            dst = s + r * G::LDX + cc;
        }
        const bool ok = gd < D && gk < K;
        cp_async16(dst, ok ? g + off : g, ok);
    }
}

// tc_compute_16 runs one stage (BK = 32) of f16/bf16 MMAs for this warp.
template <typename T, bool TA, bool TB>
__device__ __forceinline__ void tc_compute_16(const T* As, const T* Bs, int wm0, int wn0, int lane,
                                              float (&acc)[4][8][4]) {
    using G = TcGeom<T>;
    const int j4 = lane >> 3, r8 = lane & 7; // ldmatrix: matrix index and row
#pragma unroll
    for (int kk = 0; kk < G::BK / 16; kk++) {
        unsigned af[4][4], bf[8][2];
#pragma unroll
        for (int i = 0; i < 4; i++) {
            if (!TA) {
                // As[m][k]: matrices (m0-7,k0-7) (m8-15,k0-7) (m0-7,k8-15) (m8-15,k8-15)
                const int row = wm0 + i * 16 + (lane & 15);
                const int col = kk * 16 + (lane >> 4) * 8;
                ldsm_x4(af[i], As + row * G::LDK + col);
            } else {
                // As[k][m], transposed on load: matrix j4 covers
                // k = 8(j4/2).., m = 8(j4%2)..
                const int krow = kk * 16 + r8 + (j4 >> 1) * 8;
                const int mcol = wm0 + i * 16 + (j4 & 1) * 8;
                ldsm_x4_trans(af[i], As + krow * G::LDX + mcol);
            }
        }
#pragma unroll
        for (int p = 0; p < 4; p++) {
            unsigned r[4];
            if (TB) {
                // Bs[n][k]: matrices (n0-7,k0-7) (n0-7,k8-15) (n8-15,k0-7) (n8-15,k8-15)
                const int nrow = wn0 + p * 16 + r8 + (j4 >> 1) * 8;
                const int kcol = kk * 16 + (j4 & 1) * 8;
                ldsm_x4(r, Bs + nrow * G::LDK + kcol);
            } else {
                // Bs[k][n], transposed on load: matrix j4 covers
                // k = 8(j4%2).., n = 8(j4/2)..
                const int krow = kk * 16 + r8 + (j4 & 1) * 8;
                const int ncol = wn0 + p * 16 + (j4 >> 1) * 8;
                ldsm_x4_trans(r, Bs + krow * G::LDX + ncol);
            }
            bf[2 * p][0] = r[0];
            bf[2 * p][1] = r[1];
            bf[2 * p + 1][0] = r[2];
            bf[2 * p + 1][1] = r[3];
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

    auto load = [&](int stage, int kt) {
        unsigned char* s = smem + stage * TC_STAGE_BYTES;
        tc_load_operand<T, !TA>(reinterpret_cast<T*>(s), a, M, K, bm, kt * G::BK, tid);
        tc_load_operand<T, TB>(reinterpret_cast<T*>(s + TC_OP_BYTES), b, N, K, bn, kt * G::BK, tid);
    };

    // Prologue: stages 0..S-2. One commit group per stage, even if empty, so
    // that group kt always holds tile kt.
#pragma unroll
    for (int s = 0; s < TC_STAGES - 1; s++) {
        if (s < kTiles) load(s, s);
        cp_async_commit();
    }
    for (int kt = 0; kt < kTiles; kt++) {
        // Groups committed so far: S-1+kt; at most S-2 pending means tiles
        // 0..kt have landed (for this thread's copies; the barrier makes
        // everyone's visible and also ends every warp's reads of tile kt-1).
        cp_async_wait<TC_STAGES - 2>();
        __syncthreads();
        const int nt = kt + TC_STAGES - 1; // goes to stage (kt-1)%S, free now
        if (nt < kTiles) load(nt % TC_STAGES, nt);
        cp_async_commit();

        const unsigned char* s = smem + (kt % TC_STAGES) * TC_STAGE_BYTES;
        const T* As = reinterpret_cast<const T*>(s);
        const T* Bs = reinterpret_cast<const T*>(s + TC_OP_BYTES);
        if constexpr (sizeof(T) == 4)
            tc_compute_tf32<TA, TB>(As, Bs, wm0, wn0, lane, acc);
        else
            tc_compute_16<T, TA, TB>(As, Bs, wm0, wn0, lane, acc);
    }
    cp_async_wait<0>(); // only empty groups remain; drain before exit
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
    if (alpha == 0.0f) alpha = 1.0f;

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

    // Epilogue straight from the accumulators: acc[i][j] = rows
    // (g, g+8) of m-tile i, columns (2t, 2t+1) of n-tile j. N is even and
    // col is even, so col < N implies col+1 < N; pairs are 2-element aligned.
    const int g = lane >> 2, t = lane & 3;
#pragma unroll
    for (int i = 0; i < 4; i++) {
#pragma unroll
        for (int h = 0; h < 2; h++) {
            const int row = bm + wm0 + i * 16 + h * 8 + g;
            if (row >= M) continue;
            T* crow = c + (long long)row * N;
#pragma unroll
            for (int j = 0; j < 8; j++) {
                const int col = bn + wn0 + j * 8 + 2 * t;
                if (col >= N) continue;
                float o0 = 0.0f, o1 = 0.0f;
                if (beta != 0.0f) ld2(crow + col, o0, o1);
                float b0 = 0.0f, b1 = 0.0f;
                if (bias != nullptr) {
                    b0 = to_f32(bias[col]);
                    b1 = to_f32(bias[col + 1]);
                }
                st2(crow + col, epilogue(acc[i][j][2 * h], o0, b0, alpha, beta, act),
                    epilogue(acc[i][j][2 * h + 1], o1, b1, alpha, beta, act));
            }
        }
    }
#else
    __trap();
#endif
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
