// optim.cu: optimizer updates (semantics: kernels/cpu/optim.go,
// kernels.Ops.AdamW).
//
// adamw_f32: one torch.optim.AdamW step on n elements, updating param, m
// and v in place (grad is only read):
//   p ← p·decay;  m ← beta1·m + c1·g;  v ← beta2·v + c2·g²;
//   p ← p − step_size · m / (sqrt(v)/bc2_sqrt + eps)
// with the scalars computed by the host in float64 and rounded once:
// decay = 1 − lr·weight_decay, c1 = 1 − beta1, c2 = 1 − beta2,
// step_size = lr/(1 − beta1^step), bc2_sqrt = sqrt(1 − beta2^step).
// IEEE division and square root (no fast math), as PyTorch computes.
// Launch: block 256, grid min(ceil(n/256), 32·SMs), no shared memory; any
// grid and block are correct (grid-stride loop).

#include "common.cuh"

// adamw_elem is the update of element i, shared by both kernels so that
// they round alike: m[i] and v[i] are updated and the new parameter value
// returned.
__device__ __forceinline__ float adamw_elem(float p, float g, float* m, float* v, long long i, float decay,
                                            float beta1, float c1, float beta2, float c2, float step_size,
                                            float bc2_sqrt, float eps) {
    const float mi = beta1 * m[i] + c1 * g;
    const float vi = beta2 * v[i] + c2 * (g * g);
    m[i] = mi;
    v[i] = vi;
    const float denom = sqrtf(vi) / bc2_sqrt + eps;
    return p * decay - step_size * (mi / denom);
}

extern "C" __global__ void adamw_f32(float* param, const float* grad, float* m, float* v, long long n,
                                     float decay, float beta1, float c1, float beta2, float c2,
                                     float step_size, float bc2_sqrt, float eps) {
    for (long long i = grid_tid(); i < n; i += grid_stride())
        param[i] = adamw_elem(param[i], grad[i], m, v, i, decay, beta1, c1, beta2, c2, step_size, bc2_sqrt, eps);
}

// adamw_all: adamw_f32's update for many parameters in one launch
// (kernels.Ops.AdamWAll). ts[0..count) describes them (AdamWEntry, built by
// kernels/cuda/optim.go): each split into chunks of ADAMW_CHUNK elements,
// first[t] the number of chunks before parameter t and first[count] their
// total. Blocks take chunks in a grid-stride loop and find a chunk's
// parameter by binary search in first. A 16-bit gradient is widened
// exactly; where copy is set, the updated value is also stored rounded to
// nearest even in its 16-bit type. decay is each parameter's 1 − lr·wd
// (1 where weight decay does not apply); the other scalars as adamw_f32.
// Launch: block 256, grid min(first[count], 32·SMs), no shared memory; any
// grid and block are correct.
#define ADAMW_CHUNK 4096

struct AdamWEntry {
    float* p;
    const void* g;
    float* m;
    float* v;
    void* copy;
    long long n;
    float decay;
    int gtype; // 0 float32, 1 float16, 2 bfloat16
    int ctype; // 0 none, 1 float16, 2 bfloat16
    int pad;
};
static_assert(sizeof(AdamWEntry) == 64, "kernels/cuda/optim.go writes 64-byte entries");

extern "C" __global__ void adamw_all(const AdamWEntry* __restrict__ ts, const long long* __restrict__ first, int count,
                                     float beta1, float c1, float beta2, float c2, float step_size, float bc2_sqrt,
                                     float eps) {
    const long long total = first[count];
    for (long long c = blockIdx.x; c < total; c += gridDim.x) {
        int lo = 0, hi = count - 1; // the last parameter whose chunks start at or before c
        while (lo < hi) {
            const int mid = (lo + hi + 1) / 2;
            if (first[mid] <= c)
                lo = mid;
            else
                hi = mid - 1;
        }
        const AdamWEntry e = ts[lo];
        const long long start = (c - first[lo]) * ADAMW_CHUNK, end = min(e.n, start + ADAMW_CHUNK);
        for (long long i = start + threadIdx.x; i < end; i += blockDim.x) {
            float g;
            if (e.gtype == 1)
                g = __half2float(static_cast<const __half*>(e.g)[i]);
            else if (e.gtype == 2)
                g = __bfloat162float(static_cast<const __nv_bfloat16*>(e.g)[i]);
            else
                g = static_cast<const float*>(e.g)[i];
            const float pi = adamw_elem(e.p[i], g, e.m, e.v, i, e.decay, beta1, c1, beta2, c2, step_size, bc2_sqrt, eps);
            e.p[i] = pi;
            if (e.ctype == 1)
                static_cast<__half*>(e.copy)[i] = __float2half_rn(pi);
            else if (e.ctype == 2)
                static_cast<__nv_bfloat16*>(e.copy)[i] = __float2bfloat16_rn(pi);
        }
    }
}
