// qconv.cu: the QuantConv op group's own kernel (kernels/quant_conv.go).
// QConv2D (qconv.go) is an explicit GEMM: this kernel gathers the int8
// patches of a slab of output pixels for one group into a [rows, K]
// matrix, which QMatMul's kernels (quant.cu) multiply by the group's
// filters [Co/G, K] with the epilogue and residual fused.
//
// Kernel:
//
//  qconv_im2col(int8_t* col, const int8_t* x, int p0, int rows, int group,
//               int H, int W, int Ci, int Ho, int Wo, int Kh, int Kw,
//               int sh, int sw, int ph, int pw, int dh, int dw, int cg,
//               int vec)
//    For r < rows, output pixel p = p0 + r at (n, i, j) of [N, Ho, Wo],
//    tap (kh, kw) and channel c < cg (cg = Ci/G, the group's channels):
//
//      col[r·K + (kh·Kw + kw)·cg + c] = x[n, y, xx, group·cg + c],
//      y = i·sh − ph + kh·dh, xx = j·sw − pw + kw·dw,
//
//    and 0 where (y, xx) is outside the H×W image (zero padding is the
//    quantized 0), K = Kh·Kw·cg; x is NHWC [N, H, W, Ci]. The copies move
//    vec bytes at a time, 16, 4 or 1: cg % vec == 0 and x and col
//    vec-aligned. Grid-stride over the rows·K/vec chunks, one per thread
//    and step, consecutive threads on consecutive chunks of a row (the
//    stores coalesce; so do the loads of one pixel's channels). Any 1-D
//    grid and block; no shared memory. Every index of the image and of K
//    fits in int (the host checks); element offsets are 64-bit.

#include "common.cuh"

namespace qc {

// Chunk is V bytes moved as one access.
template <int V> struct Chunk;
template <> struct Chunk<16> {
    using type = int4;
    __device__ static __forceinline__ int4 zero() { return make_int4(0, 0, 0, 0); }
};
template <> struct Chunk<4> {
    using type = int;
    __device__ static __forceinline__ int zero() { return 0; }
};
template <> struct Chunk<1> {
    using type = int8_t;
    __device__ static __forceinline__ int8_t zero() { return 0; }
};

template <int V>
__device__ __forceinline__ void im2col(int8_t* __restrict__ col, const int8_t* __restrict__ x, int p0, int rows,
                                       int group, int H, int W, int Ci, int Ho, int Wo, int Kh, int Kw, int sh, int sw,
                                       int ph, int pw, int dh, int dw, int cg) {
    using C = typename Chunk<V>::type;
    const int cpt = cg / V; // chunks per tap
    const int taps = Kh * Kw;
    const int K = taps * cg;
    const long long total = (long long)rows * taps * cpt;
    const long long step = (long long)gridDim.x * blockDim.x;
    for (long long idx = (long long)blockIdx.x * blockDim.x + threadIdx.x; idx < total; idx += step) {
        const int cc = (int)(idx % cpt);
        const long long t = idx / cpt;
        const int tap = (int)(t % taps);
        const int r = (int)(t / taps);
        const int p = p0 + r;
        const int j = p % Wo, q = p / Wo;
        const int i = q % Ho, n = q / Ho;
        const int kh = tap / Kw, kw = tap - kh * Kw;
        const int y = i * sh - ph + kh * dh, xx = j * sw - pw + kw * dw;
        const int c = cc * V;
        C v = Chunk<V>::zero();
        if (y >= 0 && y < H && xx >= 0 && xx < W)
            v = *reinterpret_cast<const C*>(x + (((long long)n * H + y) * W + xx) * Ci + group * cg + c);
        *reinterpret_cast<C*>(col + (long long)r * K + tap * cg + c) = v;
    }
}

} // namespace qc

extern "C" __global__ void __launch_bounds__(256)
    qconv_im2col(int8_t* __restrict__ col, const int8_t* __restrict__ x, int p0, int rows, int group, int H, int W,
                 int Ci, int Ho, int Wo, int Kh, int Kw, int sh, int sw, int ph, int pw, int dh, int dw, int cg,
                 int vec) {
    switch (vec) {
    case 16: qc::im2col<16>(col, x, p0, rows, group, H, W, Ci, Ho, Wo, Kh, Kw, sh, sw, ph, pw, dh, dw, cg); break;
    case 4: qc::im2col<4>(col, x, p0, rows, group, H, W, Ci, Ho, Wo, Kh, Kw, sh, sw, ph, pw, dh, dw, cg); break;
    default: qc::im2col<1>(col, x, p0, rows, group, H, W, Ci, Ho, Wo, Kh, Kw, sh, sw, ph, pw, dh, dw, cg); break;
    }
}
