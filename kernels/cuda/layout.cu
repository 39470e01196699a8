// layout.cu: moves of elements between layouts (semantics:
// kernels/cpu/layout.go).
//
// swap_axes_u16, _u32, _u64, _u128: out [A, C, B, D] from x [A, B, C, D],
// out[a, c, b, d] = x[a, b, c, d], moving units of 16 to 128 bits: the host
// picks the widest unit that divides a row of D elements and to which both
// addresses are aligned, and passes du, the row length in units. Any
// element type is moved bit for bit. One thread per unit of out in a
// grid-stride loop: stores are coalesced, and so are loads along a row.
// Indices are 32-bit while the tensor has fewer than 2^31 units, 64-bit
// beyond. out and x must not overlap.
// Launch: block 256, grid min(ceil(n/256), 32·SMs) for n = A·B·C·du units,
// no shared memory; any grid and block are correct.
//
// split_heads_u16, _u32, _u64, _u128: the heads of a packed projection x
// [B, S, Hq+2·Hkv, D] into q [B, Hq, S, D], k [B, Hkv, S, D] and v
// [B, Hkv, S, D] (the first Hq heads of each token, the next Hkv, the last
// Hkv), in units as swap_axes, du a row of D elements in units; one thread
// per unit of x. q, k and v must not overlap x. Launch as swap_axes, for
// n = B·S·(Hq+2·Hkv)·du units.
//
// transpose_u32: out [C, R] from x [R, C] of 32-bit elements, through a
// 32×32 tile in shared memory so that loads and stores both coalesce (the
// Hopper tf32 GEMM's B, which wgmma reads K-major only). out and x must not
// overlap. Launch: grid (ceil(C/32), ceil(R/32)), block (32, 8), no
// dynamic shared memory.

#include "common.cuh"

// swap_axes_loop runs the grid-stride loop with index type I, which must
// hold n + the grid's thread count.
template <typename U, typename I>
__device__ __forceinline__ void swap_axes_loop(U* __restrict__ out, const U* __restrict__ x, I B, I C, I du, I n) {
    const I stride = (I)grid_stride();
    for (I i = (I)grid_tid(); i < n; i += stride) {
        const I d = i % du, r = i / du; // r = (a·C + c)·B + b
        const I b = r % B, ac = r / B;
        const I c = ac % C, a = ac / C;
        out[i] = x[((a * B + b) * C + c) * du + d];
    }
}

#define SWAP_AXES_DEFINE(SUF, U)                                                                   \
    extern "C" __global__ void swap_axes_##SUF(U* out, const U* x, long long A, long long B,      \
                                               long long C, long long du) {                        \
        const long long n = A * B * C * du;                                                        \
        if (n < (1LL << 31)) /* unsigned: n plus the grid stays below 2^32 */                      \
            swap_axes_loop<U, unsigned>(out, x, (unsigned)B, (unsigned)C, (unsigned)du, (unsigned)n); \
        else                                                                                       \
            swap_axes_loop<U, long long>(out, x, B, C, du, n);                                     \
    }

SWAP_AXES_DEFINE(u16, uint16_t)
SWAP_AXES_DEFINE(u32, uint32_t)
SWAP_AXES_DEFINE(u64, uint2)
SWAP_AXES_DEFINE(u128, uint4)

// split_heads_loop runs split_heads' grid-stride loop with index type I,
// which must hold n + the grid's thread count.
template <typename U, typename I>
__device__ __forceinline__ void split_heads_loop(U* __restrict__ q, U* __restrict__ k, U* __restrict__ v,
                                                 const U* __restrict__ x, I S, I Hq, I Hkv, I du, I n) {
    const I stride = (I)grid_stride(), H = Hq + 2 * Hkv;
    for (I i = (I)grid_tid(); i < n; i += stride) {
        const I d = i % du, r = i / du; // r = (b·S + s)·H + h
        const I h = r % H, bs = r / H;
        const I s = bs % S, b = bs / S;
        if (h < Hq)
            q[((b * Hq + h) * S + s) * du + d] = x[i];
        else if (h < Hq + Hkv)
            k[((b * Hkv + h - Hq) * S + s) * du + d] = x[i];
        else
            v[((b * Hkv + h - Hq - Hkv) * S + s) * du + d] = x[i];
    }
}

#define SPLIT_HEADS_DEFINE(SUF, U)                                                                           \
    extern "C" __global__ void split_heads_##SUF(U* q, U* k, U* v, const U* x, long long B, long long S,     \
                                                 long long Hq, long long Hkv, long long du) {                \
        const long long n = B * S * (Hq + 2 * Hkv) * du;                                                     \
        if (n < (1LL << 31))                                                                                 \
            split_heads_loop<U, unsigned>(q, k, v, x, (unsigned)S, (unsigned)Hq, (unsigned)Hkv, (unsigned)du, \
                                          (unsigned)n);                                                      \
        else                                                                                                 \
            split_heads_loop<U, long long>(q, k, v, x, S, Hq, Hkv, du, n);                                   \
    }

SPLIT_HEADS_DEFINE(u16, uint16_t)
SPLIT_HEADS_DEFINE(u32, uint32_t)
SPLIT_HEADS_DEFINE(u64, uint2)
SPLIT_HEADS_DEFINE(u128, uint4)

extern "C" __global__ void __launch_bounds__(256) transpose_u32(uint32_t* __restrict__ out,
                                                             const uint32_t* __restrict__ x, int R, int C) {
    __shared__ uint32_t tile[32][33]; // a column of padding: no bank conflicts on the transposed reads
    const long long c0 = (long long)blockIdx.x * 32, r0 = (long long)blockIdx.y * 32;
    for (int i = threadIdx.y; i < 32; i += 8) {
        const long long r = r0 + i, c = c0 + threadIdx.x;
        if (r < R && c < C) tile[i][threadIdx.x] = x[r * C + c];
    }
    __syncthreads();
    for (int i = threadIdx.y; i < 32; i += 8) {
        const long long c = c0 + i, r = r0 + threadIdx.x;
        if (c < C && r < R) out[c * R + r] = tile[threadIdx.x][i];
    }
}
