// matmul_sm90.cu: the Hopper (sm_90a) GEMM for bf16, f16 and tf32 (f32
// operands, MatMulParams.TF32) with fp32 accumulation: TMA loads (cp.async.bulk.tensor with a CUtensorMap, 128-byte
// swizzle) into a 4-stage shared-memory ring guarded by mbarriers, consumed
// by wgmma.mma_async m64n256k16 from shared memory, in a warp-specialised
// producer/consumer CTA. The bodies exist only in the sm_90a image; the
// compute_75 and compute_80 PTX hold the same kernels as __trap() stubs (the
// Go side launches them only on compute capability 9.0). The Hopper
// primitives (descriptors, mbarriers, TMA, wgmma groups) are in sm90.cuh,
// shared with qmatmul_sm90.cu.
//
// Semantics (kernels/cpu/matmul.go, per batch entry z = blockIdx.z):
//   C[z] = act(alpha·A[z]·op(B[z]) + beta·C[z] + bias)   (row-major, fp32 math,
//   rounded to T on store; beta == 0 never reads C; bias may be NULL)
// with op(B) = B for B stored [K, N] (transB = 0) and Bᵀ for B stored [N, K]
// (transB = 1). A is [M, K] (no transA). tf32 (matmul_sm90_tf32): B stored
// [N, K] only (transB = 1: wgmma reads tf32 operands K-major alone); its
// operands' low 13 mantissa bits are not read (wgmma's tf32 truncates).
//
// CTA design (the "warp-specialised, 2 consumer" Hopper GEMM):
//   tile BM×BN×BK = 128×256×64, 384 threads = 3 warpgroups.
//   warpgroup 0  producer: setmaxnreg.dec to 40; one thread waits for a free
//                stage (empty mbarrier), posts the stage's byte count
//                (arrive.expect_tx on the full mbarrier) and issues the TMA
//                loads of the A tile and the B tile.
//   warpgroups 1, 2  consumers: setmaxnreg.inc to 232; consumer c computes
//                rows [64c, 64c+64) of the tile: per stage it waits on the
//                full mbarrier, issues 4 wgmma m64n256k16 (K = 4×16), commits,
//                waits until at most this stage's group is in flight, and
//                releases the previous stage (one arrive per warpgroup on its
//                empty mbarrier, count 2). Epilogue: once both consumers
//                are done with every stage, each stages its 64×256 fp32
//                block in shared memory and its threads apply alpha, beta·C,
//                bias and act to one pair of columns each, down the rows
//                (coalesced loads and stores of C).
//
// Every stage holds 128 bytes of K per row of A and B: 64 elements of
// f16/bf16, 32 of tf32; the layout below, in bytes, is the same for both
// (a tf32 wgmma k8 slice is 32 bytes, as a 16-bit k16 one), and the tensor
// maps' inner box is 64 or 32 elements.
//
// Shared memory (dynamic, base rounded up to 1024 bytes, needed by the
// 128-byte swizzle): STAGES × (A 128×64 = 16 KiB, B 64×256 = 32 KiB), then
// STAGES full and STAGES empty mbarriers. The epilogue reuses the first
// 2 × 64 × SM90_EPI_LD × 4 = 135168 bytes of the stages.
//   A stage: 128 rows (m) of 128 bytes (64 k), TMA box {64, 128, 1}, 128B
//            swizzle: K-major, wgmma descriptor SBO = 1024 (8 rows), LBO
//            unused; consumer c starts at row 64c (+8 KiB); the k-th 16-wide
//            slice starts 32·k bytes into the row.
//   B stage, transB = 1 (B stored [N, K]): 256 rows (n) of 128 bytes (64 k),
//            box {64, 256, 1}: K-major like A (imm-trans-b 0), slice k at
//            +32·k bytes.
//   B stage, transB = 0 (B stored [K, N]): 4 boxes {64, 64, 1} of 64 rows
//            (k) × 128 bytes (64 n), box j (columns 64j..64j+63) at +8 KiB·j:
//            N-major (imm-trans-b 1), descriptor LBO = 8192 (next 64 columns),
//            SBO = 1024 (next 8 rows of k); slice k at +2048·k bytes.
//
// Tensor maps (made by kernels/cuda/matmul_sm90.go, 3-D, innermost first,
// bf16/f16, 128B swizzle, zero out-of-bounds fill). The batch is the third
// dimension, so tiles never read across batch entries, and the M, N and K
// tails read zeros (TMA counts the whole box toward the transaction bytes):
//   tmA: dims {K, M, batch},  strides {K, M·K}·2 bytes, box {64, 128, 1}
//   tmB, transB = 0: dims {N, K, batchB}, strides {N, K·N}·2, box {64, 64, 1}
//   tmB, transB = 1: dims {K, N, batchB}, strides {K, N·K}·2, box {64, 256, 1}
// batchB is 1 when B is shared by every batch entry (sharedB = 1, read at
// z = 0), else the batch.
//
// Launch configuration:
//   grid  (ceil(M/128)·ceil(N/256), 1, batch), batch ≤ 65535; tiles are
//         ordered in groups of 16 tile-rows for L2 reuse.
//   block (384, 1, 1)
//   dynamic shared memory SM90_SMEM_BYTES = 1024 + 4·49152 + 64 = 197696
// Preconditions: compute capability 9.0; K % 8 == 0 and N % 8 == 0 (16-byte
// TMA row strides, 4-byte pair stores of C); A, B, C 16-byte aligned, bias
// 4-byte aligned (or NULL); M, N, K ≥ 1; strideC (elements between batch
// entries of C, normally M·N) a multiple of 2.
// Parameters: the tensor maps above; c, bias; M, N, K; transB (0 or 1);
// strideC; alpha (the Go side passes 1 for MatMulParams.Alpha = 0), beta;
// act (kernels.Activation code, common.cuh act_apply); sharedB (1: B has no
// batch dimension and every batch entry multiplies the same B); ws and
// kslice (split-K, below; NULL and 0 otherwise).
//
// Split-K (one product of few tiles, which would leave most multiprocessors
// idle): with ws != NULL, blockIdx.z is a slice of K instead of a batch
// entry (batch 1): slice z multiplies k in [z·kslice, min(K, (z+1)·kslice)),
// kslice a multiple of 64, and stores its fp32 product, without the
// epilogue, to ws + z·M·N (row-major [M, N]); splitk_reduce_T (matmul.cu)
// then adds the slices up in order and applies the epilogue.
#include <cuda.h>
#include <stdint.h>

#include "common.cuh"
#include "sm90.cuh"

#define SM90_BM 128
#define SM90_BN 256
#define SM90_BK 64
#define SM90_STAGES 4
#define SM90_THREADS 384
#define SM90_GROUP_M 16
#define SM90_A_BYTES (SM90_BM * SM90_BK * 2)                          // 16384
#define SM90_B_BYTES (SM90_BN * SM90_BK * 2)                          // 32768
#define SM90_STAGE_BYTES (SM90_A_BYTES + SM90_B_BYTES)                // 49152
#define SM90_EPI_LD (SM90_BN + 8) // epilogue row pitch in floats: conflict-free float2 stores
#define SM90_SMEM_BYTES (1024 + SM90_STAGES * SM90_STAGE_BYTES + 16 * SM90_STAGES) // 197696

// The operand types of the kernels (IN): f16, bf16, tf32.
#define SM90_IN_F16 0
#define SM90_IN_BF16 1
#define SM90_IN_TF32 2

#if defined(__CUDA_ARCH_FEAT_SM90_ALL)

// sm90_wgmma_256 issues d[64×256] += A[64×32 bytes]·B[32 bytes×256] (fp32
// accumulate: k16 of f16 or bf16, k8 of tf32), A and B in shared memory
// described by da and db. IN picks the input type; TNSPB is wgmma's
// imm-trans-b: 0 for a K-major B, 1 for an N-major B (16-bit only).
template <int IN, int TNSPB>
__device__ __forceinline__ void sm90_wgmma_256(float (&d)[128], uint64_t da, uint64_t db) {
    if constexpr (IN == SM90_IN_TF32) {
        static_assert(TNSPB == 0, "tf32 wgmma reads B K-major only");
        asm volatile("{\n"
                     ".reg .pred p;\n"
                     "setp.ne.b32 p, %130, 0;\n"
                     "wgmma.mma_async.sync.aligned.m64n256k8.f32.tf32.tf32 " SM90_ACC_REGS
                     ", %128, %129, p, 1, 1;\n"
                     "}\n"
                     : SM90_ACC_OPERANDS("+f", d)
                     : "l"(da), "l"(db), "r"(1));
    } else if constexpr (IN == SM90_IN_BF16) {
        asm volatile("{\n"
                     ".reg .pred p;\n"
                     "setp.ne.b32 p, %130, 0;\n"
                     "wgmma.mma_async.sync.aligned.m64n256k16.f32.bf16.bf16 " SM90_ACC_REGS
                     ", %128, %129, p, 1, 1, 0, %131;\n"
                     "}\n"
                     : SM90_ACC_OPERANDS("+f", d)
                     : "l"(da), "l"(db), "r"(1), "n"(TNSPB));
    } else {
        asm volatile("{\n"
                     ".reg .pred p;\n"
                     "setp.ne.b32 p, %130, 0;\n"
                     "wgmma.mma_async.sync.aligned.m64n256k16.f32.f16.f16 " SM90_ACC_REGS
                     ", %128, %129, p, 1, 1, 0, %131;\n"
                     "}\n"
                     : SM90_ACC_OPERANDS("+f", d)
                     : "l"(da), "l"(db), "r"(1), "n"(TNSPB));
    }
}

// sm90_load2 reads the two adjacent elements at p (4-byte aligned; 8 for
// float) as float.
__device__ __forceinline__ float2 sm90_load2(const float* p) { return *reinterpret_cast<const float2*>(p); }
__device__ __forceinline__ float2 sm90_load2(const __nv_bfloat16* p) {
    return __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(p));
}
__device__ __forceinline__ float2 sm90_load2(const __half* p) {
    return __half22float2(*reinterpret_cast<const __half2*>(p));
}
// sm90_store2 rounds a and b (nearest even) into the two elements at p.
__device__ __forceinline__ void sm90_store2(float* p, float a, float b) {
    *reinterpret_cast<float2*>(p) = make_float2(a, b);
}
__device__ __forceinline__ void sm90_store2(__nv_bfloat16* p, float a, float b) {
    *reinterpret_cast<__nv_bfloat162*>(p) = __halves2bfloat162(__float2bfloat16_rn(a), __float2bfloat16_rn(b));
}
__device__ __forceinline__ void sm90_store2(__half* p, float a, float b) {
    *reinterpret_cast<__half2*>(p) = __halves2half2(__float2half_rn(a), __float2half_rn(b));
}

// sm90_consume runs consumer warpgroup cw (0 or 1) over the ktiles stages
// of the tile into d. smem is the 1024-aligned shared base; TNSPB as in
// sm90_wgmma_256.
template <int IN, int TNSPB>
__device__ __forceinline__ void sm90_consume(float (&d)[128], uint32_t smem, int ktiles, int cw) {
    const uint32_t full0 = smem + SM90_STAGES * SM90_STAGE_BYTES;
    sm90_consume_stages<SM90_STAGES, SM90_STAGE_BYTES>(
        d, smem, full0, full0 + 8 * SM90_STAGES, ktiles, [&](uint32_t stage) {
            const uint32_t a = stage + cw * (64 * 128), b = stage + SM90_A_BYTES;
#pragma unroll
            for (int kk = 0; kk < 4; ++kk) { // four slices of 32 bytes of K
                const uint64_t da = sm90_desc(a + 32 * kk, 16, 1024);
                const uint64_t db = TNSPB ? sm90_desc(b + 2048 * kk, 8192, 1024) : sm90_desc(b + 32 * kk, 16, 1024);
                sm90_wgmma_256<IN, TNSPB>(d, da, db);
            }
        });
}

// sm90_matmul is the kernel body; see the file comment.
template <typename T, int IN>
__device__ __forceinline__ void sm90_matmul(const CUtensorMap* tmA, const CUtensorMap* tmB, T* c, const T* bias, int M,
                                            int N, int K, int transB, long long strideC, float alpha, float beta,
                                            int act, int sharedB, float* ws, int kslice) {
    extern __shared__ uint8_t sm90_dyn[];
    // Round the shared base up to 1024 bytes (the 128B swizzle pattern and
    // the descriptors' base offset 0 assume it); SM90_SMEM_BYTES has room.
    const uint32_t raw = (uint32_t)__cvta_generic_to_shared(sm90_dyn);
    const uint32_t smem = (raw + 1023u) & ~1023u;
    const uint32_t full0 = smem + SM90_STAGES * SM90_STAGE_BYTES;
    const uint32_t empty0 = full0 + 8 * SM90_STAGES;

    int m0, n0;
    sm90_tile_origin<SM90_BM, SM90_BN, SM90_GROUP_M>(M, N, m0, n0);
    // Split-K: this CTA's slice of K, from k0; else all of K.
    const bool split = ws != nullptr;
    const int z = split ? 0 : blockIdx.z, zb = sharedB ? 0 : z;
    const int k0 = split ? blockIdx.z * kslice : 0;
    constexpr int BK = IN == SM90_IN_TF32 ? SM90_BK / 2 : SM90_BK; // elements of K a stage holds
    const int ktiles = ((split ? min(kslice, K - k0) : K) + BK - 1) / BK;
    sm90_pipeline_init<SM90_STAGES>(full0, empty0);

    const int wg = threadIdx.x / 128;
    if (wg == 0) { // the producer warpgroup: one thread issues every load
        sm90_produce<SM90_STAGES, SM90_STAGE_BYTES, BK>(
            tmA, tmB, smem, full0, empty0, ktiles, [&](uint32_t a, uint32_t full, int dk) {
                const uint32_t b = a + SM90_A_BYTES;
                const int k = k0 + dk;
                sm90_tma_load_3d(a, tmA, full, k, m0, z);
                if (transB) {
                    sm90_tma_load_3d(b, tmB, full, k, n0, zb);
                } else {
#pragma unroll
                    for (int j = 0; j < SM90_BN / 64; ++j)
                        sm90_tma_load_3d(b + 8192 * j, tmB, full, n0 + 64 * j, k, zb);
                }
            });
        return;
    }

    // Consumer warpgroups 1 and 2: rows [64·cw, 64·cw + 64) of the tile.
    asm volatile("setmaxnreg.inc.sync.aligned.u32 232;\n" ::: "memory");
    const int cw = wg - 1;
    float d[128];
    if constexpr (IN == SM90_IN_TF32) {
        sm90_consume<IN, 0>(d, smem, ktiles, cw); // transB = 1 (the launcher's precondition)
    } else {
        if (transB)
            sm90_consume<IN, 0>(d, smem, ktiles, cw);
        else
            sm90_consume<IN, 1>(d, smem, ktiles, cw);
    }

    // Epilogue through shared memory, once both consumers are done with
    // every stage (all loads have landed and all wgmma reads are complete):
    // consumer cw stages its 64×256 fp32 block row-major with a row pitch of
    // SM90_EPI_LD floats at tile, then each thread finishes one pair of
    // columns down the 64 rows, so that global loads and stores coalesce.
    asm volatile("bar.sync 1, 256;\n" ::: "memory");
    asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
    float* tile = reinterpret_cast<float*>(sm90_dyn + (smem - raw)) + cw * (64 * SM90_EPI_LD);
    {
        // Accumulator fragment of m64nNk16: warp w of the warpgroup holds
        // rows 16w + lane/4 (d[4j], d[4j+1]) and 16w + lane/4 + 8 (d[4j+2],
        // d[4j+3]) at columns 8j + 2·(lane%4) + {0, 1}.
        const int lane = threadIdx.x % 32, warp = (threadIdx.x % 128) / 32;
        float* q = tile + (warp * 16 + lane / 4) * SM90_EPI_LD + 2 * (lane % 4);
#pragma unroll
        for (int j = 0; j < SM90_BN / 8; ++j) {
#pragma unroll
            for (int h = 0; h < 2; ++h)
                *reinterpret_cast<float2*>(q + 8 * h * SM90_EPI_LD + 8 * j) =
                    make_float2(d[4 * j + 2 * h], d[4 * j + 2 * h + 1]);
        }
    }
    asm volatile("bar.sync %0, 128;\n" ::"r"(2 + cw) : "memory"); // this warpgroup's block is staged

    const int t = threadIdx.x % 128, col = n0 + 2 * t;
    if (col >= N) return; // N is even, so col + 1 < N too
    const int r0 = m0 + cw * 64, rows = min(64, M - r0);
    const float* q = tile + 2 * t;
    if (split) { // the slice's product, as it is
        float* p = ws + (long long)blockIdx.z * M * N + (long long)r0 * N + col;
        for (int r = 0; r < rows; ++r, p += N, q += SM90_EPI_LD)
            *reinterpret_cast<float2*>(p) = *reinterpret_cast<const float2*>(q);
        return;
    }
    const float2 bv = bias != nullptr ? sm90_load2(bias + col) : make_float2(0.0f, 0.0f);
    T* p = c + (long long)z * strideC + (long long)r0 * N + col;
    for (int r = 0; r < rows; ++r, p += N, q += SM90_EPI_LD) {
        const float2 acc = *reinterpret_cast<const float2*>(q);
        float v0 = alpha * acc.x, v1 = alpha * acc.y;
        if (beta != 0.0f) {
            const float2 old = sm90_load2(p);
            v0 += beta * old.x;
            v1 += beta * old.y;
        }
        sm90_store2(p, act_apply(v0 + bv.x, act), act_apply(v1 + bv.y, act));
    }
}

#endif // __CUDA_ARCH_FEAT_SM90_ALL

// SM90_KERNEL defines the extern "C" kernel NAME over element type T; see
// the file comment for the launch configuration and preconditions.
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
#define SM90_BODY(T, IN)                                                                                            \
    sm90_matmul<T, IN>(&tmA, &tmB, c, bias, M, N, K, transB, strideC, alpha, beta, act, sharedB, ws, kslice);
#else
#define SM90_BODY(T, IN) __trap();
#endif

#define SM90_KERNEL(NAME, T, IN)                                                                                    \
    extern "C" __global__ void __launch_bounds__(SM90_THREADS, 1)                                                   \
        NAME(const __grid_constant__ CUtensorMap tmA, const __grid_constant__ CUtensorMap tmB, T* c, const T* bias, \
             int M, int N, int K, int transB, long long strideC, float alpha, float beta, int act, int sharedB,     \
             float* ws, int kslice) {                                                                               \
        SM90_BODY(T, IN)                                                                                            \
    }

SM90_KERNEL(matmul_sm90_bf16, __nv_bfloat16, SM90_IN_BF16)
SM90_KERNEL(matmul_sm90_f16, __half, SM90_IN_F16)
SM90_KERNEL(matmul_sm90_tf32, float, SM90_IN_TF32)
