// softmax.cu: row softmax with attention scaling and masks, and its
// backward. Semantics: Softmax and SoftmaxBackward in
// kernels/cpu/attention.go. One warp per row; computed in float32, rounded
// to T on store.

#include "common.cuh"

// softmax: row r of x [rows, sk] belongs to batch entry b = r / rows_per_batch
// and is query i = r % sq. It sees keys j < n with
//   n = min(sk, i + sk − sq + 1 if causal, keylens[b] if keylens), n ≥ 0
// (the masks only ever hide a suffix; causal is aligned bottom-right), and
//   out[r, j] = exp(scale·x[r,j] − m) / Σ_{j'<n} exp(scale·x[r,j'] − m) for j < n,
//   out[r, j] = 0 for j ≥ n,
// with m the row maximum of scale·x over j < n. A fully masked row (n = 0)
// is all zeros. scale = 0 means 1. NaN in the visible part gives a NaN row.
template <typename T>
__device__ void softmax_impl(T* out, const T* x, int rows, int sk, int sq, int rows_per_batch, float scale,
                             int causal, const int* keylens) {
    const int lane = threadIdx.x & 31, wpb = blockDim.x >> 5;
    if (scale == 0.0f) scale = 1.0f;
    // r is the same for all lanes of a warp: the warp reductions see full warps.
    for (long long r = (long long)blockIdx.x * wpb + (threadIdx.x >> 5); r < rows; r += (long long)gridDim.x * wpb) {
        long long lim = sk;
        if (causal && sq > 0) lim = min(lim, r % sq + sk - sq + 1);
        if (keylens != nullptr && rows_per_batch > 0) lim = min(lim, (long long)keylens[r / rows_per_batch]);
        const int n = lim < 0 ? 0 : (int)lim; // visible keys: [0, n)
        const T* xr = x + r * sk;
        T* o = out + r * sk;
        float m = -INFINITY;
        for (int j = lane; j < n; j += 32) m = fmaxf(m, to_f32(xr[j]) * scale);
        m = warp_max(m);
        float s = 0.0f;
        for (int j = lane; j < n; j += 32) s += expf(to_f32(xr[j]) * scale - m);
        s = warp_sum(s);
        const float inv = 1.0f / s;
        // Each lane rewrites only elements it read itself: out may alias x.
        for (int j = lane; j < n; j += 32) o[j] = from_f32<T>(expf(to_f32(xr[j]) * scale - m) * inv);
        for (int j = n + lane; j < sk; j += 32) o[j] = from_f32<T>(0.0f);
    }
}

// softmax_backward: dx = y ⊙ (dy − Σ_j dy⊙y) per row of n, the sum of the
// float32 products accumulated in float64 as the CPU does.
template <typename T> __device__ void softmax_backward_impl(T* dx, const T* dy, const T* y, int rows, int n) {
    const int lane = threadIdx.x & 31, wpb = blockDim.x >> 5;
    for (long long r = (long long)blockIdx.x * wpb + (threadIdx.x >> 5); r < rows; r += (long long)gridDim.x * wpb) {
        const T *yr = y + r * n, *dyr = dy + r * n;
        T* o = dx + r * n;
        double s = 0.0;
        for (int j = lane; j < n; j += 32) s += (double)(to_f32(yr[j]) * to_f32(dyr[j]));
        const float sf = (float)warp_sum(s);
        // After the warp reduction every lane has read its inputs: dx may alias dy or y.
        for (int j = lane; j < n; j += 32) {
            const float v = to_f32(yr[j]);
            o[j] = from_f32<T>(v * (to_f32(dyr[j]) - sf));
        }
    }
}

#define SOFTMAX_DEFINE(SUF, T)                                                                                  \
    /* softmax_T: x, out [rows, sk]; keylens [batch] int (NULL: no key mask), values in [0, sk]; sq and        \
       rows_per_batch are only read when causal / keylens ask for them. out may alias x.                       \
       Launch: block (256, 1, 1) = 8 rows (any multiple of 32 up to 1024: blockDim.x/32 rows per block),       \
       grid (ceil(rows/8), 1, 1) (any grid >= 1: grid-stride over rows), no shared memory. */                  \
    extern "C" __global__ void softmax_##SUF(T* out, const T* x, int rows, int sk, int sq, int rows_per_batch, \
                                             float scale, int causal, const int* keylens) {                    \
        softmax_impl<T>(out, x, rows, sk, sq, rows_per_batch, scale, causal, keylens);                         \
    }                                                                                                           \
    /* softmax_backward_T: dx, dy, y [rows, n]; dx may alias dy or y.                                          \
       Launch: block (256, 1, 1) = 8 rows (any multiple of 32 up to 1024), grid (ceil(rows/8), 1, 1)           \
       (any grid >= 1), no shared memory. */                                                                   \
    extern "C" __global__ void softmax_backward_##SUF(T* dx, const T* dy, const T* y, int rows, int n) {       \
        softmax_backward_impl<T>(dx, dy, y, rows, n);                                                          \
    }

SOFTMAX_DEFINE(f32, float)
SOFTMAX_DEFINE(f16, __half)
SOFTMAX_DEFINE(bf16, __nv_bfloat16)
