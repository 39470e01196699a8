//go:build cuda

package cuda

import (
	"fmt"

	"github.com/zbench/zbench/kernels"
	"github.com/zbench/zbench/kernels/check"
)

// tcSmem is the dynamic shared memory of the mma.sync kernels
// (matmul_tc_f16, matmul_tc_bf16, matmul_tf32): a 4-stage pipeline.
const tcSmem = 81920

// MatMul sets out = act(alpha·op(a)·op(b) + beta·out + bias). It picks, in
// order: the matrix-vector kernel (16-bit, a few rows times a transposed
// weight: decoding), the Hopper wgmma/TMA kernel (16-bit, or F32 with
// p.TF32, compute capability 9.0), the mma.sync tensor-core kernels
// (16-bit, or F32 with p.TF32, from 8.0), and the SIMT kernel, which takes
// every shape on every device; the Hopper and SIMT kernels multiply in
// slices of K where one product has too few tiles to fill the device.
func (b *Backend) MatMul(out, a, bm *kernels.Tensor, p kernels.MatMulParams) error {
	d, err := check.MatMul("cuda: matmul", b, out, a, bm, p)
	if err != nil {
		return err
	}
	if p.Alpha == 0 {
		p.Alpha = 1
	}
	if ok, err := b.matmulGEMV(out, a, bm, d, p); ok || err != nil {
		return wrap("matmul", err)
	}
	if ok, err := b.matmulSM90(out, a, bm, d, p); ok || err != nil {
		return wrap("matmul", err)
	}
	dt := out.DType()
	// The SIMT kernel: 256 threads; it also takes K = 0 (the epilogue alone).
	name, threads, smem := "matmul_"+dt.String(), 256, 0
	if b.major >= 8 && tensorCoreFits(d, dt, p.TF32, ptrOf(a), ptrOf(bm)) {
		name, threads, smem = "matmul_tc_"+dt.String(), 128, tcSmem
		if dt == kernels.F32 {
			name = "matmul_tf32"
		}
	}
	if name == "matmul_f32" {
		if splits, kslice := simtSplit.splitK(d, b.info.Cores); splits > 1 {
			return wrap("matmul", b.matmulSplitK(out, a, bm, d, p, splits, kslice))
		}
	}
	strideA, strideB, strideC := int64(d.M)*int64(d.K), int64(d.K)*int64(d.N), int64(d.M)*int64(d.N)
	if d.SharedB {
		strideB = 0
	}
	if (d.M+127)/128 > maxGridY {
		return fmt.Errorf("cuda: matmul: M = %d is over the %d rows one launch takes: %w", d.M, 128*maxGridY, kernels.ErrUnsupported)
	}
	// The grid's z dimension is the batch: launch in chunks of at most
	// maxGridZ products.
	size := devptr(dt.Size())
	for z := 0; z < d.Batch; z += maxGridZ {
		nz := min(d.Batch-z, maxGridZ)
		off := func(t *kernels.Tensor, stride int64) devptr { return ptrOf(t) + devptr(int64(z)*stride)*size }
		if err := b.launch(name, dim3{x: (d.N + 127) / 128, y: (d.M + 127) / 128, z: nz}, dim3{x: threads}, smem,
			off(out, strideC), off(a, strideA), off(bm, strideB), ptrOf(p.Bias), int32(d.M), int32(d.N), int32(d.K),
			int32(boolInt(p.TransA)), int32(boolInt(p.TransB)), strideA, strideB, strideC, p.Alpha, p.Beta, int32(p.Act)); err != nil {
			return wrap("matmul", err)
		}
	}
	return nil
}

// splitTile is a kernel's geometry for split-K: tiles of m×n outputs, K
// sliced in multiples of step, each slice at least minDepth deep.
type splitTile struct{ m, n, step, minDepth int }

var (
	// simtSplit is the SIMT kernel's (matmul_splitk_f32).
	simtSplit = splitTile{m: 128, n: 128, step: 8, minDepth: 64}
	// sm90Split is the Hopper kernel's: whole k-tiles, at least four, so
	// that its pipeline fills.
	sm90Split = splitTile{m: sm90TileM, n: sm90TileN, step: sm90TileK, minDepth: 4 * sm90TileK}
)

// splitK is how many slices of K, and how deep each (a multiple of
// g.step), a kernel of tile g multiplies one product of d in: as many as
// give each of sms multiprocessors a tile, where the product's own tiles
// fill fewer than half of them (BERT's products at batch 1: 6 to 24 SIMT
// tiles on 132); 1 for a batch of products or a K too short to split.
func (g splitTile) splitK(d check.MatMulDims, sms int) (splits, kslice int) {
	tiles := ((d.M + g.m - 1) / g.m) * ((d.N + g.n - 1) / g.n)
	if d.Batch != 1 || tiles == 0 || 2*tiles > sms {
		return 1, d.K
	}
	splits = min(sms/tiles, d.K/g.minDepth)
	if splits < 2 {
		return 1, d.K
	}
	kslice = ((d.K+splits-1)/splits + g.step - 1) / g.step * g.step
	return (d.K + kslice - 1) / kslice, kslice
}

// partialsFor returns the partials arena's buffer for splits float32
// products of d.
func (b *Backend) partialsFor(d check.MatMulDims, splits int) (devptr, error) {
	n := int64(splits) * int64(d.M) * int64(d.N) * 4
	ws, err := b.partials.get(n, b.memAlloc)
	if err != nil {
		return 0, fmt.Errorf("split-K partial products of %d bytes: %w", n, err)
	}
	return ws, nil
}

// splitReduce launches splitk_reduce_T: out = the epilogue of the sum of
// the splits partial products at ws.
func (b *Backend) splitReduce(out *kernels.Tensor, ws devptr, d check.MatMulDims, p kernels.MatMulParams, splits int) error {
	mn := int64(d.M) * int64(d.N)
	blocks := int(min((mn+255)/256, int64(8*max(1, b.info.Cores))))
	return b.launch("splitk_reduce_"+out.DType().String(), dim3{x: blocks}, dim3{x: 256}, 0,
		ptrOf(out), ws, ptrOf(p.Bias), int32(d.M), int32(d.N), int32(splits), p.Alpha, p.Beta, int32(p.Act))
}

// matmulSplitK is MatMul of one f32 product on the SIMT kernel in splits
// slices of K: each slice's product into the partials arena, then
// splitk_reduce_f32 adds them up in order and applies the epilogue.
func (b *Backend) matmulSplitK(out, a, bm *kernels.Tensor, d check.MatMulDims, p kernels.MatMulParams, splits, kslice int) error {
	ws, err := b.partialsFor(d, splits)
	if err != nil {
		return err
	}
	if err := b.launch("matmul_splitk_f32", dim3{x: (d.N + 127) / 128, y: (d.M + 127) / 128, z: splits}, dim3{x: 256}, 0,
		ws, ptrOf(a), ptrOf(bm), int32(d.M), int32(d.N), int32(d.K), int32(boolInt(p.TransA)), int32(boolInt(p.TransB)), int32(kslice)); err != nil {
		return err
	}
	return b.splitReduce(out, ws, d, p, splits)
}

// The largest grid dimensions y and z of a launch.
const (
	maxGridY = 65535
	maxGridZ = 65535
)

// tensorCoreFits reports whether the mma.sync kernels take these operands:
// 16-byte aligned a and b, and M, N, K multiples of 8 for 16-bit types or
// of 4 for TF32, so that every row and every batch's matrix is 16-byte
// aligned too. F32 without TF32 never does.
func tensorCoreFits(d check.MatMulDims, dt kernels.DType, tf32 bool, a, b devptr) bool {
	if a%16 != 0 || b%16 != 0 {
		return false
	}
	q := 8
	if dt == kernels.F32 {
		if !tf32 {
			return false
		}
		q = 4
	}
	return d.M%q == 0 && d.N%q == 0 && d.K%q == 0
}

func boolInt(v bool) int {
	if v {
		return 1
	}
	return 0
}

// gemvMaxRows is the most rows of a that matmul_gemvR_T takes (R = 1, 2,
// 4, 8: the kernel's sums stay in registers).
const gemvMaxRows = 8

// matmulGEMV runs MatMul on matmul_gemvR_T, the matrix-vector kernel of
// decode steps, and returns false, nil when the call does not meet its
// preconditions: F16 or BF16, no TransA, TransB, one product (or a batch
// sharing b, whose rows are one [Batch·M, K] matrix), at most gemvMaxRows
// rows, K a multiple of 8, and a and b 16-byte aligned.
func (b *Backend) matmulGEMV(out, a, bm *kernels.Tensor, d check.MatMulDims, p kernels.MatMulParams) (bool, error) {
	dt := out.DType()
	rows := d.M
	if d.Batch > 1 {
		if !d.SharedB {
			return false, nil
		}
		rows = d.Batch * d.M
	}
	if p.TransA || !p.TransB || rows > gemvMaxRows || !gemvTakes(dt, d.K, ptrOf(a), ptrOf(bm)) {
		return false, nil
	}
	return true, b.launch(fmt.Sprintf("matmul_gemv%d_%s", gemvRows(rows), dt), dim3{x: (d.N + 7) / 8}, dim3{x: 128}, 0,
		ptrOf(out), ptrOf(a), ptrOf(bm), ptrOf(p.Bias), int32(rows), int32(d.N), int32(d.K), p.Alpha, p.Beta, int32(p.Act))
}

// gemvTakes reports whether the matrix-vector kernels take products in dt
// of depth k from the input and weights at ptrs: F16 or BF16, k a multiple
// of 8 (16-byte chunks of the weight's rows), every address 16-byte
// aligned.
func gemvTakes(dt kernels.DType, k int, ptrs ...devptr) bool {
	if (dt != kernels.F16 && dt != kernels.BF16) || k%8 != 0 {
		return false
	}
	for _, p := range ptrs {
		if p%16 != 0 {
			return false
		}
	}
	return true
}

// gemvSharedRows is the most rows of a that matmul_gemvR_shared_T takes.
const gemvSharedRows = 4

// gemvRows is the R of the matrix-vector kernel for rows rows: the power of
// two at or above it.
func gemvRows(rows int) int {
	r := 1
	for r < rows {
		r *= 2
	}
	return r
}

// MatMulShared multiplies a by two or three weights in one launch of
// matmul_gemvR_shared_T where every product meets matmulGEMV's
// preconditions with at most gemvSharedRows rows, and by each in turn
// through MatMul otherwise.
func (b *Backend) MatMulShared(outs []*kernels.Tensor, a *kernels.Tensor, bs []*kernels.Tensor) error {
	ds, err := check.MatMulShared("cuda: MatMulShared", b, outs, a, bs)
	if err != nil {
		return err
	}
	dt, rows, k := a.DType(), ds[0].Batch*ds[0].M, ds[0].K
	ptrs := []devptr{ptrOf(a)}
	for _, w := range bs {
		ptrs = append(ptrs, ptrOf(w))
	}
	if len(bs) < 2 || len(bs) > 3 || rows > gemvSharedRows || !gemvTakes(dt, k, ptrs...) {
		for i := range bs {
			if err := b.MatMul(outs[i], a, bs[i], kernels.MatMulParams{TransB: true}); err != nil {
				return err
			}
		}
		return nil
	}
	args := make([]any, 0, 12)
	blocks := 0
	for i := range 3 {
		if i < len(bs) {
			args = append(args, ptrOf(outs[i]), ptrOf(bs[i]), int32(ds[i].N))
			blocks += (ds[i].N + 7) / 8
		} else {
			args = append(args, devptr(0), devptr(0), int32(0))
		}
	}
	args = append(args, ptrOf(a), int32(rows), int32(k))
	return wrap("MatMulShared", b.launch(fmt.Sprintf("matmul_gemv%d_shared_%s", gemvRows(rows), dt), dim3{x: blocks}, dim3{x: 128}, 0, args...))
}
