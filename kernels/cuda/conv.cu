// conv.cu: the Vision op group (kernels/vision.go) on NHWC images: 2-D
// convolution with a fused bias, residual and activation epilogue, max
// pooling and global average pooling. Semantics: kernels/vision.go (the
// doc comments of kernels.Vision) and the CPU backend.
//
// Convolution. x [N,H,W,Ci], w [Co,Kh,Kw,Cg] with Cg = Ci/G, out
// [N,Ho,Wo,Co]; per group g = 0..G-1 an implicit GEMM of M = N·Ho·Wo rows
// (output pixels m = (n·Ho + oh)·Wo + ow), Cog = Co/G columns (output
// channels g·Cog + o) and K = Kh·Kw·Cg, with k = (kh·Kw + kw)·Cg + c:
//
//   A[m, k] = x[n, oh·sh − ph + kh·dh, ow·sw − pw + kw·dw, g·Cg + c]  (0 outside the image)
//   B[k, o] = w[g·Cog + o, kh, kw, c]                                   (a filter row is K contiguous)
//   out[m, g·Cog + o] = act((Σ_k A[m,k]·B[k,o] + bias[g·Cog + o]) + res[m, g·Cog + o])
//
// Products accumulate in float32; the epilogue adds the bias, then the
// residual, applies act (common.cuh) and rounds once to T (RNE). bias ([Co])
// and res (out's shape) may be NULL; res may be out itself: every element
// of res is read by the thread that writes the same element of out, before
// it writes it. x and w must not overlap out. 1×1 stride-1 ungrouped
// convolutions are plain matrix products and go through matmul.cu instead
// (kernels/cuda/conv.go).
//
// Kernels, all with the signature
//   (T* out, const T* x, const T* w, const T* bias, const T* res, int N,
//    int H, int W, int Ci, int Co, int Ho, int Wo, int Kh, int Kw, int sh,
//    int sw, int ph, int pw, int dh, int dw, int groups, int act)
// and K = Kh·Kw·Ci/groups ≥ 1, M = N·Ho·Wo ≥ 1:
//
//  conv_tc_f16, conv_tc_bf16 (sm_80+): tensor cores, mma.sync m16n8k16 with
//    f32 accumulation, ldmatrix, 4-stage cp.async pipeline; block tile 128
//    (M) x 128 (Cog) x 32 (K), 4 warps of 64x64.
//  conv_tc_f32 (sm_80+): f32 in and out on TF32 tensor cores, mma.sync
//    m16n8k8 (inputs rounded with cvt.rna.tf32.f32); block tile 128x128x16.
//  conv_tc_n64_f16, conv_tc_n64_bf16, conv_tc_n64_f32: the same with a
//    block tile 64 channels wide (4 warps of 64x32), for Cog ≤ 64.
//      grid  = (ceil(M/128)·ceil(Cog/BN), 1, groups), BN = 128 or 64,
//      block = (128, 1, 1) exactly, dynamic shared memory 81920 bytes
//      (BN 128) or 61440 bytes (BN 64): needs
//      CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES for the former.
//    Preconditions (the launcher takes another kernel otherwise), with E = 8
//    elements (16 bytes) for f16/bf16 and E = 4 for f32:
//      compute capability ≥ 8.0; Cg % E == 0, so that every 16-byte chunk
//      of a K row of A lies in one (kh, kw) run of channels and is 16-byte
//      aligned, and K % E == 0; x and w 16-byte aligned. out, bias and res
//      need only element alignment (stores are vectorised where aligned).
//    On targets below sm_80 these kernels exist but trap.
//
//  conv_simt_f32, conv_simt_f16, conv_simt_bf16: SIMT implicit GEMM, every
//    target, every shape and alignment. Block tile 64 (M) x 64 (Cog) x 16
//    (K), 256 threads of 4x4 outputs, double-buffered shared memory (float32,
//    k-major) filled through registers.
//      grid  = (ceil(M/64)·ceil(Cog/64), 1, groups), block = (256, 1, 1)
//      exactly, no dynamic shared memory (17408 bytes static).
//
//  conv_direct_f32, conv_direct_f16, conv_direct_bf16: one thread per output
//    element in a grid-stride loop over M·Co (channels innermost, so loads of
//    x and stores of out are coalesced), each summing its K products. For
//    depthwise and other convolutions with few channels per group, where a
//    GEMM tile would be mostly empty. Any grid, any block size.
//
//  Block tiles are numbered channel tile fastest: blocks running together
//  share their A rows (input pixels) in L2; the filter is small.
//  All: M, K, Co and the padded image H + 2·ph, W + 2·pw below 2³¹ − 128
//  (int arithmetic; the launcher checks), element offsets 64-bit; groups
//  ≤ 65535 for the GEMM kernels (gridDim.z).
//
// Pooling:
//  maxpool_f32, maxpool_f16, maxpool_bf16
//    (T* out, const T* x, int N, int H, int W, int C, int Ho, int Wo, int kh,
//     int kw, int sh, int sw, int ph, int pw, int dh, int dw):
//    out [N,Ho,Wo,C] = the largest x of each window; positions outside the
//    image (padding) are skipped, so padding never wins, and a NaN in the
//    window is the result (torch). The host guarantees every window holds
//    an image position (padding ≤ half the window). One thread per output
//    element, grid-stride, channels innermost; any grid and block.
//  global_avgpool_f32, global_avgpool_f16, global_avgpool_bf16
//    (T* out, const T* x, int N, int HW, int C):
//    out [N,C] = the float32 sum of x [N,HW,C] over HW, divided by HW. One
//    block per (image, chunk of 64 channels): threadIdx.x is the channel
//    (coalesced loads), threadIdx.y one of 4 interleaved pixel rows.
//      grid = (N·ceil(C/64), 1, 1), block = (64, 4, 1) exactly.

#include "common.cuh"
#include "sm80.cuh"

namespace cv {

// ---------------------------------------------------------------------------
// Shared helpers.

// Geo is the convolution's geometry, from the kernel parameters.
struct Geo {
    int H, W, Ci, Co, Ho, Wo, Kh, Kw, sh, sw, ph, pw, dh, dw;
    int Cg, Cog, K, M;
};

__device__ __forceinline__ Geo make_geo(int N, int H, int W, int Ci, int Co, int Ho, int Wo, int Kh, int Kw, int sh,
                                        int sw, int ph, int pw, int dh, int dw, int groups) {
    Geo q;
    q.H = H;
    q.W = W;
    q.Ci = Ci;
    q.Co = Co;
    q.Ho = Ho;
    q.Wo = Wo;
    q.Kh = Kh;
    q.Kw = Kw;
    q.sh = sh;
    q.sw = sw;
    q.ph = ph;
    q.pw = pw;
    q.dh = dh;
    q.dw = dw;
    q.Cg = Ci / groups;
    q.Cog = Co / groups;
    q.K = Kh * Kw * q.Cg;
    q.M = N * Ho * Wo;
    return q;
}

// NO_ROW is the window origin of a GEMM row past M: every image position
// test fails for it (NO_ROW + d for 0 ≤ d < 2³¹ is negative, never wraps).
#define NO_ROW (-2147483647 - 1)

// PixelRow is the start of one GEMM row of A: the input position of its
// window's top left corner, (ih0, iw0), possibly outside the image, and the
// element offset of (n, ih0, iw0, channel 0), computed as if that position
// existed. The element of (kh, kw, c) is at off + (kh·dh·W + kw·dw)·Ci + c
// when the position is inside the image.
struct PixelRow {
    long long off;
    int ih0, iw0;
};

__device__ __forceinline__ PixelRow pixel_row(const Geo& q, int m) {
    PixelRow r;
    if (m >= q.M) {
        r.off = 0;
        r.ih0 = r.iw0 = NO_ROW;
        return r;
    }
    const int ow = m % q.Wo, t = m / q.Wo;
    const int oh = t % q.Ho, n = t / q.Ho;
    r.ih0 = oh * q.sh - q.ph;
    r.iw0 = ow * q.sw - q.pw;
    r.off = (((long long)n * q.H + r.ih0) * q.W + r.iw0) * q.Ci;
    return r;
}

// inside reports whether the position (ih0 + dy, iw0 + dx) is in the image.
__device__ __forceinline__ bool inside(const Geo& q, int ih0, int iw0, int dy, int dx) {
    return (unsigned)(ih0 + dy) < (unsigned)q.H && (unsigned)(iw0 + dx) < (unsigned)q.W;
}

// KPos walks k = (kh·Kw + kw)·Cg + c in steps of a fixed size: the
// decomposition is kept and advanced instead of divided out each time.
// Past K, kh ≥ Kh.
struct KPos {
    int kh, kw, c;

    __device__ __forceinline__ void set(const Geo& q, int k) {
        c = k % q.Cg;
        const int t = k / q.Cg;
        kw = t % q.Kw;
        kh = t / q.Kw;
    }
    // advance moves on by step.
    __device__ __forceinline__ void advance(const Geo& q, int step) {
        c += step;
        if (c >= q.Cg) {
            const int t = c / q.Cg;
            c -= t * q.Cg;
            kw += t;
            if (kw >= q.Kw) {
                const int u = kw / q.Kw;
                kw -= u * q.Kw;
                kh += u;
            }
        }
    }
    // offset is the element offset of this k from a row's offset.
    __device__ __forceinline__ long long offset(const Geo& q) const {
        return ((long long)kh * q.dh * q.W + (long long)kw * q.dw) * q.Ci + c;
    }
};

// Bias4 is the bias of 4 consecutive output channels, the first n of
// them loaded (once per thread, for every row it stores); on is false
// without a bias.
struct Bias4 {
    float v[4];
    bool on;
};

template <typename T> __device__ __forceinline__ Bias4 load_bias4(const T* bias, int ch, int n) {
    Bias4 b;
    b.on = bias != nullptr;
#pragma unroll
    for (int e = 0; e < 4; e++) b.v[e] = b.on && e < n ? to_f32(bias[ch + e]) : 0.0f;
    return b;
}

// store4 finishes n ≤ 4 consecutive outputs of one pixel: out[off + e] =
// act((v[e] + bias[e]) + res[off + e]) for e < n. Vector loads and stores
// when all 4 are there and the addresses allow.
template <typename T>
__device__ __forceinline__ void store4(T* out, const Bias4& bias, const T* res, long long off, int n, float (&v)[4],
                                       int act) {
    const bool vec = n == 4 && aligned_to(out + off, 4 * sizeof(T)) &&
                     (res == nullptr || aligned_to(res + off, 4 * sizeof(T)));
    if (bias.on) {
#pragma unroll
        for (int e = 0; e < 4; e++) v[e] += bias.v[e];
    }
    if (res != nullptr) {
        float r[4] = {0.0f, 0.0f, 0.0f, 0.0f};
        if (vec) {
            ld4(res + off, r);
        } else {
#pragma unroll
            for (int e = 0; e < 4; e++)
                if (e < n) r[e] = to_f32(res[off + e]);
        }
#pragma unroll
        for (int e = 0; e < 4; e++) v[e] += r[e];
    }
#pragma unroll
    for (int e = 0; e < 4; e++) v[e] = act_apply(v[e], act);
    if (vec) {
        st4(out + off, v);
    } else {
#pragma unroll
        for (int e = 0; e < 4; e++)
            if (e < n) out[off + e] = from_f32<T>(v[e]);
    }
}

// block_tile splits the linear block index into (M tile, channel tile),
// the channel tile fastest.
__device__ __forceinline__ void block_tile(int nTiles, int& tm, int& tn) {
    const int b = (int)blockIdx.x;
    tm = b / nTiles;
    tn = b - tm * nTiles;
}

// ---------------------------------------------------------------------------
// Tensor-core kernels: conv_tc_T and conv_tc_n64_T.
//
// Block tile 128 (M) x BN (Cog), BK = 64 bytes of K per stage (32 f16/bf16,
// 16 f32), 4 warps in 2x2, each 64 x BN/2 (4 m16 tiles x BN/16 n8 tiles), 4
// stages. Both operand tiles are k-major: A [128][BK + 16 bytes] then B
// [BN][BK + 16 bytes], pitch 80 bytes, which keeps ldmatrix (8 rows of 16
// bytes) and the tf32 scalar fragment loads free of bank conflicts. A is
// gathered from x in 16-byte chunks (cp.async, zero-filled outside the image
// and past K); B is the group's filter rows, K contiguous.

constexpr int TC_BM = 128, TC_THREADS = 128, TC_STAGES = 4;

template <typename T, int BN> struct TcGeom {
    static constexpr int E = (int)sizeof(T);
    static constexpr int EPC = 16 / E;               // elements per 16-byte chunk
    static constexpr int BK = 64 / E;                // K per stage
    static constexpr int LDK = BK + EPC;             // tile pitch (elements): 80 bytes
    static constexpr int A_BYTES = TC_BM * LDK * E;  // 10240
    static constexpr int B_BYTES = BN * LDK * E;     // 10240 or 5120
    static constexpr int STAGE_BYTES = A_BYTES + B_BYTES;
    static constexpr int SMEM = TC_STAGES * STAGE_BYTES; // 81920 or 61440
    static constexpr int WN = BN / 2;                // warp tile columns
    static constexpr int NT = WN / 8;                // n8 tiles per warp
    static constexpr int BCH = BN / 32;              // B chunks per thread per stage
    static constexpr int LDS = BN + 8;               // epilogue staging pitch (floats)
    static_assert(BN == 64 || BN == 128, "tile width");
    static_assert(TC_BM * LDS * 4 <= SMEM, "epilogue staging tile does not fit");
};
static_assert(TcGeom<__half, 128>::SMEM == 81920 && TcGeom<float, 128>::SMEM == 81920, "launch comment out of date");
static_assert(TcGeom<__half, 64>::SMEM == 61440 && TcGeom<float, 64>::SMEM == 61440, "launch comment out of date");

#if __CUDA_ARCH__ >= 800

// ImLoader gathers the A tile (im2col on the fly) of one stage: 128 rows x
// BK, 512 chunks of 16 bytes, 4 per thread. Thread tid copies the chunk at
// k offset cc = EPC·(tid%4) of rows r0 + 32i (r0 = tid/4, i = 0..3), to
// shared [r][LDK] at (r0 + 32i)·LDK + cc. The chunk's k position is walked
// by kp; since Cg % EPC == 0 a chunk never straddles two (kh, kw).
template <typename T, int BN> struct ImLoader {
    using G = TcGeom<T, BN>;
    const T* x;     // the group's channel 0 of x
    PixelRow row[4];
    KPos kp;        // the chunk's k in the next tile
    unsigned soff;  // chunk 0's shared byte offset within the A region

    __device__ __forceinline__ ImLoader(const Geo& q, const T* xg, int bm, int tid) {
        const int r0 = tid >> 2, cc = (tid & 3) * G::EPC;
        x = xg;
#pragma unroll
        for (int i = 0; i < 4; i++) row[i] = pixel_row(q, bm + r0 + 32 * i);
        kp.set(q, cc);
        soff = (unsigned)((r0 * G::LDK + cc) * G::E);
    }

    // load copies the next tile into the A region at shared address s.
    __device__ __forceinline__ void load(const Geo& q, unsigned s) {
        const bool kin = kp.kh < q.Kh;
        const int dy = kp.kh * q.dh, dx = kp.kw * q.dw;
        const long long koff = kp.offset(q);
#pragma unroll
        for (int i = 0; i < 4; i++) {
            const bool ok = kin && inside(q, row[i].ih0, row[i].iw0, dy, dx);
            cp_async16(s + soff + (unsigned)(i * 32 * G::LDK * G::E), ok ? x + row[i].off + koff : x, ok);
        }
        kp.advance(q, G::BK);
    }
};

// WLoader copies the B tile of one stage: BN filter rows x BK, BCH chunks
// per thread: rows r0 + 32i (r0 = tid/4), k offset cc = EPC·(tid%4). Rows
// past Cog and chunks past K (K % EPC == 0: a chunk is all in or all out)
// are zero-filled.
template <typename T, int BN> struct WLoader {
    using G = TcGeom<T, BN>;
    const T* base;     // the group's filter (fallback address for zero fills)
    const T* p;        // chunk 0's source in the next tile
    long long rstride; // elements between chunk i and i+1 sources
    unsigned soff;
    unsigned okmask;   // bit i: chunk i's row is inside
    int klim;          // tile at k0 is inside iff k0 < klim

    __device__ __forceinline__ WLoader(const T* wg, int Cog, int K, int bn, int tid) {
        const int r0 = tid >> 2, cc = (tid & 3) * G::EPC;
        base = wg;
        p = wg + (long long)(bn + r0) * K + cc;
        rstride = 32LL * K;
        soff = (unsigned)((r0 * G::LDK + cc) * G::E);
        okmask = 0;
#pragma unroll
        for (int i = 0; i < G::BCH; i++) okmask |= (bn + r0 + 32 * i < Cog ? 1u : 0u) << i;
        klim = K - cc;
    }

    __device__ __forceinline__ void load(unsigned s, int k0) {
#pragma unroll
        for (int i = 0; i < G::BCH; i++) {
            const bool ok = ((okmask >> i) & 1u) && k0 < klim;
            cp_async16(s + soff + (unsigned)(i * 32 * G::LDK * G::E), ok ? p + i * rstride : base, ok);
        }
        p += G::BK;
    }
};

// tc_compute_16 runs one stage (BK = 32) of f16/bf16 MMAs for this warp;
// sA and sB are the shared-space addresses of the stage's A and B tiles,
// both [row][k]. ldmatrix: A matrices (m0-7,k0-7) (m8-15,k0-7) (m0-7,k8-15)
// (m8-15,k8-15); B matrices (n0-7,k0-7) (n0-7,k8-15) (n8-15,k0-7)
// (n8-15,k8-15), which are the m16n8k16 fragments as loaded.
template <typename T, int BN>
__device__ __forceinline__ void tc_compute_16(unsigned sA, unsigned sB, int wm0, int wn0, int lane,
                                              float (&acc)[4][TcGeom<T, BN>::NT][4]) {
    using G = TcGeom<T, BN>;
    constexpr int E = G::E, NT = G::NT;
    const int j4 = lane >> 3, r8 = lane & 7;
    const unsigned aoff = (unsigned)(((wm0 + (lane & 15)) * G::LDK + (lane >> 4) * 8) * E);
    const unsigned boff = (unsigned)(((wn0 + r8 + (j4 >> 1) * 8) * G::LDK + (j4 & 1) * 8) * E);
#pragma unroll
    for (int kk = 0; kk < G::BK / 16; kk++) {
        unsigned af[4][4], bf[NT][2];
#pragma unroll
        for (int i = 0; i < 4; i++) ldsm_x4(af[i], sA + aoff + (i * 16 * G::LDK + kk * 16) * E);
#pragma unroll
        for (int p = 0; p < NT / 2; p++)
            ldsm_b_pair(bf[2 * p], bf[2 * p + 1], sB + boff + (p * 16 * G::LDK + kk * 16) * E);
#pragma unroll
        for (int i = 0; i < 4; i++)
#pragma unroll
            for (int j = 0; j < NT; j++) mma16816(acc[i][j], af[i], bf[j][0], bf[j][1], T());
    }
}

// tc_compute_tf32 runs one stage (BK = 16) of TF32 MMAs for this warp.
// Fragments (g = lane/4, t = lane%4): a0 (g,t) a1 (g+8,t) a2 (g,t+4)
// a3 (g+8,t+4); b0 (k=t, n=g) b1 (k=t+4, n=g).
template <int BN>
__device__ __forceinline__ void tc_compute_tf32(const float* As, const float* Bs, int wm0, int wn0, int lane,
                                                float (&acc)[4][TcGeom<float, BN>::NT][4]) {
    using G = TcGeom<float, BN>;
    constexpr int NT = G::NT;
    const int g = lane >> 2, t = lane & 3;
#pragma unroll
    for (int ks = 0; ks < G::BK / 8; ks++) {
        const int k = ks * 8 + t;
        unsigned af[4][4], bf[NT][2];
#pragma unroll
        for (int i = 0; i < 4; i++) {
            const int m = wm0 + i * 16 + g;
            af[i][0] = tf32(As[m * G::LDK + k]);
            af[i][1] = tf32(As[(m + 8) * G::LDK + k]);
            af[i][2] = tf32(As[m * G::LDK + k + 4]);
            af[i][3] = tf32(As[(m + 8) * G::LDK + k + 4]);
        }
#pragma unroll
        for (int j = 0; j < NT; j++) {
            const int n = wn0 + j * 8 + g;
            bf[j][0] = tf32(Bs[n * G::LDK + k]);
            bf[j][1] = tf32(Bs[n * G::LDK + k + 4]);
        }
#pragma unroll
        for (int i = 0; i < 4; i++)
#pragma unroll
            for (int j = 0; j < NT; j++) mma1688_tf32(acc[i][j], af[i], bf[j][0], bf[j][1]);
    }
}

#endif // __CUDA_ARCH__ >= 800

template <typename T, int BN>
__device__ __forceinline__ void conv_tc(T* out, const T* __restrict__ x, const T* __restrict__ w, const T* bias,
                                        const T* res, const Geo& q, int act) {
#if __CUDA_ARCH__ >= 800
    using G = TcGeom<T, BN>;
    extern __shared__ __align__(16) unsigned char cv_smem[];
    const int g = (int)blockIdx.z;
    int tm, tn;
    block_tile((q.Cog + BN - 1) / BN, tm, tn);
    const int bm = tm * TC_BM, bn = tn * BN;

    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    const int wm0 = (warp >> 1) * 64, wn0 = (warp & 1) * G::WN;
    const unsigned s0 = smem_u32(cv_smem);

    float acc[4][G::NT][4];
#pragma unroll
    for (int i = 0; i < 4; i++)
#pragma unroll
        for (int j = 0; j < G::NT; j++)
#pragma unroll
            for (int e = 0; e < 4; e++) acc[i][j][e] = 0.0f;

    ImLoader<T, BN> la(q, x + (long long)g * q.Cg, bm, tid);
    WLoader<T, BN> lb(w + (long long)g * q.Cog * q.K, q.Cog, q.K, bn, tid);
    const int kTiles = (q.K + G::BK - 1) / G::BK;

    cp_async_pipeline<TC_STAGES>(
        kTiles,
        [&](int st, int kt) {
            la.load(q, s0 + st * G::STAGE_BYTES);
            lb.load(s0 + st * G::STAGE_BYTES + G::A_BYTES, kt * G::BK);
        },
        [&](int st) {
            if constexpr (sizeof(T) == 4) {
                const float* As = reinterpret_cast<const float*>(cv_smem + st * G::STAGE_BYTES);
                const float* Bs = reinterpret_cast<const float*>(cv_smem + st * G::STAGE_BYTES + G::A_BYTES);
                tc_compute_tf32<BN>(As, Bs, wm0, wn0, lane, acc);
            } else {
                const unsigned sa = s0 + st * G::STAGE_BYTES;
                tc_compute_16<T, BN>(sa, sa + G::A_BYTES, wm0, wn0, lane, acc);
            }
        });

    // Epilogue through shared memory: stage the 128 x BN f32 tile (pitch
    // LDS = BN + 8 floats: the float2 fragment stores are conflict-free),
    // then finish it row by row: BN/4 threads per row, 4 channels each, so
    // that a warp stores whole runs of consecutive channels. acc[i][j] holds
    // rows (gq, gq+8) of m-tile i, columns (2t, 2t+1) of n-tile j.
    float* S = reinterpret_cast<float*>(cv_smem);
    __syncthreads(); // every warp is done with the pipeline's shared memory
    {
        const int gq = lane >> 2, t = lane & 3;
#pragma unroll
        for (int i = 0; i < 4; i++) {
#pragma unroll
            for (int j = 0; j < G::NT; j++) {
                const int r = wm0 + i * 16 + gq, c = wn0 + j * 8 + 2 * t;
                *reinterpret_cast<float2*>(&S[r * G::LDS + c]) = make_float2(acc[i][j][0], acc[i][j][1]);
                *reinterpret_cast<float2*>(&S[(r + 8) * G::LDS + c]) = make_float2(acc[i][j][2], acc[i][j][3]);
            }
        }
    }
    __syncthreads();
    constexpr int TPR = BN / 4;            // threads per row
    constexpr int RPP = TC_THREADS / TPR;  // rows per pass
    const int col = (tid % TPR) * 4, o = bn + col;
    if (o >= q.Cog) return;
    const int n = min(q.Cog - o, 4), ch = g * q.Cog + o;
    const Bias4 bv = load_bias4(bias, ch, n);
#pragma unroll 1
    for (int r = tid / TPR; r < TC_BM; r += RPP) {
        const int m = bm + r;
        if (m >= q.M) break;
        const float4 s = *reinterpret_cast<const float4*>(&S[r * G::LDS + col]);
        float v[4] = {s.x, s.y, s.z, s.w};
        store4(out, bv, res, (long long)m * q.Co + ch, n, v, act);
    }
#else
    __trap();
#endif
}

// ---------------------------------------------------------------------------
// SIMT kernel: conv_simt_T.
//
// Shared tiles hold float32, k-major: As[k][m], Bs[k][o], 16 rows of 64 (+4
// padding, keeping float4 rows aligned). Loads: thread tid takes k = tid%16
// of rows (pixels, filter rows) tid/16 + 16i, i = 0..3, so that 16
// neighbouring threads read 16 consecutive k (channels) of one row; the next
// tile's values are loaded into registers while the current one is
// multiplied. Compute: thread (tr, tc) = (tid/16, tid%16) owns rows 4tr..+3
// and channels 4tc..+3 of the block tile.

constexpr int S_BM = 64, S_BN = 64, S_BK = 16, S_THREADS = 256, S_LD = 68;

template <typename T>
__device__ __forceinline__ void conv_simt(T* out, const T* __restrict__ x, const T* __restrict__ w, const T* bias,
                                          const T* res, const Geo& q, int act) {
    __shared__ __align__(16) float As[2][S_BK][S_LD];
    __shared__ __align__(16) float Bs[2][S_BK][S_LD];
    const int g = (int)blockIdx.z;
    int tm, tn;
    block_tile((q.Cog + S_BN - 1) / S_BN, tm, tn);
    const int bm = tm * S_BM, bn = tn * S_BN;
    const int tid = threadIdx.x, lk = tid & 15, lr = tid >> 4;

    const T* xg = x + (long long)g * q.Cg;
    const T* wg = w + (long long)g * q.Cog * q.K;
    PixelRow row[4];
#pragma unroll
    for (int i = 0; i < 4; i++) row[i] = pixel_row(q, bm + lr + 16 * i);
    KPos kp;
    kp.set(q, lk);

    float ra[4], rb[4];
    // fetch loads the tile at k0 into ra, rb and advances kp.
    auto fetch = [&](int k0) {
        const int k = k0 + lk;
        const bool kin = k < q.K;
        const int dy = kp.kh * q.dh, dx = kp.kw * q.dw;
        const long long koff = kp.offset(q);
#pragma unroll
        for (int i = 0; i < 4; i++) {
            const bool ok = kin && inside(q, row[i].ih0, row[i].iw0, dy, dx);
            ra[i] = ok ? to_f32(xg[row[i].off + koff]) : 0.0f;
            const int o = bn + lr + 16 * i;
            rb[i] = kin && o < q.Cog ? to_f32(wg[(long long)o * q.K + k]) : 0.0f;
        }
        kp.advance(q, S_BK);
    };
    auto stash = [&](int buf) {
#pragma unroll
        for (int i = 0; i < 4; i++) {
            As[buf][lk][lr + 16 * i] = ra[i];
            Bs[buf][lk][lr + 16 * i] = rb[i];
        }
    };

    float acc[4][4];
#pragma unroll
    for (int i = 0; i < 4; i++)
#pragma unroll
        for (int j = 0; j < 4; j++) acc[i][j] = 0.0f;

    fetch(0);
    stash(0);
    __syncthreads();
    const int tr = tid >> 4, tc = tid & 15;
    int buf = 0;
    for (int k0 = 0; k0 < q.K; k0 += S_BK) {
        const bool more = k0 + S_BK < q.K;
        if (more) fetch(k0 + S_BK); // in flight during the FMAs below
#pragma unroll
        for (int kk = 0; kk < S_BK; kk++) {
            const float4 a = *reinterpret_cast<const float4*>(&As[buf][kk][4 * tr]);
            const float4 b = *reinterpret_cast<const float4*>(&Bs[buf][kk][4 * tc]);
            const float av[4] = {a.x, a.y, a.z, a.w}, bv[4] = {b.x, b.y, b.z, b.w};
#pragma unroll
            for (int i = 0; i < 4; i++)
#pragma unroll
                for (int j = 0; j < 4; j++) acc[i][j] = fmaf(av[i], bv[j], acc[i][j]);
        }
        // The other buffer was last read in the previous iteration, which
        // every thread finished before the barrier that ended it.
        if (more) stash(buf ^ 1);
        __syncthreads();
        buf ^= 1;
    }

    const int o = bn + 4 * tc;
    if (o >= q.Cog) return;
    const int n = min(q.Cog - o, 4), ch = g * q.Cog + o;
    const Bias4 bv = load_bias4(bias, ch, n);
#pragma unroll
    for (int i = 0; i < 4; i++) {
        const int m = bm + 4 * tr + i;
        if (m < q.M) store4(out, bv, res, (long long)m * q.Co + ch, n, acc[i], act);
    }
}

// ---------------------------------------------------------------------------
// Direct kernel: conv_direct_T, one output element per thread.

template <typename T>
__device__ __forceinline__ void conv_direct(T* out, const T* __restrict__ x, const T* __restrict__ w, const T* bias,
                                            const T* res, const Geo& q, int act) {
    const long long total = (long long)q.M * q.Co;
    for (long long i = grid_tid(); i < total; i += grid_stride()) {
        const int o = (int)(i % q.Co);
        const int m = (int)(i / q.Co);
        const int g = o / q.Cog;
        const PixelRow r = pixel_row(q, m);
        const T* xg = x + r.off + (long long)g * q.Cg;
        const T* wr = w + (long long)o * q.K;
        float acc = 0.0f;
        for (int kh = 0; kh < q.Kh; kh++) {
            const int dy = kh * q.dh;
            if ((unsigned)(r.ih0 + dy) >= (unsigned)q.H) continue;
            for (int kw = 0; kw < q.Kw; kw++) {
                const int dx = kw * q.dw;
                if ((unsigned)(r.iw0 + dx) >= (unsigned)q.W) continue;
                const T* xp = xg + ((long long)dy * q.W + dx) * q.Ci;
                const T* wp = wr + (kh * q.Kw + kw) * q.Cg;
                for (int c = 0; c < q.Cg; c++) acc = fmaf(to_f32(xp[c]), to_f32(wp[c]), acc);
            }
        }
        if (bias != nullptr) acc += to_f32(bias[o]);
        if (res != nullptr) acc += to_f32(res[i]);
        out[i] = from_f32<T>(act_apply(acc, act));
    }
}

// ---------------------------------------------------------------------------
// Pooling.

// maxpool: the comparison is in float32 (exact for every T); the stored
// value is the winning element itself.
template <typename T>
__device__ __forceinline__ void maxpool(T* out, const T* __restrict__ x, int N, int H, int W, int C, int Ho, int Wo,
                                        int kh, int kw, int sh, int sw, int ph, int pw, int dh, int dw) {
    const long long total = (long long)N * Ho * Wo * C;
    for (long long i = grid_tid(); i < total; i += grid_stride()) {
        const int c = (int)(i % C);
        long long t = i / C;
        const int ow = (int)(t % Wo);
        t /= Wo;
        const int oh = (int)(t % Ho);
        const long long n = t / Ho;
        const int ih0 = oh * sh - ph, iw0 = ow * sw - pw;
        float best = -INFINITY;
        T win = from_f32<T>(-INFINITY);
        for (int a = 0; a < kh; a++) {
            const int ih = ih0 + a * dh;
            if ((unsigned)ih >= (unsigned)H) continue;
            const T* xr = x + (n * H + ih) * (long long)W * C + c;
            for (int b = 0; b < kw; b++) {
                const int iw = iw0 + b * dw;
                if ((unsigned)iw >= (unsigned)W) continue;
                const T e = xr[(long long)iw * C];
                const float v = to_f32(e);
                if (v > best || v != v) { // NaN wins and stays: nothing is > NaN
                    best = v;
                    win = e;
                }
            }
        }
        out[i] = win;
    }
}

constexpr int GAP_CH = 64, GAP_ROWS = 4;

template <typename T>
__device__ __forceinline__ void global_avgpool(T* out, const T* __restrict__ x, int N, int HW, int C) {
    __shared__ float part[GAP_ROWS][GAP_CH];
    const int chunks = (C + GAP_CH - 1) / GAP_CH;
    const int n = (int)blockIdx.x / chunks;
    const int c = ((int)blockIdx.x - n * chunks) * GAP_CH + threadIdx.x;
    float s = 0.0f;
    if (c < C) {
        const T* p = x + (long long)n * HW * C + c;
        for (int i = threadIdx.y; i < HW; i += GAP_ROWS) s += to_f32(p[(long long)i * C]);
    }
    part[threadIdx.y][threadIdx.x] = s;
    __syncthreads();
    if (threadIdx.y == 0 && c < C) {
#pragma unroll
        for (int r = 1; r < GAP_ROWS; r++) s += part[r][threadIdx.x];
        out[(long long)n * C + c] = from_f32<T>(s / (float)HW);
    }
}

} // namespace cv

// ---------------------------------------------------------------------------
// Entry points.

#define CONV_PARAMS(T)                                                                                         \
    T *out, const T *__restrict__ x, const T *__restrict__ w, const T *bias, const T *res, int N, int H, int W, \
        int Ci, int Co, int Ho, int Wo, int Kh, int Kw, int sh, int sw, int ph, int pw, int dh, int dw,        \
        int groups, int act
#define CONV_GEO cv::make_geo(N, H, W, Ci, Co, Ho, Wo, Kh, Kw, sh, sw, ph, pw, dh, dw, groups)

#define POOL_KERNELS(T, SUF)                                                                                  \
    extern "C" __global__ void maxpool_##SUF(T* out, const T* __restrict__ x, int N, int H, int W, int C,     \
                                             int Ho, int Wo, int kh, int kw, int sh, int sw, int ph, int pw,  \
                                             int dh, int dw) {                                                \
        cv::maxpool<T>(out, x, N, H, W, C, Ho, Wo, kh, kw, sh, sw, ph, pw, dh, dw);                           \
    }                                                                                                         \
    extern "C" __global__ void __launch_bounds__(cv::GAP_CH * cv::GAP_ROWS)                                   \
        global_avgpool_##SUF(T* out, const T* __restrict__ x, int N, int HW, int C) {                        \
        cv::global_avgpool<T>(out, x, N, HW, C);                                                              \
    }

#define CONV_KERNELS(T, SUF)                                                                                  \
    /* Tensor cores (sm_80+): grid (ceil(M/128)·ceil(Cog/128), 1, groups), block 128, 81920 bytes. */       \
    extern "C" __global__ void __launch_bounds__(cv::TC_THREADS) conv_tc_##SUF(CONV_PARAMS(T)) {             \
        cv::conv_tc<T, 128>(out, x, w, bias, res, CONV_GEO, act);                                             \
    }                                                                                                         \
    /* Tensor cores, 64 channels wide: grid (ceil(M/128)·ceil(Cog/64), 1, groups), 61440 bytes. */           \
    extern "C" __global__ void __launch_bounds__(cv::TC_THREADS) conv_tc_n64_##SUF(CONV_PARAMS(T)) {         \
        cv::conv_tc<T, 64>(out, x, w, bias, res, CONV_GEO, act);                                              \
    }                                                                                                         \
    /* SIMT: grid (ceil(M/64)·ceil(Cog/64), 1, groups), block 256. */                                         \
    extern "C" __global__ void __launch_bounds__(cv::S_THREADS) conv_simt_##SUF(CONV_PARAMS(T)) {            \
        cv::conv_simt<T>(out, x, w, bias, res, CONV_GEO, act);                                                \
    }                                                                                                         \
    /* Direct: any grid-stride grid. */                                                                       \
    extern "C" __global__ void conv_direct_##SUF(CONV_PARAMS(T)) {                                            \
        cv::conv_direct<T>(out, x, w, bias, res, CONV_GEO, act);                                              \
    }                                                                                                         \
    POOL_KERNELS(T, SUF)

CONV_KERNELS(float, f32)
CONV_KERNELS(__half, f16)
CONV_KERNELS(__nv_bfloat16, bf16)
