// sm80.cuh: the warp-level tensor-core primitives of the mma.sync kernels
// (attention.cu, conv.cu, matmul.cu, quant.cu, wquant.cu, fp8.cu):
// shared-space addresses and ldmatrix fragment loads (sm_75+, so also in the
// compute_75 PTX), and cp.async copies and the f16, bf16 and tf32 mma.sync
// products (sm_80+, __CUDA_ARCH__ >= 800 only). Device functions only.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

// smem_u32 is the shared-space address of the shared-memory pointer p.
__device__ __forceinline__ unsigned smem_u32(const void* p) { return (unsigned)__cvta_generic_to_shared(p); }

// ldsm_x4 loads four 8x8 b16 matrices (ldmatrix), one register each; addr
// is a shared-space address.
__device__ __forceinline__ void ldsm_x4(unsigned (&r)[4], unsigned addr) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(addr));
}

// ldsm_x4_trans is ldsm_x4 with each matrix transposed (ldmatrix .trans).
__device__ __forceinline__ void ldsm_x4_trans(unsigned (&r)[4], unsigned addr) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(addr));
}

// ldsm_b_pair loads the B fragments of two adjacent n8 tiles with one
// ldmatrix x4 (.trans when TRANS): matrices 0 and 1 are b0's two registers,
// 2 and 3 b1's.
template <bool TRANS = false>
__device__ __forceinline__ void ldsm_b_pair(unsigned (&b0)[2], unsigned (&b1)[2], unsigned addr) {
    unsigned r[4];
    if constexpr (TRANS)
        ldsm_x4_trans(r, addr);
    else
        ldsm_x4(r, addr);
    b0[0] = r[0];
    b0[1] = r[1];
    b1[0] = r[2];
    b1[1] = r[3];
}

#if __CUDA_ARCH__ >= 800

// cp_async16 copies 16 bytes global → shared (dst: shared-space address),
// or writes 16 zero bytes when !ok (src-size 0: nothing is read; src is
// still a valid address).
__device__ __forceinline__ void cp_async16(unsigned dst, const void* src, bool ok) {
    const int n = ok ? 16 : 0;
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(src), "r"(n) : "memory");
}

// cp_async_commit closes the group of this thread's cp.async copies issued
// since the last commit.
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::: "memory"); }

// cp_async_wait waits until at most N of this thread's committed cp.async
// groups are pending.
template <int N> __device__ __forceinline__ void cp_async_wait() {
    asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory");
}

// mma16816 is d += a·b for m16n8k16 fragments of the element type of its
// last argument (__half or __nv_bfloat16, only its type counts), summed in
// float32.
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

// mma1688_tf32 is d += a·b for m16n8k8 tf32 fragments (operands as tf32
// makes them), summed in float32.
__device__ __forceinline__ void mma1688_tf32(float (&d)[4], const unsigned (&a)[4], unsigned b0, unsigned b1) {
    asm volatile("mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 "
                 "{%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

// tf32 is x rounded to tf32 (to nearest, ties away from zero), as the bits
// of a float32.
__device__ __forceinline__ unsigned tf32(float x) {
    unsigned u;
    asm("cvt.rna.tf32.f32 %0, %1;\n" : "=r"(u) : "f"(x));
    return u;
}

// cp_async_pipeline is the main loop of an S-stage cp.async pipeline over
// the k tiles 0..ktiles-1: load(stage, kt) issues this thread's copies of
// tile kt into stage number stage, and compute(stage) consumes the tile in
// that stage once every thread's copies of it have landed. Tiles 0..S-2 are
// loaded first, one commit group per tile even if empty, so that group kt
// always holds tile kt; each iteration then refills the stage read by the
// previous one. On return no copies are pending; a caller that reuses the
// stages' shared memory still needs a barrier first.
template <int S, typename Load, typename Compute>
__device__ __forceinline__ void cp_async_pipeline(int ktiles, Load load, Compute compute) {
#pragma unroll
    for (int s = 0; s < S - 1; s++) {
        if (s < ktiles) load(s, s);
        cp_async_commit();
    }
    int ws = S - 1, rs = 0; // stage written this iteration, stage read
    for (int kt = 0; kt < ktiles; kt++) {
        // Groups committed so far: S-1+kt; at most S-2 pending means tiles
        // 0..kt have landed (for this thread's copies; the barrier makes
        // everyone's visible and also ends every warp's reads of tile kt-1,
        // whose stage ws = (kt-1) mod S is refilled below).
        cp_async_wait<S - 2>();
        __syncthreads();
        const int nt = kt + S - 1;
        if (nt < ktiles) load(ws, nt);
        cp_async_commit();
        compute(rs);
        rs = rs + 1 == S ? 0 : rs + 1;
        ws = ws + 1 == S ? 0 : ws + 1;
    }
    cp_async_wait<0>(); // only empty groups remain
}

#endif // __CUDA_ARCH__ >= 800
