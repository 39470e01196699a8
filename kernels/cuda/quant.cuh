// quant.cuh: the pieces of the QMatMul kernels shared by quant.cu (the
// mma.sync and dp4a kernels) and qmatmul_sm90.cu (the Hopper wgmma kernels):
// the quantization scheme, 4-element vector loads and stores, and the
// fused epilogue (scales, bias, residual, activation, rounding or
// requantization of one output element or four). Semantics: quant.cu's
// file comment and kernels.Quant. Device functions only.
#pragma once

#include <stdint.h>

#include "common.cuh"

namespace qk {

// ---------------------------------------------------------------------------
// The scheme.

// quantize_value is kernels.QuantizeValue: x/s rounded half to even and
// clamped to [−127, 127]; NaN gives 0.
__device__ __forceinline__ int quantize_value(float x, float s) {
    const float v = __fdiv_rn(x, s);
    if (v != v) return 0;
    return __float2int_rn(fminf(fmaxf(v, -127.0f), 127.0f));
}

// pack4 packs four int8 values (in [−128, 127]) little-endian into a word.
__device__ __forceinline__ unsigned pack4(int q0, int q1, int q2, int q3) {
    return (unsigned)(q0 & 0xff) | ((unsigned)(q1 & 0xff) << 8) | ((unsigned)(q2 & 0xff) << 16) |
           ((unsigned)(q3 & 0xff) << 24);
}

// ---------------------------------------------------------------------------
// The QMatMul epilogue.

// Epi is the epilogue's arguments, as the kernels receive them; residual
// is the kernel's const T* (NULL for none), of c's layout.
struct Epi {
    const float* ascale;
    const float* bscale;
    const float* bias;
    const float* out_scale;
    const void* residual;
    int a_per_row, b_per_row, act;
};

// value returns act(float(acc)·(sa·sb) + bias + res) in float32, each
// operation rounded as written (no contraction into an FMA); no bias when
// !has_bias, no residual when !has_res.
__device__ __forceinline__ float value(int acc, float sa, float sb, float bv, bool has_bias, float res, bool has_res,
                                       int act) {
    float v = __fmul_rn((float)acc, __fmul_rn(sa, sb));
    if (has_bias) v = __fadd_rn(v, bv);
    if (has_res) v = __fadd_rn(v, res);
    return act_apply(v, act);
}

// res_ptr is the residual's element at offset off (c's offset of the same
// element), or NULL without a residual.
template <typename T> __device__ __forceinline__ const T* res_ptr(const Epi& ep, long long off) {
    return ep.residual != nullptr ? static_cast<const T*>(ep.residual) + off : nullptr;
}

// Cols holds the per-column epilogue values of up to 4 consecutive
// columns col..col+3 (0 past N).
struct Cols {
    float sb[4], bv[4];
    __device__ __forceinline__ void load(const Epi& ep, int col, int N) {
#pragma unroll
        for (int e = 0; e < 4; e++) {
            const bool in = col + e < N;
            sb[e] = ep.bscale != nullptr && in ? ep.bscale[ep.b_per_row ? col + e : 0] : 0.0f;
            bv[e] = ep.bias != nullptr && in ? ep.bias[col + e] : 0.0f;
        }
    }
};

// Out stores epilogue results of out dtype T: put4 the sums of columns
// col..col+3 of one row at p, the first n of them (n ≥ 4: all; vectorised
// when vec, p and rp then aligned to 4·sizeof(T)), with those columns'
// values cl and the residual at rp (NULL: none; it may be p, and is read
// first); put1 one sum with its column's scale sb, bias bv and residual rp.
// The int8 and int32 outs take no residual.
template <typename T> struct Out {
    __device__ static __forceinline__ void put4(T* p, const T* rp, const int (&acc)[4], int n, bool vec, float sa,
                                                const Cols& cl, const Epi& ep, float) {
        float r[4] = {0.0f, 0.0f, 0.0f, 0.0f};
        if (rp != nullptr) {
            if (vec) {
                ld4(rp, r);
            } else {
#pragma unroll
                for (int e = 0; e < 4; e++)
                    if (e < n) r[e] = to_f32(rp[e]);
            }
        }
        float v[4];
#pragma unroll
        for (int e = 0; e < 4; e++)
            v[e] = value(acc[e], sa, cl.sb[e], cl.bv[e], ep.bias != nullptr, r[e], rp != nullptr, ep.act);
        if (vec) {
            st4(p, v);
        } else {
#pragma unroll
            for (int e = 0; e < 4; e++)
                if (e < n) p[e] = from_f32<T>(v[e]);
        }
    }
    __device__ static __forceinline__ void put1(T* p, const T* rp, int acc, float sa, float sb, float bv, const Epi& ep,
                                                float) {
        const float r = rp != nullptr ? to_f32(*rp) : 0.0f;
        *p = from_f32<T>(value(acc, sa, sb, bv, ep.bias != nullptr, r, rp != nullptr, ep.act));
    }
};
template <> struct Out<int8_t> {
    __device__ static __forceinline__ void put4(int8_t* p, const int8_t*, const int (&acc)[4], int n, bool vec,
                                                float sa, const Cols& cl, const Epi& ep, float os) {
        int v[4];
#pragma unroll
        for (int e = 0; e < 4; e++)
            v[e] = quantize_value(value(acc[e], sa, cl.sb[e], cl.bv[e], ep.bias != nullptr, 0.0f, false, ep.act), os);
        if (vec) {
            *reinterpret_cast<unsigned*>(p) = pack4(v[0], v[1], v[2], v[3]);
        } else {
#pragma unroll
            for (int e = 0; e < 4; e++)
                if (e < n) p[e] = (int8_t)v[e];
        }
    }
    __device__ static __forceinline__ void put1(int8_t* p, const int8_t*, int acc, float sa, float sb, float bv,
                                                const Epi& ep, float os) {
        *p = (int8_t)quantize_value(value(acc, sa, sb, bv, ep.bias != nullptr, 0.0f, false, ep.act), os);
    }
};
template <> struct Out<int> {
    __device__ static __forceinline__ void put4(int* p, const int*, const int (&acc)[4], int n, bool vec, float,
                                                const Cols&, const Epi&, float) {
        if (vec) {
            *reinterpret_cast<int4*>(p) = make_int4(acc[0], acc[1], acc[2], acc[3]);
        } else {
#pragma unroll
            for (int e = 0; e < 4; e++)
                if (e < n) p[e] = acc[e];
        }
    }
    __device__ static __forceinline__ void put1(int* p, const int*, int acc, float, float, float, const Epi&, float) {
        *p = acc;
    }
};

// row_scale is ascale of row m (0 without scales: the i32 out).
__device__ __forceinline__ float row_scale(const Epi& ep, int m) {
    return ep.ascale != nullptr ? ep.ascale[ep.a_per_row ? m : 0] : 0.0f;
}
__device__ __forceinline__ float out_scale(const Epi& ep) { return ep.out_scale != nullptr ? ep.out_scale[0] : 1.0f; }

} // namespace qk
