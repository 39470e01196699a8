//go:build cuda

package cuda

import (
	"fmt"
	"math"

	"github.com/zbench/zbench/kernels"
	"github.com/zbench/zbench/kernels/check"
)

// Geometry of matmul_sm90_bf16 and matmul_sm90_f16 (kernels/cuda/matmul_sm90.cu):
// a CTA of three warpgroups computes a 128×256 tile of out in steps of 64
// along K through a 4-stage shared-memory ring.
const (
	sm90TileM   = 128
	sm90TileN   = 256
	sm90TileK   = 64
	sm90Threads = 384
	sm90Stages  = 4
	// sm90Smem is the dynamic shared memory: 1024 bytes of alignment slack,
	// the stages (A 128×64 and B 64×256 16-bit elements each) and two
	// 8-byte mbarriers per stage.
	sm90Smem = 1024 + sm90Stages*(sm90TileM+sm90TileN)*sm90TileK*2 + 16*sm90Stages
	// sm90MaxDim bounds M, N and K so that the kernel's 32-bit tile
	// coordinates (up to a dimension plus one tile) cannot overflow.
	sm90MaxDim = math.MaxInt32 - sm90TileN
)

// matmulSM90 runs MatMul on the Hopper kernel, which multiplies with wgmma
// from tiles that TMA copies into shared memory, in slices of K (sm90Split)
// where one product has too few tiles to fill the device. It returns false,
// nil when the call does not meet the kernel's preconditions, and the
// caller then uses another kernel: compute capability 9.0 (the kernel
// exists only in the sm_90a image), F16 or BF16, or F32 with p.TF32 (B
// [N, K], or a 2-D B [K, N], which is transposed first: wgmma reads tf32 B
// K-major only), no TransA, N and K multiples of 8 (TMA row strides are
// multiples of 16 bytes), 16-byte aligned a, b and out, a bias aligned to
// two elements, and at most 65535 batch entries. M, N and K need not
// be multiples of the tile: TMA reads zeros past the edges and the kernel
// stores only inside out. p.Alpha is used as given: MatMul has turned 0
// into 1.
//
// The tensor maps are 3-D, the batch outermost, so that no tile reads
// across batch entries: a is {K, M, batch}; b is {N, K, batchB} stored
// [K, N] or {K, N, batchB} stored [N, K] (TransB), where batchB is 1 when b
// is shared by every batch entry.
func (b *Backend) matmulSM90(out, a, bm *kernels.Tensor, d check.MatMulDims, p kernels.MatMulParams) (bool, error) {
	if b.major != 9 || b.minor != 0 {
		return false, nil
	}
	dt := a.DType()
	var name string
	switch {
	case dt == kernels.BF16:
		name = "matmul_sm90_bf16"
	case dt == kernels.F16:
		name = "matmul_sm90_f16"
	case dt == kernels.F32 && p.TF32 && (d.Batch == 1 || d.SharedB || p.TransB):
		name = "matmul_sm90_tf32"
	default:
		return false, nil
	}
	if p.TransA || d.Batch < 1 || d.Batch > 65535 ||
		d.M < 1 || d.N < 1 || d.K < 1 || d.M > sm90MaxDim || d.N > sm90MaxDim || d.K > sm90MaxDim ||
		d.N%8 != 0 || d.K%8 != 0 {
		return false, nil
	}
	pa, pb, pc, pbias := ptrOf(a), ptrOf(bm), ptrOf(out), ptrOf(p.Bias)
	if pa%16 != 0 || pb%16 != 0 || pc%16 != 0 || pbias%devptr(2*dt.Size()) != 0 {
		return false, nil
	}
	tiles := int64((d.M+sm90TileM-1)/sm90TileM) * int64((d.N+sm90TileN-1)/sm90TileN)
	if tiles > math.MaxInt32 {
		return false, nil
	}
	if dt == kernels.F32 && !p.TransB {
		// wgmma reads tf32 B K-major only: B [K, N] (2-D) transposed to
		// [N, K] first.
		tb, err := b.transposeB(pb, d.K, d.N)
		if err != nil {
			return true, err
		}
		pb, p.TransB = tb, true
	}

	es := uint64(dt.Size())
	bk := uint32(128 / es) // elements of K in a stage's 128-byte rows
	m, n, k, batch := uint64(d.M), uint64(d.N), uint64(d.K), uint64(d.Batch)
	batchB, sharedB := batch, int32(0)
	if d.SharedB || d.Batch == 1 {
		batchB, sharedB = 1, 1
	}
	var tmA, tmB tensorMap
	var errA, errB error
	err := b.call("cuTensorMapEncodeTiled", func() {
		tmA, errA = encodeTensorMap(pa, dt, []uint64{k, m, batch}, []uint64{k * es, m * k * es},
			[]uint32{bk, sm90TileM, 1}, true)
		if p.TransB { // b stored [N, K]: K-major tiles of 256 rows
			tmB, errB = encodeTensorMap(pb, dt, []uint64{k, n, batchB}, []uint64{k * es, n * k * es},
				[]uint32{bk, sm90TileN, 1}, true)
		} else { // b stored [K, N]: N-major, four boxes of 64 columns per tile
			tmB, errB = encodeTensorMap(pb, dt, []uint64{n, k, batchB}, []uint64{n * es, k * n * es},
				[]uint32{64, sm90TileK, 1}, true)
		}
	})
	switch {
	case err != nil:
		return true, err
	case errA != nil:
		return true, errA
	case errB != nil:
		return true, errB
	}

	// One product of few tiles: slices of K into the partials arena, then
	// splitk_reduce_T with the epilogue.
	if splits, kslice := sm90Split.splitK(d, b.info.Cores); splits > 1 {
		ws, err := b.partialsFor(d, splits)
		if err != nil {
			return true, err
		}
		if err := b.launch(name, dim3{x: int(tiles), y: 1, z: splits}, dim3{x: sm90Threads}, sm90Smem,
			tmA, tmB, pc, pbias, int32(d.M), int32(d.N), int32(d.K), int32(boolInt(p.TransB)),
			int64(d.M)*int64(d.N), p.Alpha, p.Beta, int32(p.Act), sharedB, ws, int32(kslice)); err != nil {
			return true, err
		}
		return true, b.splitReduce(out, ws, d, p, splits)
	}
	return true, b.launch(name, dim3{x: int(tiles), y: 1, z: d.Batch}, dim3{x: sm90Threads}, sm90Smem,
		tmA, tmB, pc, pbias, int32(d.M), int32(d.N), int32(d.K), int32(boolInt(p.TransB)),
		int64(d.M)*int64(d.N), p.Alpha, p.Beta, int32(p.Act), sharedB, devptr(0), int32(0))
}

// transposeB returns the transB arena's copy of the 2-D f32 B [k, n] at pb
// transposed to [n, k] (transpose_u32).
func (b *Backend) transposeB(pb devptr, k, n int) (devptr, error) {
	bytes := int64(k) * int64(n) * 4
	tb, err := b.transB.get(bytes, b.memAlloc)
	if err != nil {
		return 0, fmt.Errorf("tf32 MatMul: b transposed, %d bytes: %w", bytes, err)
	}
	return tb, b.launch("transpose_u32", dim3{x: (n + 31) / 32, y: (k + 31) / 32}, dim3{x: 32, y: 8}, 0,
		tb, pb, int32(k), int32(n))
}
