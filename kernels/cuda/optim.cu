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

extern "C" __global__ void adamw_f32(float* param, const float* grad, float* m, float* v, long long n,
                                     float decay, float beta1, float c1, float beta2, float c2,
                                     float step_size, float bc2_sqrt, float eps) {
    for (long long i = grid_tid(); i < n; i += grid_stride()) {
        const float g = grad[i];
        const float mi = beta1 * m[i] + c1 * g;
        const float vi = beta2 * v[i] + c2 * (g * g);
        m[i] = mi;
        v[i] = vi;
        const float denom = sqrtf(vi) / bc2_sqrt + eps;
        param[i] = param[i] * decay - step_size * (mi / denom);
    }
}
