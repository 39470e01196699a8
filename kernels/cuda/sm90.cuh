// sm90.cuh: Hopper (sm_90a) primitives shared by the warp-specialised TMA +
// wgmma kernels (matmul_sm90.cu, qmatmul_sm90.cu, fp8.cu, attention.cu):
// shared-memory matrix descriptors, wgmma fences and commit groups,
// mbarriers and TMA tensor loads. Device functions only, and only in the compute_90a pass
// (__CUDA_ARCH_FEAT_SM90_ALL): the compute_75 and compute_80 PTX never see
// these instructions, so their kernels are __trap() stubs.
#pragma once

#include <cuda.h>
#include <stdint.h>

#if defined(__CUDA_ARCH_FEAT_SM90_ALL)

// SM90_ACC32_REGS is the accumulator list {%0, …, %31} of a m64n64 wgmma
// (32 registers per thread, fp32 or s32), SM90_ACC64_REGS {%0, …, %63} that
// of a m64n128 one (64) and SM90_ACC_REGS {%0, …, %127} that of a m64n256
// one (128); SM90_ACC32_OPERANDS(C, d), SM90_ACC64_OPERANDS(C, d) and
// SM90_ACC_OPERANDS(C, d) bind d[0..31], d[0..63] and d[0..127] read-write
// with the constraint string C: "+f" for float accumulators, "+r" for int.
#define SM90_ACC32_REGS "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31}"
#define SM90_ACC64_REGS "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63}"
#define SM90_ACC_REGS \
    "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63, %64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79, %80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95, %96, %97, %98, %99, %100, %101, %102, %103, %104, %105, %106, %107, %108, %109, %110, %111, %112, %113, %114, %115, %116, %117, %118, %119, %120, %121, %122, %123, %124, %125, %126, %127}"
#define SM90_ACC32_OPERANDS(C, d) \
    C(d[0]), C(d[1]), C(d[2]), C(d[3]), C(d[4]), C(d[5]), C(d[6]), C(d[7]), \
    C(d[8]), C(d[9]), C(d[10]), C(d[11]), C(d[12]), C(d[13]), C(d[14]), C(d[15]), \
    C(d[16]), C(d[17]), C(d[18]), C(d[19]), C(d[20]), C(d[21]), C(d[22]), C(d[23]), \
    C(d[24]), C(d[25]), C(d[26]), C(d[27]), C(d[28]), C(d[29]), C(d[30]), C(d[31])
#define SM90_ACC64_OPERANDS(C, d) \
    SM90_ACC32_OPERANDS(C, d), \
    C(d[32]), C(d[33]), C(d[34]), C(d[35]), C(d[36]), C(d[37]), C(d[38]), C(d[39]), \
    C(d[40]), C(d[41]), C(d[42]), C(d[43]), C(d[44]), C(d[45]), C(d[46]), C(d[47]), \
    C(d[48]), C(d[49]), C(d[50]), C(d[51]), C(d[52]), C(d[53]), C(d[54]), C(d[55]), \
    C(d[56]), C(d[57]), C(d[58]), C(d[59]), C(d[60]), C(d[61]), C(d[62]), C(d[63])
#define SM90_ACC_OPERANDS(C, d) \
    SM90_ACC64_OPERANDS(C, d), \
    C(d[64]), C(d[65]), C(d[66]), C(d[67]), C(d[68]), C(d[69]), C(d[70]), C(d[71]), \
    C(d[72]), C(d[73]), C(d[74]), C(d[75]), C(d[76]), C(d[77]), C(d[78]), C(d[79]), \
    C(d[80]), C(d[81]), C(d[82]), C(d[83]), C(d[84]), C(d[85]), C(d[86]), C(d[87]), \
    C(d[88]), C(d[89]), C(d[90]), C(d[91]), C(d[92]), C(d[93]), C(d[94]), C(d[95]), \
    C(d[96]), C(d[97]), C(d[98]), C(d[99]), C(d[100]), C(d[101]), C(d[102]), C(d[103]), \
    C(d[104]), C(d[105]), C(d[106]), C(d[107]), C(d[108]), C(d[109]), C(d[110]), C(d[111]), \
    C(d[112]), C(d[113]), C(d[114]), C(d[115]), C(d[116]), C(d[117]), C(d[118]), C(d[119]), \
    C(d[120]), C(d[121]), C(d[122]), C(d[123]), C(d[124]), C(d[125]), C(d[126]), C(d[127])

// sm90_desc encodes a wgmma shared-memory matrix descriptor: start address
// >> 4 in bits 0-13, leading-dimension byte offset >> 4 in bits 16-29,
// stride-dimension byte offset >> 4 in bits 32-45, base offset 0 (the
// swizzle atoms are 1024-byte aligned) and layout type 1 = 128-byte swizzle
// in bits 62-63.
__device__ __forceinline__ uint64_t sm90_desc(uint32_t addr, uint32_t lbo, uint32_t sbo) {
    return (uint64_t)((addr & 0x3FFFFu) >> 4) | ((uint64_t)((lbo >> 4) & 0x3FFFu) << 16) |
           ((uint64_t)((sbo >> 4) & 0x3FFFu) << 32) | (1ull << 62);
}

__device__ __forceinline__ void sm90_wgmma_fence() { asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory"); }
__device__ __forceinline__ void sm90_wgmma_commit() {
    asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
}
// sm90_wgmma_wait waits until at most N committed wgmma groups of this
// warpgroup are pending.
template <int N> __device__ __forceinline__ void sm90_wgmma_wait() {
    asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(N) : "memory");
}

__device__ __forceinline__ void sm90_mbar_init(uint32_t bar, uint32_t count) {
    asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(bar), "r"(count) : "memory");
}
// sm90_mbar_expect_tx arrives on bar and adds bytes to the transaction
// count its current phase waits for.
__device__ __forceinline__ void sm90_mbar_expect_tx(uint32_t bar, uint32_t bytes) {
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(bar), "r"(bytes) : "memory");
}
__device__ __forceinline__ void sm90_mbar_arrive(uint32_t bar) {
    asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" ::"r"(bar) : "memory");
}
// sm90_mbar_wait returns once the phase of bar with the given parity has
// completed (acquire semantics at CTA scope, try_wait's default).
__device__ __forceinline__ void sm90_mbar_wait(uint32_t bar, uint32_t parity) {
    uint32_t done;
    do {
        asm volatile("{\n"
                     ".reg .pred p;\n"
                     "mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n"
                     "selp.u32 %0, 1, 0, p;\n"
                     "}\n"
                     : "=r"(done)
                     : "r"(bar), "r"(parity)
                     : "memory");
    } while (!done);
}

// sm90_tma_load_2d copies the box at coordinates (c0, c1) (innermost
// first, in elements) of the tensor map at generic address map into shared
// memory at dst, completing bytes on the mbarrier bar.
__device__ __forceinline__ void sm90_tma_load_2d(uint32_t dst, const CUtensorMap* map, uint32_t bar, int c0, int c1) {
    asm volatile("cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes"
                 " [%0], [%1, {%3, %4}], [%2];\n" ::"r"(dst),
                 "l"(reinterpret_cast<uint64_t>(map)), "r"(bar), "r"(c0), "r"(c1)
                 : "memory");
}

// sm90_tma_load_3d is sm90_tma_load_2d for a 3-D tensor map.
__device__ __forceinline__ void sm90_tma_load_3d(uint32_t dst, const CUtensorMap* map, uint32_t bar, int c0, int c1,
                                                 int c2) {
    asm volatile("cp.async.bulk.tensor.3d.shared::cluster.global.mbarrier::complete_tx::bytes"
                 " [%0], [%1, {%3, %4, %5}], [%2];\n" ::"r"(dst),
                 "l"(reinterpret_cast<uint64_t>(map)), "r"(bar), "r"(c0), "r"(c1), "r"(c2)
                 : "memory");
}

// sm90_tma_load_4d is sm90_tma_load_2d for a 4-D tensor map.
__device__ __forceinline__ void sm90_tma_load_4d(uint32_t dst, const CUtensorMap* map, uint32_t bar, int c0, int c1,
                                                 int c2, int c3) {
    asm volatile("cp.async.bulk.tensor.4d.shared::cluster.global.mbarrier::complete_tx::bytes"
                 " [%0], [%1, {%3, %4, %5, %6}], [%2];\n" ::"r"(dst),
                 "l"(reinterpret_cast<uint64_t>(map)), "r"(bar), "r"(c0), "r"(c1), "r"(c2), "r"(c3)
                 : "memory");
}

__device__ __forceinline__ void sm90_prefetch_map(const CUtensorMap* map) {
    asm volatile("prefetch.tensormap [%0];\n" ::"l"(reinterpret_cast<uint64_t>(map)) : "memory");
}

// ---------------------------------------------------------------------------
// The warp-specialised pipeline of the three Hopper GEMMs (matmul_sm90.cu,
// qmatmul_sm90.cu, fp8.cu): a ring of STAGES shared-memory stages of
// STAGE_BYTES, each with a full mbarrier (the producer's arrive.expect_tx,
// count 1) and an empty one (one arrive per consumer warpgroup, count 2);
// warpgroup 0 produces (TMA), warpgroups 1 and 2 consume (wgmma).

// sm90_fence_acc keeps the compiler from moving accesses of the accumulators
// across this point (CUTLASS's warpgroup_fence_operand): wgmma writes them
// asynchronously, behind the compiler's back.
template <int N> __device__ __forceinline__ void sm90_fence_acc(float (&d)[N]) {
#pragma unroll
    for (int i = 0; i < N; ++i) asm volatile("" : "+f"(d[i])::"memory");
}
template <int N> __device__ __forceinline__ void sm90_fence_acc(int (&d)[N]) {
#pragma unroll
    for (int i = 0; i < N; ++i) asm volatile("" : "+r"(d[i])::"memory");
}

// sm90_tile_origin sets m0, n0 to the first row and column of this CTA's
// BM×BN output tile: tiles in groups of GROUP_M tile-rows, tile-rows
// fastest within a group, so that CTAs running together share rows of B
// and of A.
template <int BM, int BN, int GROUP_M>
__device__ __forceinline__ void sm90_tile_origin(int M, int N, int& m0, int& n0) {
    const int tilesM = (M + BM - 1) / BM, tilesN = (N + BN - 1) / BN;
    const int pid = blockIdx.x, inGroup = GROUP_M * tilesN;
    const int firstM = (pid / inGroup) * GROUP_M;
    const int groupM = min(tilesM - firstM, GROUP_M);
    const int tm = firstM + (pid % inGroup) % groupM, tn = (pid % inGroup) / groupM;
    m0 = tm * BM;
    n0 = tn * BN;
}

// sm90_pipeline_init has thread 0 initialise the ring's mbarriers, full
// ones at full0 and empty ones at empty0 (8 bytes each), and synchronises
// the CTA.
template <int STAGES> __device__ __forceinline__ void sm90_pipeline_init(uint32_t full0, uint32_t empty0) {
    if (threadIdx.x == 0) {
        for (int s = 0; s < STAGES; ++s) {
            sm90_mbar_init(full0 + 8 * s, 1);  // the producer's arrive.expect_tx
            sm90_mbar_init(empty0 + 8 * s, 2); // one arrive per consumer warpgroup
        }
        asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
    }
    __syncthreads();
}

// sm90_produce is the producer warpgroup: it gives registers to the
// consumers, and its thread 0 fills the ring from smem (the 1024-aligned
// shared base), one stage for each of the ktiles k-tiles of BK: once both
// consumers released the stage's previous contents (parity phase^1: the
// first round passes at once) it expects STAGE_BYTES on the stage's full
// barrier and calls load(stage, full, k0) to issue the TMA loads of
// k-tile k0 into the stage at shared address stage.
template <int STAGES, int STAGE_BYTES, int BK, typename Load>
__device__ __forceinline__ void sm90_produce(const CUtensorMap* tmA, const CUtensorMap* tmB, uint32_t smem,
                                             uint32_t full0, uint32_t empty0, int ktiles, Load load) {
    asm volatile("setmaxnreg.dec.sync.aligned.u32 40;\n" ::: "memory");
    if (threadIdx.x == 0) {
        sm90_prefetch_map(tmA);
        sm90_prefetch_map(tmB);
        int stage = 0;
        uint32_t phase = 0;
        for (int kt = 0; kt < ktiles; ++kt) {
            sm90_mbar_wait(empty0 + 8 * stage, phase ^ 1);
            const uint32_t full = full0 + 8 * stage;
            sm90_mbar_expect_tx(full, STAGE_BYTES);
            load(smem + stage * STAGE_BYTES, full, kt * BK);
            if (++stage == STAGES) {
                stage = 0;
                phase ^= 1;
            }
        }
    }
}

// sm90_consume_stages is a consumer warpgroup's loop over the ktiles stages
// into the accumulators d, zeroed first: it waits for each stage's loads,
// calls mma(stage) to issue its wgmma on the stage at shared address stage,
// commits them and, once the group before has completed (the group just
// committed may still run), gives that group's stage back to the producer;
// then it waits for the last group.
template <int STAGES, int STAGE_BYTES, typename Acc, typename Mma>
__device__ __forceinline__ void sm90_consume_stages(Acc (&d)[128], uint32_t smem, uint32_t full0, uint32_t empty0,
                                                    int ktiles, Mma mma) {
    const bool leader = (threadIdx.x % 128) == 0;
#pragma unroll
    for (int i = 0; i < 128; ++i) d[i] = 0;
    sm90_fence_acc(d);
    int stage = 0, prev = 0;
    uint32_t phase = 0;
    for (int kt = 0; kt < ktiles; ++kt) {
        sm90_mbar_wait(full0 + 8 * stage, phase);
        sm90_wgmma_fence();
        mma(smem + stage * STAGE_BYTES);
        sm90_wgmma_commit();
        sm90_wgmma_wait<1>();
        if (kt > 0 && leader) sm90_mbar_arrive(empty0 + 8 * prev);
        prev = stage;
        if (++stage == STAGES) {
            stage = 0;
            phase ^= 1;
        }
    }
    sm90_wgmma_wait<0>();
    sm90_fence_acc(d);
}

#endif // __CUDA_ARCH_FEAT_SM90_ALL
