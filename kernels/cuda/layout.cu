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
