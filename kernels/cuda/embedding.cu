// embedding.cu: embedding lookup and its backward (scatter-add), and the
// cross-entropy loss over logits rows and its backward. Semantics:
// kernels/cpu/embedding.go. Ids or targets out of range are reported through
// err (common.cuh: report_error) and give zero rows.

#include "common.cuh"

#define IGNORE_INDEX (-100) // kernels.IgnoreIndex

// ---------------------------------------------------------------------------
// embedding: out[i, :] = table[ids[i], :], copied bit for bit. Block per id
// (grid-stride over ids); 16-byte vectors when the rows allow.

template <typename T>
__device__ void embedding_impl(T* out, const T* table, const int* ids, long long nids, int v, int d, int* err) {
    const long long rowBytes = (long long)d * sizeof(T);
    const bool vec = ((uintptr_t)out & 15) == 0 && ((uintptr_t)table & 15) == 0 && rowBytes % 16 == 0;
    for (long long i = blockIdx.x; i < nids; i += gridDim.x) {
        const int id = ids[i];
        const bool ok = id >= 0 && id < v;
        if (!ok && threadIdx.x == 0) report_error(err, ERR_EMBEDDING_ID, id, i);
        if (vec) {
            uint4* o = reinterpret_cast<uint4*>(out + i * d);
            const uint4* s = reinterpret_cast<const uint4*>(table + (long long)(ok ? id : 0) * d);
            const int nv = (int)(rowBytes / 16);
            for (int k = threadIdx.x; k < nv; k += blockDim.x) o[k] = ok ? s[k] : make_uint4(0, 0, 0, 0);
        } else {
            T* o = out + i * d;
            const T* s = table + (long long)(ok ? id : 0) * d;
            for (int j = threadIdx.x; j < d; j += blockDim.x) o[j] = ok ? s[j] : from_f32<T>(0.0f);
        }
    }
}

// embedding_backward: acc[ids[i], :] += dout[i, :] (float atomics; acc
// zeroed by the host). Ids out of range are skipped.
template <typename T>
__device__ void embedding_backward_impl(float* acc, const T* dout, const int* ids, long long nids, int v, int d) {
    for (long long i = blockIdx.x; i < nids; i += gridDim.x) {
        const int id = ids[i];
        if (id < 0 || id >= v) continue; // uniform over the block
        float* a = acc + (long long)id * d;
        const T* g = dout + i * d;
        for (int j = threadIdx.x; j < d; j += blockDim.x) atomicAdd(a + j, to_f32(g[j]));
    }
}

// ---------------------------------------------------------------------------
// cross_entropy: loss[i] = logsumexp(logits[i, :]) − logits[i, t], t =
// targets[i]; 0 where t = IgnoreIndex, and 0 with error code 2 where t is
// out of range. The max in float, Σ exp(x − max) in float64 (as the CPU),
// combined in float64. One block per row.

// ce_row_stats returns, in every thread, the row maximum m (float) and
// Σ_j exp(x_j − m) (double). Contains barriers: call from all threads.
template <typename T>
__device__ __forceinline__ void ce_row_stats(const T* xr, int v, float* shf, double* shd, float& m, double& sum) {
    float mx = -INFINITY;
    for (int j = threadIdx.x; j < v; j += blockDim.x) mx = fmaxf(mx, to_f32(xr[j]));
    m = block_max(mx, shf);
    double s = 0.0;
    for (int j = threadIdx.x; j < v; j += blockDim.x) s += (double)expf(to_f32(xr[j]) - m);
    sum = block_sum(s, shd);
}

// ce_target returns targets[i] classified: 1 valid, 0 ignored, −1 out of
// range (reported once, by thread 0).
__device__ __forceinline__ int ce_target(const int* targets, int i, int v, int* err, int& t) {
    t = targets[i];
    if (t == IGNORE_INDEX) return 0;
    if (t < 0 || t >= v) {
        if (threadIdx.x == 0) report_error(err, ERR_CE_TARGET, t, i);
        return -1;
    }
    return 1;
}

template <typename T>
__device__ void cross_entropy_impl(float* loss, const T* logits, const int* targets, int n, int v, int* err) {
    __shared__ float shf[32];
    __shared__ double shd[32];
    for (int i = blockIdx.x; i < n; i += gridDim.x) {
        int t;
        if (ce_target(targets, i, v, err, t) != 1) { // uniform over the block
            if (threadIdx.x == 0) loss[i] = 0.0f;
            continue;
        }
        const T* xr = logits + (long long)i * v;
        const float xt = to_f32(xr[t]);
        float m;
        double sum;
        ce_row_stats(xr, v, shf, shd, m, sum);
        if (threadIdx.x == 0) loss[i] = (float)((double)m + log(sum) - (double)xt);
    }
}

// cross_entropy_backward: dlogits[i, :] = scale·(softmax(logits[i, :]) −
// onehot(t)); the target's entry is −scale·Σ_{j≠t} e_j / Σ e_j (no
// cancellation when p_t is close to 1). Zero rows for ignored or
// out-of-range targets.
template <typename T>
__device__ void cross_entropy_backward_impl(T* dlogits, const T* logits, const int* targets, int n, int v,
                                            float scale, int* err) {
    __shared__ float shf[32];
    __shared__ double shd[32];
    for (int i = blockIdx.x; i < n; i += gridDim.x) {
        T* o = dlogits + (long long)i * v;
        int t;
        if (ce_target(targets, i, v, err, t) != 1) {
            for (int j = threadIdx.x; j < v; j += blockDim.x) o[j] = from_f32<T>(0.0f);
            continue;
        }
        const T* xr = logits + (long long)i * v;
        // x_t is read by every thread before the barriers in ce_row_stats,
        // and each thread later writes only the elements it reads itself,
        // so dlogits may alias logits.
        const float xt = to_f32(xr[t]);
        float m;
        double sum;
        ce_row_stats(xr, v, shf, shd, m, sum);
        const double s = (double)scale / sum;
        const float sf = (float)s;
        const double other = sum - (double)expf(xt - m);
        for (int j = threadIdx.x; j < v; j += blockDim.x) {
            const float g = j == t ? (float)(-other * s) : expf(to_f32(xr[j]) - m) * sf;
            o[j] = from_f32<T>(g);
        }
    }
}

#define EMB_DEFINE(SUF, T)                                                                                        \
    /* embedding_T: out [nids, d] = rows of table [v, d] named by ids [nids] int; an id outside [0, v) gives     \
       err code 1 (value id, position its index) and a zero row. err: 4 ints zeroed by the host (may be NULL).   \
       Launch: grid (min(nids, 65535), 1, 1) (any grid >= 1: grid-stride over ids), block (128, 1, 1) (any       \
       size >= 1), no shared memory. No alignment preconditions. */                                             \
    extern "C" __global__ void embedding_##SUF(T* out, const T* table, const int* ids, long long nids, int v,    \
                                               int d, int* err) {                                               \
        embedding_impl<T>(out, table, ids, nids, v, d, err);                                                     \
    }                                                                                                             \
    /* embedding_backward_T: acc [v, d] float (zeroed by the host) += dout [nids, d] scattered by ids; ids      \
       outside [0, v) are skipped. Order of the float atomics is not deterministic.                             \
       Launch: grid (min(nids, 65535), 1, 1) (any grid >= 1), block (128, 1, 1) (any size >= 1), no shared      \
       memory. */                                                                                                \
    extern "C" __global__ void embedding_backward_##SUF(float* acc, const T* dout, const int* ids, long long nids, \
                                                        int v, int d) {                                          \
        embedding_backward_impl<T>(acc, dout, ids, nids, v, d);                                                  \
    }                                                                                                             \
    /* cross_entropy_T: loss [n] float; logits [n, v]; targets [n] int (IgnoreIndex -100 gives 0; outside       \
       [0, v) gives err code 2 (value target, position row) and 0). err: 4 ints zeroed by the host (may be      \
       NULL). Launch: grid (min(n, 2^31-1), 1, 1) (any grid >= 1: grid-stride over rows), block (256, 1, 1)     \
       (any multiple of 32 up to 1024), no dynamic shared memory. */                                            \
    extern "C" __global__ void __launch_bounds__(1024)                                                           \
        cross_entropy_##SUF(float* loss, const T* logits, const int* targets, int n, int v, int* err) {          \
        cross_entropy_impl<T>(loss, logits, targets, n, v, err);                                                 \
    }                                                                                                             \
    /* cross_entropy_backward_T: dlogits [n, v] = scale·(softmax(logits) − onehot(targets)); zero rows for      \
       IgnoreIndex and (with err code 2) out-of-range targets. dlogits may alias logits.                        \
       Launch: grid (min(n, 2^31-1), 1, 1) (any grid >= 1), block (256, 1, 1) (any multiple of 32 up to 1024),  \
       no dynamic shared memory. */                                                                              \
    extern "C" __global__ void __launch_bounds__(1024)                                                           \
        cross_entropy_backward_##SUF(T* dlogits, const T* logits, const int* targets, int n, int v, float scale,  \
                                     int* err) {                                                                 \
        cross_entropy_backward_impl<T>(dlogits, logits, targets, n, v, scale, err);                              \
    }

EMB_DEFINE(f32, float)
EMB_DEFINE(f16, __half)
EMB_DEFINE(bf16, __nv_bfloat16)
