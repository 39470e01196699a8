// qmatmul_sm90.cu: the Hopper (sm_90a) kernels of QMatMul (kernels.Quant):
// int8 a [M, K] times bᵀ, b [N, K], summed exactly in int32 by
// wgmma.mma_async m64n256k32 .s32.s8.s8 from shared memory, with the fused
// epilogue of quant.cu's kernels (quant.cuh). The CTA is matmul_sm90.cu's
// warp-specialised producer/consumer design, with its shared-memory ring and
// byte layout (the primitives are in sm90.cuh). The bodies exist only in the
// sm_90a image; the compute_75 and compute_80 PTX hold the same kernels as
// __trap() stubs (the Go side launches them only on compute capability 9.0).
//
// Kernels qmatmul_sm90_T, T = f32, f16, bf16, int8, i32 (the out dtype):
//   (T* c, const __grid_constant__ CUtensorMap tmA, const __grid_constant__
//    CUtensorMap tmB, const float* ascale, const float* bscale,
//    const float* bias, const float* out_scale, const T* residual, int M,
//    int N, int K, int ldc, int a_per_row, int b_per_row, int act)
// are quant.cu's qmatmul_*_T with the operands a and b given by their tensor
// maps, and the same semantics: the first N columns of c [M, ldc] receive
//   i32:   acc (the scales, bias, out_scale and residual are not read);
//   float: act(float(acc)·(ascale[m]·bscale[n]) + bias[n] + residual[m, n])
//          in float32, each operation rounded in turn, then rounded once to
//          T; bias and residual may be NULL, the residual may be c;
//   int8:  that value without a residual, requantized with out_scale[0].
// The int32 sums are exact: no .satfinite, and K ≤ kernels.QMatMulMaxK keeps
// every sum of K products of int8 values inside int32.
//
// CTA: tile BM×BN×BK = 128×256×128 (BK counts int8 values, i.e. bytes),
// 384 threads = 3 warpgroups.
//   warpgroup 0  producer: setmaxnreg.dec to 40; one thread waits for a free
//                stage (empty mbarrier), posts the stage's byte count
//                (arrive.expect_tx on the full mbarrier) and issues the TMA
//                loads of the A tile and the B tile.
//   warpgroups 1, 2  consumers: setmaxnreg.inc to 232; consumer c computes
//                rows [64c, 64c+64) of the tile: per stage it waits on the
//                full mbarrier, issues 4 wgmma m64n256k32 (K = 4×32), commits,
//                waits until at most this stage's group is in flight, and
//                releases the previous stage (one arrive per warpgroup on its
//                empty mbarrier, count 2). Epilogue: once both consumers are
//                done with every stage, each stages its 64×256 int32 block in
//                shared memory (row pitch EPI_LD = 264 ints), then each of its
//                128 threads finishes four consecutive columns (4·(t%64)..)
//                of rows t/64, t/64 + 2, …: a warp stores 128 consecutive
//                columns of one row, through qk::Out<T>::put4.
//
// Shared memory (dynamic, base rounded up to 1024 bytes, which the 128-byte
// swizzle needs): STAGES = 4 × (A 128 rows × 128 bytes = 16 KiB, B 256 rows ×
// 128 bytes = 32 KiB), then 4 full and 4 empty mbarriers: 1024 + 4·49152 +
// 64 = 197696 bytes, as matmul_sm90. The epilogue reuses the first
// 2 × 64 × 264 × 4 = 135168 bytes of the stages.
//   A and B stages are K-major rows of 128 bytes (128 k values) in the
//   128-byte swizzle, byte for byte matmul_sm90's bf16 A stage (64 bf16 values
//   a row), so the descriptors are the same: SBO = 1024 (the next 8 rows),
//   LBO unused (16), the kk-th k32 slice 32·kk bytes into the row (bf16's k16
//   slices are the same 32 bytes); consumer c's A starts at row 64c (+8 KiB,
//   whole 1024-byte swizzle atoms). wgmma takes 8-bit operands only K-major
//   (it has no imm-trans for them), which a [M, K] and b [N, K] are.
//
// Tensor maps (made by kernels/cuda/quant.go): 2-D, innermost first, UINT8
// (raw bytes), 128B swizzle, zero fill outside the tensor (TMA counts the
// whole box toward the transaction bytes), so the M, N and K tails read
// zeros, which add nothing to the sums:
//   tmA: dims {K, M}, stride {K} bytes, box {128, 128}
//   tmB: dims {K, N}, stride {K} bytes, box {128, 256}
//
// Accumulator fragment: the .s32 accumulator D of wgmma .m64nNk32 (PTX ISA,
// "Matrix fragments for wgmma.mma_async.m64nNk32": N/2 .s32 registers
// d0 … d(N/2−1)) has the per-thread layout of the .f32 accumulator of
// .m64nNk16 (CUTLASS gives both CLayout_64xN). Thread t = 32w + lane of the
// warpgroup holds d[4j + 2h + e] = D[16w + lane/4 + 8h][8j + 2·(lane%4) + e]
// for j < N/8 and h, e ∈ {0, 1}.
//
// Launch configuration:
//   grid  (ceil(M/128)·ceil(N/256), 1, 1), tiles ordered in groups of 16
//         tile-rows for L2 reuse
//   block (384, 1, 1)
//   dynamic shared memory 197696 bytes (set MAX_DYNAMIC_SHARED_SIZE_BYTES)
// Preconditions: compute capability 9.0; K % 16 == 0 (16-byte TMA row
// stride), 1 ≤ K ≤ kernels.QMatMulMaxK; a and b 16-byte aligned; M, N ≥ 1,
// M + 128 and N + 256 within int32; ldc ≥ N; c and the residual aligned to
// their element size (whole 4-element vectors are stored when ldc % 4 == 0
// and c and the residual are aligned to 4 elements, single elements
// otherwise), the scales and bias to 4 bytes.
#include <cuda.h>
#include <stdint.h>

#include "common.cuh"
#include "quant.cuh"
#include "sm90.cuh"

namespace qk90 {

constexpr int BM = 128, BN = 256, BK = 128; // BK: int8 values, i.e. bytes
constexpr int STAGES = 4, THREADS = 384;
constexpr int A_BYTES = BM * BK;                                 // 16384
constexpr int B_BYTES = BN * BK;                                 // 32768
constexpr int STAGE_BYTES = A_BYTES + B_BYTES;                   // 49152
constexpr int EPI_LD = BN + 8;                                   // staging pitch (ints): conflict-free int2 stores
constexpr int SMEM = 1024 + STAGES * STAGE_BYTES + 16 * STAGES; // 197696
static_assert(SMEM == 197696, "the launch comment and quant.go's qmmSM90Smem are out of date");
static_assert(2 * 64 * EPI_LD * 4 <= STAGES * STAGE_BYTES, "the epilogue's staging does not fit in the stages");

#if defined(__CUDA_ARCH_FEAT_SM90_ALL)

constexpr int GROUP_M = 16; // tile-rows per group of the rasterisation

// wgmma_s8 issues d[64×256] += A[64×32]·B[32×256] (exact s32 sums of s8
// products), A and B K-major in shared memory described by da and db;
// scale-d is 1 (accumulate; the caller zeroes d first).
__device__ __forceinline__ void wgmma_s8(int (&d)[128], uint64_t da, uint64_t db) {
    asm volatile("{\n"
                 ".reg .pred p;\n"
                 "setp.ne.b32 p, %130, 0;\n"
                 "wgmma.mma_async.sync.aligned.m64n256k32.s32.s8.s8 " SM90_ACC_REGS ", %128, %129, p;\n"
                 "}\n"
                 : SM90_ACC_OPERANDS("+r", d)
                 : "l"(da), "l"(db), "r"(1));
}

// consume runs consumer warpgroup cw (0 or 1) over the ktiles stages of the
// tile into d. smem is the 1024-aligned shared base.
__device__ __forceinline__ void consume(int (&d)[128], uint32_t smem, int ktiles, int cw) {
    const uint32_t full0 = smem + STAGES * STAGE_BYTES;
    sm90_consume_stages<STAGES, STAGE_BYTES>(d, smem, full0, full0 + 8 * STAGES, ktiles, [&](uint32_t stage) {
        const uint32_t a = stage + cw * (64 * BK), b = stage + A_BYTES;
#pragma unroll
        for (int kk = 0; kk < BK / 32; ++kk)
            wgmma_s8(d, sm90_desc(a + 32 * kk, 16, 1024), sm90_desc(b + 32 * kk, 16, 1024));
    });
}

// gemm is the body of qmatmul_sm90_T; see the file comment.
template <typename T>
__device__ __forceinline__ void gemm(const CUtensorMap* tmA, const CUtensorMap* tmB, T* c, const qk::Epi& ep, int M,
                                     int N, int K, int ldc) {
    extern __shared__ uint8_t qk90_dyn[];
    // Round the shared base up to 1024 bytes (the 128B swizzle pattern and
    // the descriptors' base offset 0 assume it); SMEM has room.
    const uint32_t raw = (uint32_t)__cvta_generic_to_shared(qk90_dyn);
    const uint32_t smem = (raw + 1023u) & ~1023u;
    const uint32_t full0 = smem + STAGES * STAGE_BYTES;
    const uint32_t empty0 = full0 + 8 * STAGES;

    int m0, n0;
    sm90_tile_origin<BM, BN, GROUP_M>(M, N, m0, n0);
    const int ktiles = (K + BK - 1) / BK;
    sm90_pipeline_init<STAGES>(full0, empty0);

    const int wg = threadIdx.x / 128;
    if (wg == 0) { // the producer warpgroup: one thread issues every load
        sm90_produce<STAGES, STAGE_BYTES, BK>(tmA, tmB, smem, full0, empty0, ktiles,
                                              [&](uint32_t a, uint32_t full, int k0) {
                                                  sm90_tma_load_2d(a, tmA, full, k0, m0);
                                                  sm90_tma_load_2d(a + A_BYTES, tmB, full, k0, n0);
                                              });
        return;
    }

    // Consumer warpgroups 1 and 2: rows [64·cw, 64·cw + 64) of the tile.
    asm volatile("setmaxnreg.inc.sync.aligned.u32 232;\n" ::: "memory");
    const int cw = wg - 1;
    int d[128];
    consume(d, smem, ktiles, cw);

    // Epilogue through shared memory, once both consumers are done with
    // every stage (all loads have landed and all wgmma reads are complete):
    // consumer cw stages its 64×256 int32 block row-major with a row pitch of
    // EPI_LD ints at tile.
    asm volatile("bar.sync 1, 256;\n" ::: "memory");
    asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
    int* tile = reinterpret_cast<int*>(qk90_dyn + (smem - raw)) + cw * (64 * EPI_LD);
    {
        // The accumulator fragment (file comment): warp w holds rows
        // 16w + lane/4 (d[4j], d[4j+1]) and 16w + lane/4 + 8 (d[4j+2],
        // d[4j+3]) at columns 8j + 2·(lane%4) + {0, 1}.
        const int lane = threadIdx.x % 32, warp = (threadIdx.x % 128) / 32;
        int* q = tile + (warp * 16 + lane / 4) * EPI_LD + 2 * (lane % 4);
#pragma unroll
        for (int j = 0; j < BN / 8; ++j) {
#pragma unroll
            for (int h = 0; h < 2; ++h)
                *reinterpret_cast<int2*>(q + 8 * h * EPI_LD + 8 * j) = make_int2(d[4 * j + 2 * h], d[4 * j + 2 * h + 1]);
        }
    }
    asm volatile("bar.sync %0, 128;\n" ::"r"(2 + cw) : "memory"); // this warpgroup's block is staged

    // Thread t finishes columns col..col+3 of rows t/64, t/64 + 2, … of the
    // block, as quant.cu's store_tile does for its tiles.
    const int t = threadIdx.x % 128, scol = 4 * (t % 64), col = n0 + scol;
    if (col < N) {
        qk::Cols cl;
        cl.load(ep, col, N);
        const float os = qk::out_scale(ep);
        // col is a multiple of 4: with ldc one too, every row's four columns
        // are as aligned as c and the residual.
        const bool vec = ldc % 4 == 0 && aligned_to(c, 4 * sizeof(T)) &&
                         (ep.residual == nullptr || aligned_to(ep.residual, 4 * sizeof(T))) && col + 3 < N;
        const int r0 = m0 + cw * 64;
        const int* q = tile + scol;
#pragma unroll 2
        for (int r = t / 64; r < 64; r += 2) {
            const int row = r0 + r;
            if (row >= M) break;
            const int4 s = *reinterpret_cast<const int4*>(q + r * EPI_LD);
            const int v[4] = {s.x, s.y, s.z, s.w};
            const long long off = (long long)row * ldc + col;
            qk::Out<T>::put4(c + off, qk::res_ptr<T>(ep, off), v, N - col, vec, qk::row_scale(ep, row), cl, ep, os);
        }
    }
}

#endif // __CUDA_ARCH_FEAT_SM90_ALL

} // namespace qk90

// QSM90_DEFINE defines qmatmul_sm90_SUF over out dtype T; see the file
// comment for the launch configuration and preconditions. The residual may
// be c: neither is __restrict__.
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
#define QSM90_BODY(T)                                                                                         \
    qk90::gemm<T>(&tmA, &tmB, c, qk::Epi{ascale, bscale, bias, out_scale, residual, a_per_row, b_per_row, act}, \
                  M, N, K, ldc);
#else
#define QSM90_BODY(T) __trap();
#endif

#define QSM90_DEFINE(SUF, T)                                                                                      \
    extern "C" __global__ void __launch_bounds__(qk90::THREADS, 1)                                                \
        qmatmul_sm90_##SUF(T* c, const __grid_constant__ CUtensorMap tmA, const __grid_constant__ CUtensorMap tmB, \
                           const float* __restrict__ ascale, const float* __restrict__ bscale,                    \
                           const float* __restrict__ bias, const float* __restrict__ out_scale, const T* residual, \
                           int M, int N, int K, int ldc, int a_per_row, int b_per_row, int act) {                 \
        QSM90_BODY(T)                                                                                             \
    }

QSM90_DEFINE(f32, float)
QSM90_DEFINE(f16, __half)
QSM90_DEFINE(bf16, __nv_bfloat16)
QSM90_DEFINE(int8, int8_t)
QSM90_DEFINE(i32, int)
