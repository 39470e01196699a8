// norm.cu: LayerNorm (forward, backward, parameter-gradient reduction) and
// RMSNorm over the last dimension. Semantics: kernels/cpu/norm.go (biased
// variance, rstd = 1/sqrt(var + eps), statistics in float32 out). Computed in
// float32, rounded to T on store.

#include "common.cuh"

// ---------------------------------------------------------------------------
// layernorm: one block per row (grid-stride over rows). The mean is taken
// around the row's first element (x0 + Σ(x−x0)/d) so that a large common
// offset costs no precision; the variance is a second, centred pass.

template <typename T>
__device__ void layernorm_impl(T* out, float* mean, float* rstd, const T* x, const T* gamma, const T* beta,
                               int rows, int d, float eps) {
    __shared__ float sh[32];
    if (d <= 0) return;
    for (int r = blockIdx.x; r < rows; r += gridDim.x) {
        const T* xr = x + (long long)r * d;
        T* o = out + (long long)r * d;
        const float x0 = to_f32(xr[0]);
        float s = 0.0f;
        for (int j = threadIdx.x; j < d; j += blockDim.x) s += to_f32(xr[j]) - x0;
        s = block_sum(s, sh);
        const float mu = x0 + s / (float)d;
        float v = 0.0f;
        for (int j = threadIdx.x; j < d; j += blockDim.x) {
            const float c = to_f32(xr[j]) - mu;
            v += c * c;
        }
        v = block_sum(v, sh);
        const float inv = 1.0f / sqrtf(v / (float)d + eps);
        if (threadIdx.x == 0) {
            if (mean != nullptr) mean[r] = mu;
            if (rstd != nullptr) rstd[r] = inv;
        }
        for (int j = threadIdx.x; j < d; j += blockDim.x) {
            float y = (to_f32(xr[j]) - mu) * inv * to_f32(gamma[j]);
            if (beta != nullptr) y += to_f32(beta[j]);
            o[j] = from_f32<T>(y);
        }
    }
}

// ---------------------------------------------------------------------------
// layernorm_backward: block b handles rows b, b+nparts, ... (nparts =
// gridDim.x). With xh = (x−mean)·rstd and g = dy·gamma:
//   dx = rstd·(g − mean_j(g) − xh·mean_j(g·xh))
// and the block's partial sums Σ_rows dy·xh, Σ_rows dy go to row b of
// part_dgamma / part_dbeta. Thread t owns columns t, t+blockDim.x, ... in
// every loop, so its read-modify-writes of the partials need no barrier.

template <typename T>
__device__ void layernorm_backward_impl(T* dx, float* part_dgamma, float* part_dbeta, const T* dy, const T* x,
                                        const T* gamma, const float* mean, const float* rstd, int rows, int d) {
    __shared__ float sh[32];
    if (d <= 0) return;
    const int b = blockIdx.x, nparts = gridDim.x;
    float* pg = part_dgamma != nullptr ? part_dgamma + (long long)b * d : nullptr;
    float* pb = part_dbeta != nullptr ? part_dbeta + (long long)b * d : nullptr;
    for (int j = threadIdx.x; j < d; j += blockDim.x) {
        if (pg != nullptr) pg[j] = 0.0f;
        if (pb != nullptr) pb[j] = 0.0f;
    }
    for (int r = b; r < rows; r += nparts) {
        const long long off = (long long)r * d;
        const T *xr = x + off, *dyr = dy + off;
        T* o = dx + off;
        const float m = mean[r], inv = rstd[r];
        float sg = 0.0f, sgx = 0.0f;
        for (int j = threadIdx.x; j < d; j += blockDim.x) {
            const float xh = (to_f32(xr[j]) - m) * inv;
            const float dyv = to_f32(dyr[j]);
            const float gj = dyv * (gamma != nullptr ? to_f32(gamma[j]) : 1.0f);
            sg += gj;
            sgx += gj * xh;
            if (pg != nullptr) pg[j] += dyv * xh;
            if (pb != nullptr) pb[j] += dyv;
        }
        // Every thread has read its dy and x of this row before these
        // barriers, so dx may alias dy or x.
        sg = block_sum(sg, sh);
        sgx = block_sum(sgx, sh);
        const float a = sg / (float)d, bx = sgx / (float)d;
        for (int j = threadIdx.x; j < d; j += blockDim.x) {
            const float xh = (to_f32(xr[j]) - m) * inv;
            const float gj = to_f32(dyr[j]) * (gamma != nullptr ? to_f32(gamma[j]) : 1.0f);
            o[j] = from_f32<T>(inv * (gj - a - xh * bx));
        }
    }
}

// layernorm_param_grads: dgamma[j] = Σ_b part_dgamma[b*d + j] (likewise
// dbeta), summed in block order in float64: deterministic.
template <typename T>
__device__ void layernorm_param_grads_impl(T* dgamma, T* dbeta, const float* part_dgamma, const float* part_dbeta,
                                           int nparts, int d) {
    for (long long j = grid_tid(); j < d; j += grid_stride()) {
        if (dgamma != nullptr && part_dgamma != nullptr) {
            double s = 0.0;
            for (int b = 0; b < nparts; b++) s += part_dgamma[(long long)b * d + j];
            dgamma[j] = from_f32<T>((float)s);
        }
        if (dbeta != nullptr && part_dbeta != nullptr) {
            double s = 0.0;
            for (int b = 0; b < nparts; b++) s += part_dbeta[(long long)b * d + j];
            dbeta[j] = from_f32<T>((float)s);
        }
    }
}

// ---------------------------------------------------------------------------
// rmsnorm: out = x·rsqrt(mean(x²) + eps)·gamma, one block per row.

template <typename T>
__device__ void rmsnorm_impl(T* out, const T* x, const T* gamma, int rows, int d, float eps) {
    __shared__ float sh[32];
    if (d <= 0) return;
    for (int r = blockIdx.x; r < rows; r += gridDim.x) {
        const T* xr = x + (long long)r * d;
        T* o = out + (long long)r * d;
        float s = 0.0f;
        for (int j = threadIdx.x; j < d; j += blockDim.x) {
            const float v = to_f32(xr[j]);
            s += v * v;
        }
        s = block_sum(s, sh);
        const float inv = 1.0f / sqrtf(s / (float)d + eps);
        for (int j = threadIdx.x; j < d; j += blockDim.x) o[j] = from_f32<T>(to_f32(xr[j]) * inv * to_f32(gamma[j]));
    }
}

// ---------------------------------------------------------------------------
// Entry points.

#define NORM_DEFINE(SUF, T)                                                                                    \
    /* layernorm_T: x, out [rows, d]; gamma, beta [d]; mean, rstd [rows] float (mean, rstd, beta may be NULL); \
       out may alias x. Launch: grid (min(rows, 2^31-1), 1, 1), block (256, 1, 1) (any multiple of 32 up to    \
       1024), no dynamic shared memory. */                                                                     \
    extern "C" __global__ void __launch_bounds__(1024)                                                         \
        layernorm_##SUF(T* out, float* mean, float* rstd, const T* x, const T* gamma, const T* beta, int rows, \
                        int d, float eps) {                                                                    \
        layernorm_impl<T>(out, mean, rstd, x, gamma, beta, rows, d, eps);                                      \
    }                                                                                                          \
    /* layernorm_backward_T: dx, dy, x [rows, d]; gamma [d] (NULL means ones); mean, rstd [rows] float from    \
       the forward; part_dgamma, part_dbeta [nparts, d] float scratch (either may be NULL), fully written.     \
       dx may alias dy or x. Launch: grid (nparts, 1, 1) with 1 <= nparts <= rows (e.g. min(rows, 2*SMs)),     \
       block (256, 1, 1) (any multiple of 32 up to 1024), no dynamic shared memory. */                         \
    extern "C" __global__ void __launch_bounds__(1024)                                                         \
        layernorm_backward_##SUF(T* dx, float* part_dgamma, float* part_dbeta, const T* dy, const T* x,        \
                                 const T* gamma, const float* mean, const float* rstd, int rows, int d) {      \
        layernorm_backward_impl<T>(dx, part_dgamma, part_dbeta, dy, x, gamma, mean, rstd, rows, d);            \
    }                                                                                                          \
    /* layernorm_param_grads_T: dgamma[j] = Σ_b part_dgamma[b*d+j], dbeta likewise (each output is skipped     \
       when it or its partials are NULL). Run after layernorm_backward_T on the same stream.                   \
       Launch: grid (ceil(d/256), 1, 1), block (256, 1, 1), no shared memory (any grid, block >= 1). */        \
    extern "C" __global__ void layernorm_param_grads_##SUF(T* dgamma, T* dbeta, const float* part_dgamma,      \
                                                           const float* part_dbeta, int nparts, int d) {       \
        layernorm_param_grads_impl<T>(dgamma, dbeta, part_dgamma, part_dbeta, nparts, d);                      \
    }                                                                                                          \
    /* rmsnorm_T: x, out [rows, d]; gamma [d]; out may alias x. Launch: grid (min(rows, 2^31-1), 1, 1),        \
       block (256, 1, 1) (any multiple of 32 up to 1024), no dynamic shared memory. */                         \
    extern "C" __global__ void __launch_bounds__(1024)                                                         \
        rmsnorm_##SUF(T* out, const T* x, const T* gamma, int rows, int d, float eps) {                        \
        rmsnorm_impl<T>(out, x, gamma, rows, d, eps);                                                          \
    }

NORM_DEFINE(f32, float)
NORM_DEFINE(f16, __half)
NORM_DEFINE(bf16, __nv_bfloat16)
