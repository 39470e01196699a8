// elementwise.cu: elementwise kernels (fill, scale, broadcast add,
// activations and their backward, dtype cast) and the column sums of a
// matrix (sum_rows). Semantics: kernels/cpu/elementwise.go and
// kernels/dtype.go. Every kernel computes in float32 and rounds to the
// output dtype on store (round to nearest even).
//
// Launch configuration shared by fill, scale, add, act, act_backward, cast:
//   block = (256, 1, 1), grid = (min(ceil(n/256), 65535), 1, 1), no shared
//   memory. Any grid ≥ 1 and any block size ≥ 1 is correct (grid-stride
//   loops). No alignment preconditions: 16-byte aligned pointers take a
//   vectorised path, others a scalar one.

#include "common.cuh"

// ---------------------------------------------------------------------------
// fill: out[i] = v rounded to T.

template <typename T> __device__ void fill_impl(T* out, long long n, float v) {
    constexpr int V = 16 / sizeof(T);
    const T t = from_f32<T>(v);
    const long long nv = aligned16(out) ? n / V : 0;
    Pack<T> p;
#pragma unroll
    for (int e = 0; e < V; e++) p.v[e] = t;
    for (long long k = grid_tid(); k < nv; k += grid_stride()) st_pack(out + k * V, p);
    for (long long i = nv * V + grid_tid(); i < n; i += grid_stride()) out[i] = t;
}

// ---------------------------------------------------------------------------
// scale: out[i] = s·x[i].

template <typename T> __device__ void scale_impl(T* out, const T* x, long long n, float s) {
    constexpr int V = 16 / sizeof(T);
    const long long nv = (aligned16(out) && aligned16(x)) ? n / V : 0;
    for (long long k = grid_tid(); k < nv; k += grid_stride()) {
        Pack<T> a = ld_pack(x + k * V), r;
#pragma unroll
        for (int e = 0; e < V; e++) r.v[e] = from_f32<T>(s * to_f32(a.v[e]));
        st_pack(out + k * V, r);
    }
    for (long long i = nv * V + grid_tid(); i < n; i += grid_stride())
        out[i] = from_f32<T>(s * to_f32(x[i]));
}

// ---------------------------------------------------------------------------
// add: out[i] = a[i] + b[i % nb] (b is a suffix of a's shape, repeated).

template <typename T>
__device__ void add_impl(T* out, const T* a, const T* b, long long n, long long nb) {
    constexpr int V = 16 / sizeof(T);
    if (nb <= 0) return; // precondition nb ≥ 1
    const bool vec = aligned16(out) && aligned16(a) && aligned16(b) && nb % V == 0;
    const long long nv = vec ? n / V : 0;
    for (long long k = grid_tid(); k < nv; k += grid_stride()) {
        const long long i = k * V;
        const long long j = nb == n ? i : i % nb; // a multiple of V: b + j is aligned
        Pack<T> x = ld_pack(a + i), y = ld_pack(b + j), r;
#pragma unroll
        for (int e = 0; e < V; e++) r.v[e] = from_f32<T>(to_f32(x.v[e]) + to_f32(y.v[e]));
        st_pack(out + i, r);
    }
    for (long long i = nv * V + grid_tid(); i < n; i += grid_stride()) {
        const long long j = nb == n ? i : i % nb;
        out[i] = from_f32<T>(to_f32(a[i]) + to_f32(b[j]));
    }
}

// ---------------------------------------------------------------------------
// act: out[i] = act(x[i]); act_backward: dx[i] = dy[i]·act'(x[i]). The
// activation is a template argument so that each loop inlines one function.

template <typename T, int ACT> __device__ void act_impl(T* out, const T* x, long long n) {
    constexpr int V = 16 / sizeof(T);
    const long long nv = (aligned16(out) && aligned16(x)) ? n / V : 0;
    for (long long k = grid_tid(); k < nv; k += grid_stride()) {
        Pack<T> a = ld_pack(x + k * V), r;
#pragma unroll
        for (int e = 0; e < V; e++) r.v[e] = from_f32<T>(act_apply(to_f32(a.v[e]), ACT));
        st_pack(out + k * V, r);
    }
    for (long long i = nv * V + grid_tid(); i < n; i += grid_stride())
        out[i] = from_f32<T>(act_apply(to_f32(x[i]), ACT));
}

template <typename T> __device__ void act_dispatch(T* out, const T* x, long long n, int act) {
    switch (act) {
    case ACT_NONE: act_impl<T, ACT_NONE>(out, x, n); break;
    case ACT_RELU: act_impl<T, ACT_RELU>(out, x, n); break;
    case ACT_GELU: act_impl<T, ACT_GELU>(out, x, n); break;
    case ACT_GELU_TANH: act_impl<T, ACT_GELU_TANH>(out, x, n); break;
    case ACT_SILU: act_impl<T, ACT_SILU>(out, x, n); break;
    case ACT_TANH: act_impl<T, ACT_TANH>(out, x, n); break;
    default: break; // the host validates act
    }
}

template <typename T, int ACT>
__device__ void act_backward_impl(T* dx, const T* dy, const T* x, long long n) {
    constexpr int V = 16 / sizeof(T);
    const long long nv = (aligned16(dx) && aligned16(dy) && aligned16(x)) ? n / V : 0;
    for (long long k = grid_tid(); k < nv; k += grid_stride()) {
        Pack<T> g = ld_pack(dy + k * V), a = ld_pack(x + k * V), r;
#pragma unroll
        for (int e = 0; e < V; e++)
            r.v[e] = from_f32<T>(act_backward(to_f32(g.v[e]), to_f32(a.v[e]), ACT));
        st_pack(dx + k * V, r);
    }
    for (long long i = nv * V + grid_tid(); i < n; i += grid_stride())
        dx[i] = from_f32<T>(act_backward(to_f32(dy[i]), to_f32(x[i]), ACT));
}

template <typename T>
__device__ void act_backward_dispatch(T* dx, const T* dy, const T* x, long long n, int act) {
    switch (act) {
    case ACT_NONE: act_backward_impl<T, ACT_NONE>(dx, dy, x, n); break;
    case ACT_RELU: act_backward_impl<T, ACT_RELU>(dx, dy, x, n); break;
    case ACT_GELU: act_backward_impl<T, ACT_GELU>(dx, dy, x, n); break;
    case ACT_GELU_TANH: act_backward_impl<T, ACT_GELU_TANH>(dx, dy, x, n); break;
    case ACT_SILU: act_backward_impl<T, ACT_SILU>(dx, dy, x, n); break;
    case ACT_TANH: act_backward_impl<T, ACT_TANH>(dx, dy, x, n); break;
    default: break;
    }
}

// ---------------------------------------------------------------------------
// sum_rows: out[j] = Σ_r x[r, j] for x [rows, n], accumulated in float.
// Block (32, BY): threadIdx.x picks the column, threadIdx.y the residue of
// the row modulo BY; the BY partial sums of a column are added in order.

#define SUMROWS_BX 32
#define SUMROWS_BY 32

template <typename T>
__device__ void sum_rows_impl(T* out, const T* x, long long rows, int n) {
    __shared__ float sh[SUMROWS_BY][SUMROWS_BX + 1];
    const int tx = threadIdx.x, ty = threadIdx.y, by = blockDim.y;
    for (long long c0 = (long long)blockIdx.x * SUMROWS_BX; c0 < n; c0 += (long long)gridDim.x * SUMROWS_BX) {
        const long long c = c0 + tx;
        float acc = 0.0f;
        if (c < n) {
#pragma unroll 4
            for (long long r = ty; r < rows; r += by) acc += to_f32(x[r * n + c]);
        }
        sh[ty][tx] = acc;
        __syncthreads();
        if (ty == 0 && c < n) {
            float s = 0.0f;
            for (int k = 0; k < by; k++) s += sh[k][tx];
            out[c] = from_f32<T>(s);
        }
        __syncthreads(); // sh is rewritten by the next column block
    }
}

// ---------------------------------------------------------------------------
// cast: dtype codes are kernels.DType values.

#define DT_F32 1
#define DT_F16 2
#define DT_BF16 3
#define DT_I8 4
#define DT_E4M3 5
#define DT_E5M2 6
#define DT_I32 7

#define CANONICAL_NAN_BITS 0x7fc00000u // float32(math.NaN()) in Go

// f16 widening with x448/float16's NaN payload rule (sign | 0x7fc00000 |
// mantissa<<13); everything else is exact in hardware.
__device__ __forceinline__ float dec_f16(uint16_t h) {
    if ((h & 0x7c00u) == 0x7c00u && (h & 0x3ffu) != 0)
        return __uint_as_float(((uint32_t)(h & 0x8000u) << 16) | 0x7fc00000u | ((uint32_t)(h & 0x3ffu) << 13));
    return __half2float(__ushort_as_half(h));
}

// kernels.F16FromFloat32: round to nearest even, overflow to ±Inf (as
// __float2half_rn); NaN as x448/float16: sign | 0x7c00 | 0x200 | mant>>13.
__device__ __forceinline__ uint16_t enc_f16(float f) {
    const uint32_t u = __float_as_uint(f);
    if ((u & 0x7fffffffu) > 0x7f800000u)
        return (uint16_t)(((u >> 16) & 0x8000u) | 0x7c00u | 0x200u | ((u & 0x7fffffu) >> 13));
    return __half_as_ushort(__float2half_rn(f));
}

__device__ __forceinline__ float dec_bf16(uint16_t h) { return __uint_as_float((uint32_t)h << 16); }

// kernels.BF16FromFloat32, bit for bit.
__device__ __forceinline__ uint16_t enc_bf16(float f) {
    uint32_t u = __float_as_uint(f);
    if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)(u >> 16) | 0x40u;
    u += 0x7fffu + ((u >> 16) & 1u);
    return (uint16_t)(u >> 16);
}

// kernels.I8FromFloat32: ties to even, saturating, NaN gives 0.
__device__ __forceinline__ int8_t enc_i8(float f) {
    if (f != f) return 0;
    if (f >= 127.0f) return 127;
    if (f <= -128.0f) return -128;
    return (int8_t)__float2int_rn(f);
}

// kernels.Round(I32, ·): ties to even, saturating, NaN gives 0.
__device__ __forceinline__ int32_t enc_i32(float f) {
    if (f != f) return 0;
    if (f >= 2147483648.0f) return 2147483647;
    if (f <= -2147483648.0f) return (int32_t)0x80000000u;
    return __float2int_rn(f);
}

// fp8.decode of kernels/dtype.go. ieee: E5M2 (all-ones exponent is Inf or
// NaN); else E4M3 (only S.1111.111 is NaN).
__device__ __forceinline__ float dec_fp8(uint8_t b, int man, int bias, bool ieee) {
    const float sign = (b & 0x80u) ? -1.0f : 1.0f;
    const int expBits = 7 - man;
    const int emax = (1 << expBits) - 1;
    const int e = (b >> man) & emax;
    const int m = b & ((1 << man) - 1);
    if (ieee && e == emax) return m == 0 ? sign * INFINITY : __uint_as_float(CANONICAL_NAN_BITS);
    if (!ieee && e == emax && m == (1 << man) - 1) return __uint_as_float(CANONICAL_NAN_BITS);
    if (e == 0) return sign * ldexpf((float)m, 1 - bias - man);
    return sign * ldexpf((float)((1 << man) + m), e - bias - man);
}

// pow2f returns 2^k for -126 ≤ k ≤ 127, exactly.
__device__ __forceinline__ float pow2f(int k) { return __uint_as_float((uint32_t)(127 + k) << 23); }

// fp8.encodeFinite: x finite, 0 ≤ x ≤ max; round to nearest even.
__device__ __forceinline__ uint32_t enc_fp8_finite(float x, int man, int bias) {
    if (x == 0.0f) return 0;
    int exp = (int)((__float_as_uint(x) >> 23) & 0xffu) - 127; // floor(log2 x) for normal x
    const int minExp = 1 - bias;
    if (exp < minExp) exp = minExp; // subnormals share the smallest exponent's ulp
    float q = rintf(x * pow2f(man - exp)); // x/ulp is exact; rintf ties to even
    if (q >= (float)(1 << (man + 1))) {
        q *= 0.5f;
        exp++;
    }
    const uint32_t qi = (uint32_t)q;
    if (qi < (1u << man)) return qi; // subnormal or zero
    return ((uint32_t)(exp + bias) << man) | (qi - (1u << man));
}

// fp8.encode: saturating to ±max (infinities too); NaN gives 0x7f | sign.
__device__ __forceinline__ uint8_t enc_fp8(float x, int man, int bias, float maxv) {
    uint32_t sign = 0;
    if (signbit(x)) {
        sign = 0x80u;
        x = -x;
    }
    if (x != x) return (uint8_t)(0x7fu | sign);
    if (x >= maxv) x = maxv;
    return (uint8_t)(sign | enc_fp8_finite(x, man, bias));
}

__device__ __forceinline__ float load_any(const void* p, int dt, long long i) {
    switch (dt) {
    case DT_F32: return static_cast<const float*>(p)[i];
    case DT_F16: return dec_f16(static_cast<const uint16_t*>(p)[i]);
    case DT_BF16: return dec_bf16(static_cast<const uint16_t*>(p)[i]);
    case DT_I8: return (float)static_cast<const int8_t*>(p)[i];
    case DT_E4M3: return dec_fp8(static_cast<const uint8_t*>(p)[i], 3, 7, false);
    case DT_E5M2: return dec_fp8(static_cast<const uint8_t*>(p)[i], 2, 15, true);
    case DT_I32: return (float)static_cast<const int32_t*>(p)[i]; // round to nearest even
    }
    return 0.0f;
}

__device__ __forceinline__ void store_any(void* p, int dt, long long i, float f) {
    switch (dt) {
    case DT_F32: static_cast<float*>(p)[i] = f; break;
    case DT_F16: static_cast<uint16_t*>(p)[i] = enc_f16(f); break;
    case DT_BF16: static_cast<uint16_t*>(p)[i] = enc_bf16(f); break;
    case DT_I8: static_cast<int8_t*>(p)[i] = enc_i8(f); break;
    case DT_E4M3: static_cast<uint8_t*>(p)[i] = enc_fp8(f, 3, 7, 448.0f); break;
    case DT_E5M2: static_cast<uint8_t*>(p)[i] = enc_fp8(f, 2, 15, 57344.0f); break;
    case DT_I32: static_cast<int32_t*>(p)[i] = enc_i32(f); break;
    }
}

__device__ __forceinline__ int dtype_size(int dt) {
    switch (dt) {
    case DT_F32: case DT_I32: return 4;
    case DT_F16: case DT_BF16: return 2;
    case DT_I8: case DT_E4M3: case DT_E5M2: return 1;
    }
    return 0;
}

// ---------------------------------------------------------------------------
// Entry points.

#define EW_DEFINE(SUF, T)                                                                          \
    /* fill_T: out[0..n) = v rounded to T. Launch: block 256, grid min(ceil(n/256), 65535). */     \
    extern "C" __global__ void fill_##SUF(T* out, long long n, float v) { fill_impl<T>(out, n, v); } \
    /* scale_T: out = s·x; out may alias x. Launch: block 256, grid min(ceil(n/256), 65535). */    \
    extern "C" __global__ void scale_##SUF(T* out, const T* x, long long n, float s) {               \
        scale_impl<T>(out, x, n, s);                                                               \
    }                                                                                              \
    /* add_T: out[i] = a[i] + b[i % nb]; nb ≥ 1 divides n; out may alias a.                        \
       Launch: block 256, grid min(ceil(n/256), 65535). */                                         \
    extern "C" __global__ void add_##SUF(T* out, const T* a, const T* b, long long n, long long nb) { \
        add_impl<T>(out, a, b, n, nb);                                                             \
    }                                                                                              \
    /* act_T: out = act(x), act a kernels.Activation (0..5); out may alias x.                      \
       Launch: block 256, grid min(ceil(n/256), 65535). */                                         \
    extern "C" __global__ void act_##SUF(T* out, const T* x, long long n, int act) {                 \
        act_dispatch<T>(out, x, n, act);                                                           \
    }                                                                                              \
    /* act_backward_T: dx = dy·act'(x) (ReLU: dy where x > 0, else 0); dx may alias dy or x.       \
       Launch: block 256, grid min(ceil(n/256), 65535). */                                         \
    extern "C" __global__ void act_backward_##SUF(T* dx, const T* dy, const T* x, long long n, int act) { \
        act_backward_dispatch<T>(dx, dy, x, n, act);                                               \
    }                                                                                              \
    /* sum_rows_T: out[j] = Σ_r x[r*n + j], x [rows, n], float accumulation.                       \
       Launch: block (32, 32, 1), grid (min(ceil(n/32), 65535), 1, 1), no dynamic shared           \
       memory (4.2 KB static). blockDim.x must be 32; blockDim.y any of 1..32. */                  \
    extern "C" __global__ void __launch_bounds__(SUMROWS_BX * SUMROWS_BY)                          \
        sum_rows_##SUF(T* out, const T* x, long long rows, int n) {                                \
        sum_rows_impl<T>(out, x, rows, n);                                                         \
    }

EW_DEFINE(f32, float)
EW_DEFINE(f16, __half)
EW_DEFINE(bf16, __nv_bfloat16)

// cast: out[i] = x[i] converted from dtype x_dtype to out_dtype (codes are
// kernels.DType: 1 F32, 2 F16, 3 BF16, 4 I8, 5 E4M3, 6 E5M2, 7 I32), bit
// for bit as kernels.DecodeFloat32 then kernels.EncodeFloat32: widen to
// float32, round to nearest even, saturate integers and FP8 (E4M3 ±448,
// E5M2 ±57344, Inf included), NaN → 0 for integers, NaN → 0x7f|sign for
// FP8. Equal dtypes copy the bytes. out and x must not overlap unless equal.
// Launch: block 256, grid min(ceil(n/256), 65535), no shared memory.
extern "C" __global__ void cast(void* out, int out_dtype, const void* x, int x_dtype, long long n) {
    if (out_dtype == x_dtype) {
        switch (dtype_size(x_dtype)) {
        case 4:
            for (long long i = grid_tid(); i < n; i += grid_stride())
                static_cast<uint32_t*>(out)[i] = static_cast<const uint32_t*>(x)[i];
            break;
        case 2:
            for (long long i = grid_tid(); i < n; i += grid_stride())
                static_cast<uint16_t*>(out)[i] = static_cast<const uint16_t*>(x)[i];
            break;
        case 1:
            for (long long i = grid_tid(); i < n; i += grid_stride())
                static_cast<uint8_t*>(out)[i] = static_cast<const uint8_t*>(x)[i];
            break;
        }
        return;
    }
    if (dtype_size(out_dtype) == 0 || dtype_size(x_dtype) == 0) return; // the host validates dtypes
    for (long long i = grid_tid(); i < n; i += grid_stride()) store_any(out, out_dtype, i, load_any(x, x_dtype, i));
}
