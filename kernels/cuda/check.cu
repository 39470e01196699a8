// check.cu: validation of index data on the device. A kernel cannot return
// an error, so check_range records the first value out of range in the
// error record err (4 ints: flag, value, position, unused) and the host
// reports it at the next Sync.
#include "common.cuh"

// check_range flags the first v[i] outside [lo, hi) that is not `except`
// (pass lo-1 for no exception): err[0] = 1, err[1] = v[i], err[2] = i.
// Launch: block 256, grid ceil(n/256) capped (grid-stride loop).
extern "C" __global__ void check_range(const int* v, long long n, int lo, int hi, int except, int* err) {
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n; i += (long long)gridDim.x * blockDim.x) {
        int x = v[i];
        if ((x < lo || x >= hi) && x != except) flag_value(err, x, i);
    }
}
