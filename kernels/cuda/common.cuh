// common.cuh: device helpers shared by the kernels in kernels/cuda/*.cu:
// element load/store as float32, activations and their derivatives (the
// semantics of kernels/cpu/elementwise.go), warp and block reductions, and
// device-side error reporting. Device functions only; no kernels here.
//
// Owned by the elementwise kernels' author. Others may add clearly named
// helpers at the END of this file, never change the existing ones.
#pragma once

#include <cuda_fp16.h>
#include <cuda_bf16.h>
#include <stdint.h>

// ---------------------------------------------------------------------------
// Element conversion: every op computes in float32 and rounds to its storage
// dtype on store, round to nearest even (as kernels.F16FromFloat32 and
// kernels.BF16FromFloat32 do; overflow gives ±Inf).

// flag_value records x, found at position i, in the error record err (4
// ints: flag, value, position, unused) unless an error is recorded there
// already; the host reports it at the next Sync (kernels/cuda/cuda.go).
__device__ __forceinline__ void flag_value(int* err, int x, long long i) {
    if (atomicCAS(err, 0, 1) == 0) {
        err[1] = x;
        err[2] = (int)i;
    }
}

__device__ __forceinline__ float to_f32(float x) { return x; }
__device__ __forceinline__ float to_f32(__half x) { return __half2float(x); }
__device__ __forceinline__ float to_f32(__nv_bfloat16 x) { return __bfloat162float(x); }

template <typename T> __device__ __forceinline__ T from_f32(float x);
template <> __device__ __forceinline__ float from_f32<float>(float x) { return x; }
template <> __device__ __forceinline__ __half from_f32<__half>(float x) { return __float2half_rn(x); }
template <> __device__ __forceinline__ __nv_bfloat16 from_f32<__nv_bfloat16>(float x) {
    return __float2bfloat16_rn(x);
}

// aligned_to reports whether p is a multiple of bytes (a power of two).
__device__ __forceinline__ bool aligned_to(const void* p, unsigned bytes) {
    return ((uintptr_t)p & (uintptr_t)(bytes - 1)) == 0;
}

// 4-element vector load/store between T memory and float registers. p must
// be aligned to 4·sizeof(T).
__device__ __forceinline__ void ld4(const float* p, float (&v)[4]) {
    const float4 x = *reinterpret_cast<const float4*>(p);
    v[0] = x.x;
    v[1] = x.y;
    v[2] = x.z;
    v[3] = x.w;
}
__device__ __forceinline__ void ld4(const __half* p, float (&v)[4]) {
    const uint2 x = *reinterpret_cast<const uint2*>(p);
    v[0] = __half2float(__ushort_as_half((unsigned short)(x.x & 0xffffu)));
    v[1] = __half2float(__ushort_as_half((unsigned short)(x.x >> 16)));
    v[2] = __half2float(__ushort_as_half((unsigned short)(x.y & 0xffffu)));
    v[3] = __half2float(__ushort_as_half((unsigned short)(x.y >> 16)));
}
__device__ __forceinline__ void ld4(const __nv_bfloat16* p, float (&v)[4]) {
    const uint2 x = *reinterpret_cast<const uint2*>(p);
    v[0] = __uint_as_float(x.x << 16);
    v[1] = __uint_as_float(x.x & 0xffff0000u);
    v[2] = __uint_as_float(x.y << 16);
    v[3] = __uint_as_float(x.y & 0xffff0000u);
}

__device__ __forceinline__ unsigned bits16(__half h) { return (unsigned)__half_as_ushort(h); }
__device__ __forceinline__ unsigned bits16(__nv_bfloat16 h) { return (unsigned)__bfloat16_as_ushort(h); }

__device__ __forceinline__ void st4(float* p, const float (&v)[4]) {
    *reinterpret_cast<float4*>(p) = make_float4(v[0], v[1], v[2], v[3]);
}
template <typename T> __device__ __forceinline__ void st4(T* p, const float (&v)[4]) {
    uint2 x;
    x.x = bits16(from_f32<T>(v[0])) | (bits16(from_f32<T>(v[1])) << 16);
    x.y = bits16(from_f32<T>(v[2])) | (bits16(from_f32<T>(v[3])) << 16);
    *reinterpret_cast<uint2*>(p) = x;
}

// ---------------------------------------------------------------------------
// Activations: codes are kernels.Activation values.

#define ACT_NONE 0
#define ACT_RELU 1
#define ACT_GELU 2      // x·Φ(x), exact erf
#define ACT_GELU_TANH 3 // 0.5x(1+tanh(√(2/π)(x+0.044715x³)))
#define ACT_SILU 4      // x·σ(x)
#define ACT_TANH 5      // tanh(x) (BERT's pooler)

#define ACT_INV_SQRT2 0.70710678118654752440f
#define ACT_INV_SQRT_2PI 0.39894228040143267794f
#define ACT_SQRT_2_OVER_PI 0.79788456080286535588f
#define ACT_GELU_COEF 0.044715f

// act_sigmoid is 1/(1+e^{−x}): 0 and 1 at the ends, no overflow trouble.
__device__ __forceinline__ float act_sigmoid(float x) { return 1.0f / (1.0f + expf(-x)); }

// SigmoidIEEE is act_sigmoid as a functor, the logistic function of
// act_apply.
struct SigmoidIEEE {
    __device__ __forceinline__ float operator()(float x) const { return act_sigmoid(x); }
};

// act_apply returns act(x), computing the logistic function with sig. NaN
// stays NaN (ReLU too, as Go's max does); unknown codes act as ACT_NONE (the
// host validates them).
template <typename Sigmoid = SigmoidIEEE>
__device__ __forceinline__ float act_apply(float x, int act, Sigmoid sig = Sigmoid()) {
    switch (act) {
    case ACT_RELU:
        return x > 0.0f ? x : (x != x ? x : 0.0f);
    case ACT_GELU: {
        // Φ(x) = erfc(−x/√2)/2, written so the negative tail keeps its
        // relative accuracy (the CPU's form).
        float z = x * ACT_INV_SQRT2;
        if (z >= 0.0f) return x - 0.5f * x * erfcf(z);
        return 0.5f * x * erfcf(-z);
    }
    case ACT_GELU_TANH:
        // x·σ(2u) = 0.5x(1+tanh u), without the cancellation of 1+tanh.
        return x * sig(2.0f * ACT_SQRT_2_OVER_PI * (x + ACT_GELU_COEF * x * x * x));
    case ACT_SILU:
        return x * sig(x);
    case ACT_TANH:
        return tanhf(x);
    default:
        return x;
    }
}

// act_grad returns act'(x). ±Inf and NaN give NaN for GELU and GELU-tanh,
// as the CPU's float64 formulas do.
__device__ __forceinline__ float act_grad(float x, int act) {
    switch (act) {
    case ACT_RELU:
        return x > 0.0f ? 1.0f : 0.0f;
    case ACT_GELU: {
        if (!(fabsf(x) <= 3.402823466e38f)) return x - x; // NaN for ±Inf, NaN
        // Φ(x) + x·φ(x)
        return 0.5f * erfcf(-x * ACT_INV_SQRT2) + x * ACT_INV_SQRT_2PI * expf(-0.5f * x * x);
    }
    case ACT_GELU_TANH: {
        if (!(fabsf(x) <= 3.402823466e38f)) return x - x;
        // With t = tanh u: 0.5(1+t) = σ(2u) = s and 1−t² = 4·s·(1−s),
        // 1−s = σ(−2u) = sm computed directly (no cancellation).
        float u2 = 2.0f * ACT_SQRT_2_OVER_PI * (x + ACT_GELU_COEF * x * x * x);
        float s = act_sigmoid(u2), sm = act_sigmoid(-u2);
        float r = s;
        if (s > 0.0f && sm > 0.0f)
            r += 2.0f * x * s * sm * ACT_SQRT_2_OVER_PI * (1.0f + 3.0f * ACT_GELU_COEF * x * x);
        return r;
    }
    case ACT_SILU: {
        // σ(x)·(1 + x·(1−σ(x)))
        float s = act_sigmoid(x), sm = act_sigmoid(-x);
        return s * (1.0f + x * sm);
    }
    case ACT_TANH: {
        // 1 − tanh²(x): 0 at ±Inf, NaN for NaN.
        float t = tanhf(x);
        return 1.0f - t * t;
    }
    default:
        return 1.0f;
    }
}

// act_backward returns dy·act'(x); for ReLU and none it selects dy rather
// than multiplying (the CPU gives 0 for x ≤ 0 even when dy is not finite).
__device__ __forceinline__ float act_backward(float dy, float x, int act) {
    switch (act) {
    case ACT_NONE:
        return dy;
    case ACT_RELU:
        return x > 0.0f ? dy : 0.0f;
    default:
        return dy * act_grad(x, act);
    }
}

// ---------------------------------------------------------------------------
// Reductions. Warp versions need all 32 lanes of the warp active; the result
// is in every lane. Block versions need blockDim.x a multiple of 32 (at most
// 1024), blockDim.y = blockDim.z = 1, every thread of the block calling, and
// sh a __shared__ array of at least 32 elements; the result is in every
// thread. They may be called back to back with the same sh.

__device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}

__device__ __forceinline__ double warp_sum(double v) {
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}

// warp_max ignores NaN (fmaxf); callers whose rows may hold NaN get NaN
// through their sums instead.
__device__ __forceinline__ float warp_max(float v) {
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
    return v;
}

template <typename F>
__device__ __forceinline__ F block_sum_t(F v, F* sh) {
    const int lane = threadIdx.x & 31, wid = threadIdx.x >> 5, nw = blockDim.x >> 5;
    v = warp_sum(v);
    __syncthreads(); // sh may still be read by a previous call
    if (lane == 0) sh[wid] = v;
    __syncthreads();
    v = lane < nw ? sh[lane] : F(0);
    return warp_sum(v);
}

__device__ __forceinline__ float block_sum(float v, float* sh) { return block_sum_t<float>(v, sh); }
__device__ __forceinline__ double block_sum(double v, double* sh) { return block_sum_t<double>(v, sh); }

__device__ __forceinline__ float block_max(float v, float* sh) {
    const int lane = threadIdx.x & 31, wid = threadIdx.x >> 5, nw = blockDim.x >> 5;
    v = warp_max(v);
    __syncthreads();
    if (lane == 0) sh[wid] = v;
    __syncthreads();
    v = lane < nw ? sh[lane] : -INFINITY;
    return warp_max(v);
}

// ---------------------------------------------------------------------------
// Grid-stride loops: for (long long i = grid_tid(); i < n; i += grid_stride()).

__device__ __forceinline__ long long grid_tid() {
    return (long long)blockIdx.x * blockDim.x + threadIdx.x;
}
__device__ __forceinline__ long long grid_stride() { return (long long)gridDim.x * blockDim.x; }

// ---------------------------------------------------------------------------
// Device-side errors: err points to 4 ints zeroed by the host (may be NULL).
#define ERR_EMBEDDING_ID 1 // embedding id out of range
#define ERR_CE_TARGET 2    // cross-entropy target out of range

__device__ __forceinline__ void report_error(int* err, int code, int value, long long position) {
    if (err != nullptr && atomicCAS(err, 0, code) == 0) {
        err[1] = value;
        err[2] = (int)position;
    }
}

// Pack is 16 bytes of elements, for vectorised loads and stores of
// elementwise kernels (16-byte aligned pointers take the vector path).
template <typename T> struct alignas(16) Pack {
    T v[16 / sizeof(T)];
};

__device__ __forceinline__ bool aligned16(const void* p) { return ((uintptr_t)p & 15) == 0; }

template <typename T> __device__ __forceinline__ Pack<T> ld_pack(const T* p) {
    return *reinterpret_cast<const Pack<T>*>(p);
}
template <typename T> __device__ __forceinline__ void st_pack(T* p, const Pack<T>& v) {
    *reinterpret_cast<Pack<T>*>(p) = v;
}

// ---------------------------------------------------------------------------
// Scaling maxima and the tile order of the GEMM kernels.

// absbits is |x|'s bits: the order of the non-negative floats, every NaN
// above +Inf.
__device__ __forceinline__ unsigned absbits(float x) { return __float_as_uint(x) & 0x7fffffffu; }

// warp_umax returns the largest v of the warp in every lane (all 32 lanes
// active).
__device__ __forceinline__ unsigned warp_umax(unsigned v) {
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) v = max(v, __shfl_xor_sync(0xffffffffu, v, o));
    return v;
}

// tile_coords maps the linear block index to (block row, block column) in
// groups of 8 block rows, a bijection onto gridDim.y x gridDim.x.
__device__ __forceinline__ void tile_coords(int& tm, int& tn) {
    constexpr int GROUP = 8;
    const int gx = (int)gridDim.x, gy = (int)gridDim.y;
    const int pid = (int)blockIdx.y * gx + (int)blockIdx.x;
    const int per_group = GROUP * gx;
    const int group = pid / per_group;
    const int first = group * GROUP;
    const int size = min(gy - first, GROUP);
    const int in = pid - group * per_group;
    tm = first + in % size;
    tn = in / size;
}

// ---------------------------------------------------------------------------
// Packing of 16-bit pairs.

// pack2 is the T pair (a, b), each rounded to nearest even, a in the low
// half, as a 32-bit register (a half2 or bfloat162 mma.sync fragment).
__device__ __forceinline__ unsigned pack2(float a, float b, __half) {
    const __half2 h = __floats2half2_rn(a, b);
    return *reinterpret_cast<const unsigned*>(&h);
}
__device__ __forceinline__ unsigned pack2(float a, float b, __nv_bfloat16) {
    const __nv_bfloat162 h = __floats2bfloat162_rn(a, b);
    return *reinterpret_cast<const unsigned*>(&h);
}

// ---------------------------------------------------------------------------
// Wide loads of x rows for the matrix-vector kernels (wquant.cu's and
// matmul.cu's gemv): lo16 and hi16 are the 16-bit elements of a 32-bit
// word as float32.

// ldx sets v to the NV (4 or 8) elements of T at p as float32; p is
// aligned to NV·sizeof(T) (16 bytes for f32).
template <int NV> __device__ __forceinline__ void ldx(const float* p, float (&v)[NV]) {
#pragma unroll
    for (int i = 0; i < NV; i += 4) {
        const float4 a = *reinterpret_cast<const float4*>(p + i);
        v[i] = a.x;
        v[i + 1] = a.y;
        v[i + 2] = a.z;
        v[i + 3] = a.w;
    }
}
__device__ __forceinline__ float lo16(unsigned u, __half) {
    return __half2float(__ushort_as_half((unsigned short)(u & 0xffffu)));
}
__device__ __forceinline__ float hi16(unsigned u, __half) {
    return __half2float(__ushort_as_half((unsigned short)(u >> 16)));
}
__device__ __forceinline__ float lo16(unsigned u, __nv_bfloat16) { return __uint_as_float(u << 16); }
__device__ __forceinline__ float hi16(unsigned u, __nv_bfloat16) { return __uint_as_float(u & 0xffff0000u); }
// widen8 sets v to the eight 16-bit elements of T in a, in order, as
// float32.
template <typename T> __device__ __forceinline__ void widen8(const uint4& a, float (&v)[8]) {
    const unsigned u[4] = {a.x, a.y, a.z, a.w};
#pragma unroll
    for (int i = 0; i < 4; i++) {
        v[2 * i] = lo16(u[i], T());
        v[2 * i + 1] = hi16(u[i], T());
    }
}
template <int NV, typename T> __device__ __forceinline__ void ldx(const T* p, float (&v)[NV]) {
    if constexpr (NV == 8) {
        widen8<T>(*reinterpret_cast<const uint4*>(p), v);
    } else {
        const uint2 a = *reinterpret_cast<const uint2*>(p);
        v[0] = lo16(a.x, T());
        v[1] = hi16(a.x, T());
        v[2] = lo16(a.y, T());
        v[3] = hi16(a.y, T());
    }
}
