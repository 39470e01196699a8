// fp8.cu: the FP8 op group (kernels/fp8.go): scaled casts into E4M3 and
// E5M2 with the amax fused, the per-row (per-token) current-scaling cast,
// and the scaled FP8 GEMM with float32 accumulation. Semantics:
// kernels.FP8 and its CPU reference kernels/cpu/fp8.go.
//
// FP8 needs compute capability 8.9 or 9.0: the hardware conversion
// cvt.rn.satfinite.{e4m3x2,e5m2x2}.f32 and mma.sync m16n8k32 with .e4m3 /
// .e5m2 operands are sm_89+. Every kernel body is compiled only for
// __CUDA_ARCH__ >= 890: in the sm_90a cubin (Hopper) and in the
// compute_89 PTX that make kernels builds for this file alone (Ada loads it
// in place of fp8.compute_80.ptx); the compute_75 and compute_80 images
// hold __trap() stubs of the same signatures, and the Go side refuses other
// devices with kernels.ErrUnsupported before launching.
//
// Encoding (enc_fp8_sat): v = x·scale rounded to float32 (__fmul_rn), then
// cvt.rn.satfinite: round to nearest even, magnitudes beyond the largest
// finite value (infinities too) saturating to it. A NaN v gives 0x7f with a
// sign bit: scale's when it is NaN, else x's when x is NaN, else set (inf·0),
// as kernels.EncodeFP8 defines it for every backend (the processor's own
// choice between two NaN operands is not used: the CPU's depends on the
// compiler's operand order); cvt's own NaN is 0x7f whatever the sign, and
// __fmul_rn's is the canonical 0x7fffffff.
//
// Kernels (T = f32, f16, bf16: x's or out's dtype):
//
//  castfp8_T(uint8_t* q, float* amax, const T* x, const float* scale,
//            long long n, int e5m2)
//    q[i] = enc(x[i]·scale[0]) in E4M3 (e5m2 = 0) or E5M2. amax (NULL: none)
//    must hold +0 before the launch: each block's max |x| (as float bits,
//    which order as unsigned integers for non-negative floats, every NaN
//    above +Inf) is merged by atomicMax, so a NaN in x makes amax a NaN.
//    block = 256, any grid ≥ 1 (grid-stride); no dynamic shared memory.
//  castfp8_rows_T(uint8_t* q, float* scale_inv, const T* x, long long rows,
//                 int k, int e5m2)
//    one block of 256 threads per row (grid-stride over rows): the row's
//    amax, scale = fp8_max/amax (1 for amax 0, infinite or NaN;
//    FLT_MAX where the division overflows), scale_inv[row] = 1/scale,
//    q = enc(x·scale). No dynamic shared memory.
//  fp8mm_A_B_T(T* c, const uint8_t* a, const uint8_t* b, const float*
//              ascale_inv, const float* bscale_inv, const float* bias,
//              int M, int N, int K, int a_per_row, int b_per_row, int act)
//    A_B = e4m3_e4m3, e4m3_e5m2, e5m2_e4m3 (a's and b's formats): c [M, N]
//    = act(Σ_k a[m, k]·b[n, k] · (ascale_inv[m or 0]·bscale_inv[n or 0]) +
//    bias[n]), the sums in float32: by mma.sync m16n8k32 .f32 on Ada, and
//    on Hopper, which has no FP8 mma.sync (ptxas emulates it, and its
//    emulation's sums were wrong on an H100), by two m16n8k16 f16 products
//    per k32 step of the codes widened exactly to f16 (cvt.rn.f16x2.e4m3x2
//    and .e5m2x2); then each operation rounded in turn in float32 (as the
//    CPU backend), then once to T. bias may be NULL. Block tile 64x64, 64
//    bytes of K per step through one shared buffer, 4 warps of 32x32
//    (ldmatrix fragments as quant.cu's int8 kernels: the 8-bit fragments
//    of m16n8k32 are the same for .s8 and .e4m3/.e5m2). Any M, N ≥ 1 and
//    K ≥ 0: rows are read as 16-byte chunks when K % 16 == 0 and a, b are
//    16-byte aligned, else byte by byte; tiles past M, N, K are
//    zero-filled.
//    grid = (ceil(N/64), ceil(M/64)), block = 128, no dynamic shared memory.
//  fp8mm_sm90_A_B_T(T* c, const __grid_constant__ CUtensorMap tmA,
//                   const __grid_constant__ CUtensorMap tmB, const float*
//                   ascale_inv, const float* bscale_inv, const float* bias,
//                   int M, int N, int K, int a_per_row, int b_per_row,
//                   int act)
//    The Hopper (sm_90a) kernels: fp8mm_A_B_T's semantics and epilogue,
//    the sums by wgmma.mma_async m64n128k32 .f32.A.B (e4m3.e4m3,
//    e4m3.e5m2, e5m2.e4m3) from shared memory, imm-scale-a and imm-scale-b
//    1, promoted: Hopper's FP8 wgmma does not sum in float32 (on an H100,
//    without promotion, a K = 8192 product of positive values came out
//    13% low: TestFP8AccumulatorGPU), so each stage's four wgmma (128 of
//    K, the first with scale-d 0) sum in the tensor core, and once they
//    have completed their sums are added to float32 registers, as
//    DeepSeek-V3's kernels and CUTLASS's FP8 GEMMs without "fast
//    accumulation" do (and torch._scaled_mm by default). The error left is
//    the tensor core's within 128 of K, bounded in the tests by
//    fp8SM90AccErr. Tile 128×128×128 (K in bytes), 384 threads = a TMA
//    producer warpgroup and two wgmma consumer warpgroups (rows 0-63 and
//    64-127, 64 accumulators and 64 promoted sums per thread), a 6-stage
//    ring of K-major 128-byte rows in the 128-byte swizzle with
//    qmatmul_sm90.cu's descriptors (SBO 1024, the kk-th k32 slice 32·kk
//    bytes into the row), the promoted sums (the per-thread layout of the
//    wgmma accumulators) staged through shared memory (pitch 136 floats)
//    into the epilogue, each thread finishing four consecutive columns of
//    every fourth row. Tensor maps (kernels/cuda/fp8.go, fp8SM90Specs):
//    UINT8, dims {K, M} and {K, N}, boxes {128, 128}, zero fill, so the
//    tails of M, N and K add zeros.
//    grid = (ceil(M/128)·ceil(N/128)), block = 384, dynamic shared memory
//    197728 bytes (MAX_DYNAMIC_SHARED_SIZE_BYTES set). Preconditions:
//    compute capability 9.0 (compute_75/80 hold __trap() stubs); K % 16 ==
//    0, K ≥ 1; a and b 16-byte aligned; M, N ≥ 1, M + 128 and N + 128
//    within int32 (fp8.go's chooseFP8MatMul asks M ≥ 128, N ≥ 128,
//    K ≥ 128).

#include <cuda.h>
#include <stdint.h>

#include "common.cuh"
#include "sm80.cuh"
#include "sm90.cuh"

namespace f8 {

constexpr int THREADS = 256; // castfp8_T, castfp8_rows_T
constexpr int BM = 64, BN = 64, BK = 64;
constexpr int LDK = BK + 16; // shared pitch of an operand row (bytes): conflict-free ldmatrix
constexpr int MM_THREADS = 128;
static_assert(BM == 64 && BN == 64 && BK == 64 && LDK == 80 && MM_THREADS == 128 && THREADS == 256,
              "launch comment and kernels/cuda/fp8.go out of date");

// block_umax returns the largest v of the block (blockDim.x a multiple of
// 32, at most 1024) in every thread; every thread calls it. sh holds 32
// words; it may be reused after the call returns (a barrier comes first).
__device__ __forceinline__ unsigned block_umax(unsigned v, unsigned* sh) {
    v = warp_umax(v);
    const int warps = (int)blockDim.x >> 5, wid = (int)threadIdx.x >> 5;
    __syncthreads(); // sh may still be read by a previous call
    if ((threadIdx.x & 31) == 0) sh[wid] = v;
    __syncthreads();
    for (int i = 0; i < warps; i++) v = max(v, sh[i]);
    return v;
}

#if __CUDA_ARCH__ >= 890

// sign_bit is x's sign bit, read from its bits: widening an f16 or bf16
// NaN to float32 on the GPU (cvt.f32.f16) gives the canonical NaN, whose
// sign is clear whatever x's was.
__device__ __forceinline__ bool sign_bit(float x) { return __float_as_uint(x) >> 31; }
__device__ __forceinline__ bool sign_bit(__half x) { return __half_as_ushort(x) >> 15; }
__device__ __forceinline__ bool sign_bit(__nv_bfloat16 x) { return __bfloat16_as_ushort(x) >> 15; }

// enc_fp8_sat is the code of v = x·s (already rounded to float32) in E4M3
// or E5M2, xneg the sign bit of x as stored (see the file comment for the
// NaN's sign).
__device__ __forceinline__ unsigned enc_fp8_sat(float v, float x, bool xneg, float s, bool e5m2) {
    if (v != v) {
        const bool neg = s != s ? signbit(s) : x != x ? xneg : true;
        return neg ? 0xffu : 0x7fu;
    }
    unsigned short h;
    if (e5m2) {
        asm("cvt.rn.satfinite.e5m2x2.f32 %0, %1, %2;\n" : "=h"(h) : "f"(0.0f), "f"(v));
    } else {
        asm("cvt.rn.satfinite.e4m3x2.f32 %0, %1, %2;\n" : "=h"(h) : "f"(0.0f), "f"(v));
    }
    return (unsigned)h & 0xffu;
}

#endif

template <typename T>
__device__ void cast_impl(uint8_t* __restrict__ q, float* __restrict__ amax, const T* __restrict__ x,
                          const float* __restrict__ scale, long long n, int e5m2) {
#if __CUDA_ARCH__ >= 890
    __shared__ unsigned sh[32];
    const float s = scale[0];
    unsigned m = 0;
    for (long long i = grid_tid(); i < n; i += grid_stride()) {
        const T xi = x[i];
        const float xv = to_f32(xi);
        m = max(m, absbits(xv));
        q[i] = (uint8_t)enc_fp8_sat(__fmul_rn(xv, s), xv, sign_bit(xi), s, e5m2 != 0);
    }
    if (amax == nullptr) return; // uniform across the block
    m = block_umax(m, sh);
    if (threadIdx.x == 0 && m != 0) atomicMax(reinterpret_cast<unsigned*>(amax), m);
#else
    __trap();
#endif
}

template <typename T>
__device__ void cast_rows_impl(uint8_t* __restrict__ q, float* __restrict__ scale_inv, const T* __restrict__ x,
                               long long rows, int k, int e5m2) {
#if __CUDA_ARCH__ >= 890
    __shared__ unsigned sh[32];
    const float fmax = e5m2 ? 57344.0f : 448.0f;
    for (long long r = blockIdx.x; r < rows; r += gridDim.x) {
        const T* xr = x + r * k;
        uint8_t* qr = q + r * k;
        unsigned m = 0;
        for (int j = threadIdx.x; j < k; j += blockDim.x) m = max(m, absbits(to_f32(xr[j])));
        m = block_umax(m, sh);
        float s = 1.0f; // amax 0, infinite or NaN
        if (m != 0 && m < 0x7f800000u) s = fminf(__fdiv_rn(fmax, __uint_as_float(m)), 3.40282346638528859812e+38f);
        if (threadIdx.x == 0) scale_inv[r] = __fdiv_rn(1.0f, s);
        for (int j = threadIdx.x; j < k; j += blockDim.x) {
            const T xj = xr[j];
            const float xv = to_f32(xj);
            qr[j] = (uint8_t)enc_fp8_sat(__fmul_rn(xv, s), xv, sign_bit(xj), s, e5m2 != 0);
        }
    }
#else
    __trap();
#endif
}

// ---------------------------------------------------------------------------
// The GEMM.

constexpr int E4M3 = 0, E5M2 = 1;

#if __CUDA_ARCH__ >= 890

// cvt_f16x2 widens two FP8 codes of format F (the low and the high byte
// of v) exactly into two f16s (every E4M3 and E5M2 value is an f16 value).
template <int F> __device__ __forceinline__ unsigned cvt_f16x2(unsigned short v) {
    unsigned r;
    if constexpr (F == E4M3) {
        asm("cvt.rn.f16x2.e4m3x2 %0, %1;\n" : "=r"(r) : "h"(v));
    } else {
        asm("cvt.rn.f16x2.e5m2x2 %0, %1;\n" : "=r"(r) : "h"(v));
    }
    return r;
}

// mma_f8 is d += a·b for a 16x32 A fragment of format AF and a 32x8 B
// fragment of format BF (the s8 m16n8k32 layout: a0 (row g, k 4t..4t+3),
// a1 (g+8, 4t..), a2 (g, 16+4t..), a3 (g+8, 16+4t..); b0 (k 4t..4t+3,
// column g), b1 (k 16+4t..); d0, d1 (row g, columns 2t, 2t+1), d2, d3 (row
// g+8)), summed in float32.
#define F8_MMA(TYPES)                                                                       \
    asm volatile("mma.sync.aligned.m16n8k32.row.col.f32." TYPES ".f32 "                     \
                 "{%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"                  \
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])                           \
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1))
template <int AF, int BF>
__device__ __forceinline__ void mma_f8(float (&d)[4], const unsigned (&a)[4], unsigned b0, unsigned b1) {
#if __CUDA_ARCH__ >= 900
    // Hopper has no FP8 mma.sync: ptxas emulates it, and the emulation's
    // sums were wrong on an H100 (rel-err 0.48 against the float64
    // reference; CUTLASS's maintainers: the instruction is Ada's, emulated
    // on sm_90). So the codes are widened here, exactly, to f16 and summed
    // by two m16n8k16 f16 products with float32 accumulators. The k of a
    // product's fragments may be any permutation common to A and B: thread
    // t's k 4t, 4t+1 (the low halves of a0..a3, b0, b1) take f16 k 2t, 2t+1,
    // and 4t+2, 4t+3 (the high halves) take 8+2t, 9+2t.
    const auto lo = [](unsigned v) { return (unsigned short)(v & 0xffffu); };
    const auto hi = [](unsigned v) { return (unsigned short)(v >> 16); };
    const unsigned a_k0[4] = {cvt_f16x2<AF>(lo(a[0])), cvt_f16x2<AF>(lo(a[1])), cvt_f16x2<AF>(hi(a[0])),
                              cvt_f16x2<AF>(hi(a[1]))};
    mma16816(d, a_k0, cvt_f16x2<BF>(lo(b0)), cvt_f16x2<BF>(hi(b0)), __half());
    const unsigned a_k16[4] = {cvt_f16x2<AF>(lo(a[2])), cvt_f16x2<AF>(lo(a[3])), cvt_f16x2<AF>(hi(a[2])),
                               cvt_f16x2<AF>(hi(a[3]))};
    mma16816(d, a_k16, cvt_f16x2<BF>(lo(b1)), cvt_f16x2<BF>(hi(b1)), __half());
#else
    if constexpr (AF == E4M3 && BF == E4M3) {
        F8_MMA("e4m3.e4m3");
    } else if constexpr (AF == E4M3 && BF == E5M2) {
        F8_MMA("e4m3.e5m2");
    } else {
        static_assert(AF == E5M2 && BF == E4M3, "e5m2 x e5m2 is not an FP8MatMul pairing");
        F8_MMA("e5m2.e4m3");
    }
#endif
}
#undef F8_MMA

// load_tile copies rows d0.. of g [D, K], bytes k0..k0+63, into the shared
// tile s [64][LDK]: 256 chunks of 16 bytes, 2 per thread, zero outside
// [0, D) x [0, K).
__device__ __forceinline__ void load_tile(uint8_t* s, const uint8_t* __restrict__ g, int D, int K, int d0, int k0,
                                          bool vec) {
#pragma unroll
    for (int i = 0; i < 2; i++) {
        const int c = (int)threadIdx.x + i * MM_THREADS;
        const int r = c >> 2, kc = (c & 3) * 16;
        const int row = d0 + r, k = k0 + kc;
        uint4 v = make_uint4(0, 0, 0, 0);
        if (row < D) {
            const uint8_t* p = g + (long long)row * K + k;
            if (vec) {
                if (k < K) v = *reinterpret_cast<const uint4*>(p);
            } else {
                unsigned w[4] = {0, 0, 0, 0};
#pragma unroll
                for (int e = 0; e < 16; e++)
                    if (k + e < K) w[e >> 2] |= (unsigned)p[e] << (8 * (e & 3));
                v = make_uint4(w[0], w[1], w[2], w[3]);
            }
        }
        *reinterpret_cast<uint4*>(s + r * LDK + kc) = v;
    }
}

// epi_act is act_apply out of line: the epilogue's 32 unrolled elements
// per thread would otherwise inline erf and tanh 32 times per kernel.
__device__ __noinline__ float epi_act(float v, int act) { return act_apply(v, act); }

#endif // __CUDA_ARCH__ >= 890

template <int AF, int BF, typename T>
__device__ void mm_impl(T* __restrict__ c, const uint8_t* __restrict__ a, const uint8_t* __restrict__ b,
                        const float* __restrict__ ascale_inv, const float* __restrict__ bscale_inv,
                        const float* __restrict__ bias, int M, int N, int K, int a_per_row, int b_per_row, int act) {
#if __CUDA_ARCH__ >= 890
    __shared__ __align__(16) uint8_t sA[BM * LDK];
    __shared__ __align__(16) uint8_t sB[BN * LDK];
    const int bm = (int)blockIdx.y * BM, bn = (int)blockIdx.x * BN;
    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    const int wm0 = (warp >> 1) * 32, wn0 = (warp & 1) * 32;
    constexpr int MT = 2, NT = 4;
    float acc[MT][NT][4];
#pragma unroll
    for (int i = 0; i < MT; i++)
#pragma unroll
        for (int j = 0; j < NT; j++)
#pragma unroll
            for (int e = 0; e < 4; e++) acc[i][j][e] = 0.0f;

    const bool vec = K % 16 == 0 && ((uintptr_t)a & 15) == 0 && ((uintptr_t)b & 15) == 0;
    const int j4 = lane >> 3, r8 = lane & 7;
    // A: matrices (m0-7, k0-15) (m8-15, k0-15) (m0-7, k16-31) (m8-15, k16-31).
    const unsigned aoff = smem_u32(sA) + (unsigned)((wm0 + (lane & 15)) * LDK + (lane >> 4) * 16);
    // B: matrices (n0-7, k0-15) (n0-7, k16-31) (n8-15, k0-15) (n8-15, k16-31).
    const unsigned boff = smem_u32(sB) + (unsigned)((wn0 + r8 + (j4 >> 1) * 8) * LDK + (j4 & 1) * 16);
    for (int k0 = 0; k0 < K; k0 += BK) {
        __syncthreads(); // every warp is done reading the previous tile
        load_tile(sA, a, M, K, bm, k0, vec);
        load_tile(sB, b, N, K, bn, k0, vec);
        __syncthreads();
#pragma unroll
        for (int kk = 0; kk < BK / 32; kk++) {
            unsigned af[MT][4], bf[NT][2];
#pragma unroll
            for (int i = 0; i < MT; i++) ldsm_x4(af[i], aoff + i * 16 * LDK + kk * 32);
#pragma unroll
            for (int p = 0; p < NT / 2; p++) ldsm_b_pair(bf[2 * p], bf[2 * p + 1], boff + p * 16 * LDK + kk * 32);
#pragma unroll
            for (int i = 0; i < MT; i++)
#pragma unroll
                for (int j = 0; j < NT; j++) mma_f8<AF, BF>(acc[i][j], af[i], bf[j][0], bf[j][1]);
        }
    }

    // Epilogue: v = acc·(sa·sb), + bias, act, each rounded in float32 as
    // the CPU backend does (no contraction), then rounded once to T.
    const int g = lane >> 2, t = lane & 3;
#pragma unroll
    for (int i = 0; i < MT; i++) {
#pragma unroll
        for (int h = 0; h < 2; h++) {
            const int row = bm + wm0 + i * 16 + g + 8 * h;
            if (row >= M) continue;
            const float sa = ascale_inv[a_per_row ? row : 0];
#pragma unroll
            for (int j = 0; j < NT; j++) {
#pragma unroll
                for (int e = 0; e < 2; e++) {
                    const int col = bn + wn0 + j * 8 + 2 * t + e;
                    if (col >= N) continue;
                    float v = __fmul_rn(acc[i][j][2 * h + e], __fmul_rn(sa, bscale_inv[b_per_row ? col : 0]));
                    if (bias != nullptr) v = __fadd_rn(v, bias[col]);
                    c[(long long)row * N + col] = from_f32<T>(act == ACT_NONE ? v : epi_act(v, act));
                }
            }
        }
    }
#else
    __trap();
#endif
}


// ---------------------------------------------------------------------------
// The Hopper GEMM: fp8mm_sm90_A_B_T (file comment).

namespace sm90 {

constexpr int BM = 128, BN = 128, BK = 128; // BK: FP8 values, i.e. bytes
constexpr int STAGES = 6, THREADS = 384;
constexpr int A_BYTES = BM * BK;                                // 16384
constexpr int B_BYTES = BN * BK;                                // 16384
constexpr int STAGE_BYTES = A_BYTES + B_BYTES;                  // 32768
constexpr int EPI_LD = BN + 8;                                  // staging pitch (floats): conflict-free float2 stores
constexpr int SMEM = 1024 + STAGES * STAGE_BYTES + 16 * STAGES; // 197728
static_assert(SMEM == 197728, "the launch comment and fp8.go (fp8SM90Smem) are out of date");
static_assert(2 * 64 * EPI_LD * 4 <= STAGES * STAGE_BYTES, "the epilogue's staging does not fit in the stages");

#if defined(__CUDA_ARCH_FEAT_SM90_ALL)

constexpr int GROUP_M = 16; // tile-rows per group of the rasterisation
constexpr int ACC = BN / 2; // float32 accumulators per thread (m64n128)

// wgmma_f8 issues d[64×128] (+)= A[64×32]·B[32×128] in the formats AF, BF
// with float32 accumulators, A and B K-major in shared memory described by
// da and db: scale-d is acc (0: d is overwritten, 1: accumulated),
// imm-scale-a and imm-scale-b are 1 (no negation).
#define F8_WGMMA(TYPES)                                                                                       \
    asm volatile("{\n"                                                                                        \
                 ".reg .pred p;\n"                                                                            \
                 "setp.ne.b32 p, %66, 0;\n"                                                                   \
                 "wgmma.mma_async.sync.aligned.m64n128k32.f32." TYPES " " SM90_ACC64_REGS ", %64, %65, p, 1, 1;\n" \
                 "}\n"                                                                                        \
                 : SM90_ACC64_OPERANDS("+f", d)                                                                  \
                 : "l"(da), "l"(db), "r"(acc))
template <int AF, int BF>
__device__ __forceinline__ void wgmma_f8(float (&d)[ACC], uint64_t da, uint64_t db, int acc) {
    if constexpr (AF == E4M3 && BF == E4M3) {
        F8_WGMMA("e4m3.e4m3");
    } else if constexpr (AF == E4M3 && BF == E5M2) {
        F8_WGMMA("e4m3.e5m2");
    } else {
        static_assert(AF == E5M2 && BF == E4M3, "e5m2 x e5m2 is not an FP8MatMul pairing");
        F8_WGMMA("e5m2.e4m3");
    }
}
#undef F8_WGMMA

// consume runs consumer warpgroup cw (0 or 1) over the ktiles stages of the
// tile into f, promoting: each stage's four wgmma (128 of K) sum into the
// tensor core's accumulators d, the first overwriting them, and once they
// have completed d is added into f in float32 registers (the file
// comment). smem is the 1024-aligned shared base.
template <int AF, int BF>
__device__ __forceinline__ void consume(float (&f)[ACC], uint32_t smem, int ktiles, int cw) {
    const uint32_t full0 = smem + STAGES * STAGE_BYTES, empty0 = full0 + 8 * STAGES;
    const bool leader = (threadIdx.x % 128) == 0;
    float d[ACC];
#pragma unroll
    for (int i = 0; i < ACC; ++i) f[i] = d[i] = 0.0f;
    int stage = 0;
    uint32_t phase = 0;
    for (int kt = 0; kt < ktiles; ++kt) {
        sm90_mbar_wait(full0 + 8 * stage, phase);
        sm90_fence_acc(d);
        sm90_wgmma_fence();
        const uint32_t a = smem + stage * STAGE_BYTES + cw * (64 * BK), b = smem + stage * STAGE_BYTES + A_BYTES;
#pragma unroll
        for (int kk = 0; kk < BK / 32; ++kk)
            wgmma_f8<AF, BF>(d, sm90_desc(a + 32 * kk, 16, 1024), sm90_desc(b + 32 * kk, 16, 1024), kk > 0);
        sm90_wgmma_commit();
        sm90_wgmma_wait<0>();
        sm90_fence_acc(d);
        if (leader) sm90_mbar_arrive(empty0 + 8 * stage);
#pragma unroll
        for (int i = 0; i < ACC; ++i) f[i] += d[i];
        if (++stage == STAGES) {
            stage = 0;
            phase ^= 1;
        }
    }
}

// gemm is the body of fp8mm_sm90_A_B_T; see the file comment.
template <int AF, int BF, typename T>
__device__ __forceinline__ void gemm(const CUtensorMap* tmA, const CUtensorMap* tmB, T* __restrict__ c,
                                     const float* __restrict__ ascale_inv, const float* __restrict__ bscale_inv,
                                     const float* __restrict__ bias, int M, int N, int K, int a_per_row, int b_per_row,
                                     int act) {
    extern __shared__ uint8_t f8sm90_dyn[];
    const uint32_t raw = (uint32_t)__cvta_generic_to_shared(f8sm90_dyn);
    const uint32_t smem = (raw + 1023u) & ~1023u;
    const uint32_t full0 = smem + STAGES * STAGE_BYTES;
    const uint32_t empty0 = full0 + 8 * STAGES;

    int m0, n0;
    sm90_tile_origin<BM, BN, GROUP_M>(M, N, m0, n0);
    const int ktiles = (K + BK - 1) / BK;
    sm90_pipeline_init<STAGES>(full0, empty0);

    const int wg = threadIdx.x / 128;
    if (wg == 0) {
        sm90_produce<STAGES, STAGE_BYTES, BK>(tmA, tmB, smem, full0, empty0, ktiles,
                                              [&](uint32_t a, uint32_t full, int k0) {
                                                  sm90_tma_load_2d(a, tmA, full, k0, m0);
                                                  sm90_tma_load_2d(a + A_BYTES, tmB, full, k0, n0);
                                              });
        return;
    }

    asm volatile("setmaxnreg.inc.sync.aligned.u32 232;\n" ::: "memory");
    const int cw = wg - 1;
    float d[ACC];
    consume<AF, BF>(d, smem, ktiles, cw);

    // Epilogue through shared memory once both consumers are done with
    // every stage: consumer cw stages its 64×128 float block with a row
    // pitch of EPI_LD floats.
    asm volatile("bar.sync 1, 256;\n" ::: "memory");
    asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
    float* tile = reinterpret_cast<float*>(f8sm90_dyn + (smem - raw)) + cw * (64 * EPI_LD);
    {
        // Warp w holds rows 16w + lane/4 (d[4j], d[4j+1]) and
        // 16w + lane/4 + 8 (d[4j+2], d[4j+3]) at columns 8j + 2·(lane%4) + {0, 1}.
        const int lane = threadIdx.x % 32, warp = (threadIdx.x % 128) / 32;
        float* q = tile + (warp * 16 + lane / 4) * EPI_LD + 2 * (lane % 4);
#pragma unroll
        for (int j = 0; j < BN / 8; ++j) {
#pragma unroll
            for (int h = 0; h < 2; ++h)
                *reinterpret_cast<float2*>(q + 8 * h * EPI_LD + 8 * j) = make_float2(d[4 * j + 2 * h], d[4 * j + 2 * h + 1]);
        }
    }
    asm volatile("bar.sync %0, 128;\n" ::"r"(2 + cw) : "memory");

    // Thread t finishes columns col..col+3 of rows t/32, t/32 + 4, … of the
    // block with mm_impl's epilogue: v = acc·(sa·sb), + bias, act, each
    // rounded in float32, then once to T.
    constexpr int TPR = BN / 4; // threads per row
    const int t = threadIdx.x % 128, scol = 4 * (t % TPR), col = n0 + scol;
    if (col >= N) return;
    const int nc = min(4, N - col);
    float sbv[4], bv[4];
#pragma unroll
    for (int e = 0; e < 4; ++e) {
        sbv[e] = e < nc ? bscale_inv[b_per_row ? col + e : 0] : 0.0f;
        bv[e] = (e < nc && bias != nullptr) ? bias[col + e] : 0.0f;
    }
    const int r0 = m0 + cw * 64;
    const float* q = tile + scol;
    for (int r = t / TPR; r < 64; r += 128 / TPR) {
        const int row = r0 + r;
        if (row >= M) break;
        const float4 s = *reinterpret_cast<const float4*>(q + r * EPI_LD);
        const float acc[4] = {s.x, s.y, s.z, s.w};
        const float sa = ascale_inv[a_per_row ? row : 0];
        T* out = c + (long long)row * N + col;
#pragma unroll
        for (int e = 0; e < 4; ++e) {
            if (e >= nc) break;
            float v = __fmul_rn(acc[e], __fmul_rn(sa, sbv[e]));
            if (bias != nullptr) v = __fadd_rn(v, bv[e]);
            out[e] = from_f32<T>(act == ACT_NONE ? v : epi_act(v, act));
        }
    }
}

#endif // __CUDA_ARCH_FEAT_SM90_ALL

} // namespace sm90

} // namespace f8

#define F8_CAST(NAME, T)                                                                                          \
    extern "C" __global__ void __launch_bounds__(f8::THREADS)                                                     \
        castfp8_##NAME(uint8_t* q, float* amax, const T* x, const float* scale, long long n, int e5m2) {          \
        f8::cast_impl<T>(q, amax, x, scale, n, e5m2);                                                             \
    }                                                                                                             \
    extern "C" __global__ void __launch_bounds__(f8::THREADS)                                                     \
        castfp8_rows_##NAME(uint8_t* q, float* scale_inv, const T* x, long long rows, int k, int e5m2) {          \
        f8::cast_rows_impl<T>(q, scale_inv, x, rows, k, e5m2);                                                    \
    }
F8_CAST(f32, float)
F8_CAST(f16, __half)
F8_CAST(bf16, __nv_bfloat16)
#undef F8_CAST

#define F8_MM(AN, BN_, AF, BF, NAME, T)                                                                           \
    extern "C" __global__ void __launch_bounds__(f8::MM_THREADS) fp8mm_##AN##_##BN_##_##NAME(                     \
        T* c, const uint8_t* a, const uint8_t* b, const float* ascale_inv, const float* bscale_inv,               \
        const float* bias, int M, int N, int K, int a_per_row, int b_per_row, int act) {                          \
        f8::mm_impl<AF, BF, T>(c, a, b, ascale_inv, bscale_inv, bias, M, N, K, a_per_row, b_per_row, act);        \
    }
#define F8_MM_OUTS(AN, BN_, AF, BF)                                                                               \
    F8_MM(AN, BN_, AF, BF, f32, float)                                                                            \
    F8_MM(AN, BN_, AF, BF, f16, __half)                                                                           \
    F8_MM(AN, BN_, AF, BF, bf16, __nv_bfloat16)
F8_MM_OUTS(e4m3, e4m3, f8::E4M3, f8::E4M3)
F8_MM_OUTS(e4m3, e5m2, f8::E4M3, f8::E5M2)
F8_MM_OUTS(e5m2, e4m3, f8::E5M2, f8::E4M3)
#undef F8_MM_OUTS
#undef F8_MM

// F8_SM90 defines fp8mm_sm90_A_B_T; see the file comment for the launch
// configuration and preconditions.
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
#define F8_SM90_BODY(AF, BF, T)                                                                                   \
    f8::sm90::gemm<AF, BF, T>(&tmA, &tmB, c, ascale_inv, bscale_inv, bias, M, N, K, a_per_row, b_per_row, act);
#else
#define F8_SM90_BODY(AF, BF, T) __trap();
#endif
#define F8_SM90(AN, BN_, AF, BF, NAME, T)                                                                         \
    extern "C" __global__ void __launch_bounds__(f8::sm90::THREADS, 1) fp8mm_sm90_##AN##_##BN_##_##NAME(          \
        T* c, const __grid_constant__ CUtensorMap tmA, const __grid_constant__ CUtensorMap tmB,                   \
        const float* ascale_inv, const float* bscale_inv, const float* bias, int M, int N, int K, int a_per_row,  \
        int b_per_row, int act) {                                                                                 \
        F8_SM90_BODY(AF, BF, T)                                                                                   \
    }
#define F8_SM90_OUTS(AN, BN_, AF, BF)                                                                             \
    F8_SM90(AN, BN_, AF, BF, f32, float)                                                                          \
    F8_SM90(AN, BN_, AF, BF, f16, __half)                                                                         \
    F8_SM90(AN, BN_, AF, BF, bf16, __nv_bfloat16)
F8_SM90_OUTS(e4m3, e4m3, f8::E4M3, f8::E4M3)
F8_SM90_OUTS(e4m3, e5m2, f8::E4M3, f8::E5M2)
F8_SM90_OUTS(e5m2, e4m3, f8::E5M2, f8::E4M3)
#undef F8_SM90_OUTS
#undef F8_SM90
#undef F8_SM90_BODY
