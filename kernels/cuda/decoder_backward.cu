// decoder_backward.cu: the DecoderBackward op group (kernels/decoder_backward.go):
// the RMSNorm gradient, the SwiGLU gradient and dropout with a counter-hash
// mask. Semantics: kernels/cpu/decoder_backward.go. Computed in float32,
// rounded to T on store. dgamma of RMSNorm is reduced from this file's
// per-block partials by norm.cu's layernorm_param_grads_T (dbeta NULL).

#include "common.cuh"

// ---------------------------------------------------------------------------
// rmsnorm_backward: block b handles rows b, b+nparts, ... (nparts =
// gridDim.x), with r = 1/sqrt(mean(x²)+eps) recomputed per row:
//   dx_j = r·gamma_j·dy_j − x_j·r³/d · Σ_k dy_k·gamma_k·x_k
// and the block's partial sums Σ_rows dy·x·r go to row b of part_dgamma.
// Thread t owns columns t, t+blockDim.x, ... in every loop, so its
// read-modify-writes of the partials need no barrier, and it reads dy_j
// before it writes dx_j: dx may alias dy.

template <typename T>
__device__ void rmsnorm_backward_impl(T* dx, float* part_dgamma, const T* dy, const T* x, const T* gamma, int rows,
                                      int d, float eps) {
    __shared__ float sh[32];
    if (d <= 0) return;
    const int b = blockIdx.x, nparts = gridDim.x;
    float* pg = part_dgamma != nullptr ? part_dgamma + (long long)b * d : nullptr;
    if (pg != nullptr)
        for (int j = threadIdx.x; j < d; j += blockDim.x) pg[j] = 0.0f;
    for (int r = b; r < rows; r += nparts) {
        const long long off = (long long)r * d;
        const T *xr = x + off, *dyr = dy + off;
        T* o = dx + off;
        float ss = 0.0f;
        for (int j = threadIdx.x; j < d; j += blockDim.x) {
            const float v = to_f32(xr[j]);
            ss += v * v;
        }
        ss = block_sum(ss, sh);
        const float inv = 1.0f / sqrtf(ss / (float)d + eps);
        float dot = 0.0f;
        for (int j = threadIdx.x; j < d; j += blockDim.x) {
            const float v = to_f32(xr[j]), g = to_f32(dyr[j]);
            dot += g * to_f32(gamma[j]) * v;
            if (pg != nullptr) pg[j] += g * v * inv;
        }
        dot = block_sum(dot, sh);
        const float c = dot / (float)d * inv * inv * inv;
        for (int j = threadIdx.x; j < d; j += blockDim.x)
            o[j] = from_f32<T>(inv * to_f32(gamma[j]) * to_f32(dyr[j]) - to_f32(xr[j]) * c);
    }
}

// ---------------------------------------------------------------------------
// Elementwise kernels: grid-stride loops over 16-byte packs when every
// pointer is 16-byte aligned, then a scalar tail (or a scalar loop over
// everything when one is not).

// swiglu_grad sets dg = dy·u·silu'(g) and du = dy·silu(g), with
// silu'(g) = σ(g)·(1 + g·σ(−g)) (σ(−g) computed directly, no cancellation).
__device__ __forceinline__ void swiglu_grad(float dy, float g, float u, float& dg, float& du) {
    const float s = act_sigmoid(g), sm = act_sigmoid(-g);
    dg = dy * u * (s * (1.0f + g * sm));
    du = dy * (g * s);
}

// swiglu_backward: every element's three inputs are loaded before its two
// outputs are stored, so each output may alias one input (not the other
// output). The pointers are not __restrict__: the compiler keeps the order.
template <typename T>
__device__ void swiglu_backward_impl(T* dgate, T* dup, const T* dy, const T* gate, const T* up, long long n) {
    constexpr int V = 16 / sizeof(T);
    const bool vec =
        aligned16(dgate) && aligned16(dup) && aligned16(dy) && aligned16(gate) && aligned16(up);
    const long long nv = vec ? n / V : 0;
    for (long long k = grid_tid(); k < nv; k += grid_stride()) {
        const long long i = k * V;
        const Pack<T> a = ld_pack(dy + i), g = ld_pack(gate + i), u = ld_pack(up + i);
        Pack<T> rg, ru;
#pragma unroll
        for (int e = 0; e < V; e++) {
            float fg, fu;
            swiglu_grad(to_f32(a.v[e]), to_f32(g.v[e]), to_f32(u.v[e]), fg, fu);
            rg.v[e] = from_f32<T>(fg);
            ru.v[e] = from_f32<T>(fu);
        }
        st_pack(dgate + i, rg);
        st_pack(dup + i, ru);
    }
    for (long long i = nv * V + grid_tid(); i < n; i += grid_stride()) {
        float fg, fu;
        swiglu_grad(to_f32(dy[i]), to_f32(gate[i]), to_f32(up[i]), fg, fu);
        dgate[i] = from_f32<T>(fg);
        dup[i] = from_f32<T>(fu);
    }
}

// dropout_uniform is kernels.DropoutUniform: splitmix64's finaliser of
// seed + (i+1)·0x9E3779B97F4A7C15, its top 24 bits over 2^24 (exact).
__device__ __forceinline__ float dropout_uniform(unsigned long long seed, long long i) {
    unsigned long long z = seed + ((unsigned long long)i + 1ull) * 0x9E3779B97F4A7C15ull;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    z ^= z >> 31;
    return (float)(z >> 40) * 5.9604644775390625e-8f; // 2^-24
}

// dropout: out[i] = x[i]·s when dropout_uniform(seed, i) ≥ p, else 0; out
// may alias x.
template <typename T>
__device__ void dropout_impl(T* out, const T* x, long long n, float p, float s, unsigned long long seed) {
    constexpr int V = 16 / sizeof(T);
    const long long nv = (aligned16(out) && aligned16(x)) ? n / V : 0;
    const T zero = from_f32<T>(0.0f);
    for (long long k = grid_tid(); k < nv; k += grid_stride()) {
        const long long i = k * V;
        const Pack<T> a = ld_pack(x + i);
        Pack<T> r;
#pragma unroll
        for (int e = 0; e < V; e++)
            r.v[e] = dropout_uniform(seed, i + e) >= p ? from_f32<T>(to_f32(a.v[e]) * s) : zero;
        st_pack(out + i, r);
    }
    for (long long i = nv * V + grid_tid(); i < n; i += grid_stride())
        out[i] = dropout_uniform(seed, i) >= p ? from_f32<T>(to_f32(x[i]) * s) : zero;
}

// ---------------------------------------------------------------------------
// Entry points.

#define DECODER_BACKWARD_DEFINE(SUF, T)                                                                       \
    /* rmsnorm_backward_T: dx, dy, x [rows, d]; gamma [d]; part_dgamma [nparts, d] float scratch (NULL: no     \
       dgamma), fully written; reduce it with layernorm_param_grads_T(dgamma, NULL, part_dgamma, NULL, nparts, \
       d) on the same stream. dx may alias dy. Launch: grid (nparts, 1, 1) with 1 <= nparts <= rows (e.g.      \
       min(rows, 2*SMs)), block (256, 1, 1) (any multiple of 32 up to 1024), no dynamic shared memory. */      \
    extern "C" __global__ void __launch_bounds__(1024)                                                        \
        rmsnorm_backward_##SUF(T* dx, float* part_dgamma, const T* dy, const T* x, const T* gamma, int rows,  \
                               int d, float eps) {                                                            \
        rmsnorm_backward_impl<T>(dx, part_dgamma, dy, x, gamma, rows, d, eps);                                \
    }                                                                                                         \
    /* swiglu_backward_T: dgate = dy·up·silu'(gate), dup = dy·silu(gate), n elements each; dgate and dup may  \
       each alias one of dy, gate, up. Launch: block (256, 1, 1), grid (min(ceil(n/256), 32·SMs), 1, 1), no   \
       shared memory (any grid and block >= 1 is correct: grid-stride loops). */                              \
    extern "C" __global__ void swiglu_backward_##SUF(T* dgate, T* dup, const T* dy, const T* gate, const T* up, \
                                                     long long n) {                                           \
        swiglu_backward_impl<T>(dgate, dup, dy, gate, up, n);                                                 \
    }                                                                                                         \
    /* dropout_T: out[i] = x[i]·s if dropout_uniform(seed, i) >= p else 0, n elements (i the flat index);     \
       s = float32(1/(1−p)) from the host; out may alias x. Launch as swiglu_backward_T. */                   \
    extern "C" __global__ void dropout_##SUF(T* out, const T* x, long long n, float p, float s,                \
                                             unsigned long long seed) {                                       \
        dropout_impl<T>(out, x, n, p, s, seed);                                                               \
    }

DECODER_BACKWARD_DEFINE(f32, float)
DECODER_BACKWARD_DEFINE(f16, __half)
DECODER_BACKWARD_DEFINE(bf16, __nv_bfloat16)
