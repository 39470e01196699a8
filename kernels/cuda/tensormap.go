//go:build cuda

package cuda

// Tensor maps (CUtensorMap) describe a global-memory tensor to the Hopper
// TMA unit: the kernels receive them by value as __grid_constant__
// parameters and copy boxes of the tensor into shared memory with
// cp.async.bulk.tensor.

/*
#cgo LDFLAGS: -lcuda
#include <cuda.h>
#include <stdint.h>
#include <stdlib.h>

// zbEncodeTiled calls cuTensorMapEncodeTiled with unit element strides, no
// interleave, 256-byte L2 promotion and zero fill outside the tensor; base
// is a device address.
static CUresult zbEncodeTiled(CUtensorMap* m, CUtensorMapDataType dt, cuuint32_t rank, cuuint64_t base,
		const cuuint64_t* dims, const cuuint64_t* strides, const cuuint32_t* box, int swizzle128) {
	const cuuint32_t elementStrides[5] = {1, 1, 1, 1, 1};
	return cuTensorMapEncodeTiled(m, dt, rank, (void*)(uintptr_t)base, dims, strides, box, elementStrides,
		CU_TENSOR_MAP_INTERLEAVE_NONE, swizzle128 ? CU_TENSOR_MAP_SWIZZLE_128B : CU_TENSOR_MAP_SWIZZLE_NONE,
		CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
}
*/
import "C"

import (
	"fmt"
	"unsafe"

	"github.com/zbench/zbench/kernels"
)

// maxTensorMapRank is the most dimensions a tensor map can have.
const maxTensorMapRank = 5

// encodeTensorMap describes a tiled TMA view of the tensor at device address
// base with element type dt: dims are the sizes in elements, innermost
// (contiguous) first; strides the byte distances between consecutive
// indices of dims[1:] (len(dims)−1 entries, multiples of 16); box the size
// in elements of the block one copy moves (each at most 256, box[0]·size a
// multiple of 16 bytes, at most 128 bytes with swizzle128). With swizzle128
// the copy lays the box out in shared memory with the 128-byte swizzle that
// wgmma descriptors of layout type 1 expect. Elements outside dims read as
// zero. F16, BF16, F32 and I32 map to the driver's types of the same name,
// the 1-byte types (I8, E4M3, E5M2) to UINT8, which TMA copies bit for bit.
//
// The driver may need the backend's context current on the calling thread
// (run it inside Backend.call). A failure is returned as an error naming
// every argument.
func encodeTensorMap(base devptr, dt kernels.DType, dims []uint64, strides []uint64, box []uint32,
	swizzle128 bool) (tensorMap, error) {
	var tm tensorMap
	fail := func(why string, err error) (tensorMap, error) {
		return tensorMap{}, fmt.Errorf("tensor map of %#x (%v, dims %v, byte strides %v, box %v, 128B swizzle %v): %s: %w",
			uintptr(base), dt, dims, strides, box, swizzle128, why, err)
	}
	rank := len(dims)
	switch {
	case rank < 1 || rank > maxTensorMapRank:
		return fail(fmt.Sprintf("%d dimensions, want 1 to %d", rank, maxTensorMapRank), kernels.ErrValue)
	case len(strides) != rank-1:
		return fail(fmt.Sprintf("%d strides, want %d", len(strides), rank-1), kernels.ErrValue)
	case len(box) != rank:
		return fail(fmt.Sprintf("%d box sizes, want %d", len(box), rank), kernels.ErrValue)
	}
	var cdt C.CUtensorMapDataType
	switch dt {
	case kernels.F16:
		cdt = C.CU_TENSOR_MAP_DATA_TYPE_FLOAT16
	case kernels.BF16:
		cdt = C.CU_TENSOR_MAP_DATA_TYPE_BFLOAT16
	case kernels.F32:
		cdt = C.CU_TENSOR_MAP_DATA_TYPE_FLOAT32
	case kernels.I32:
		cdt = C.CU_TENSOR_MAP_DATA_TYPE_INT32
	case kernels.I8, kernels.E4M3, kernels.E5M2:
		cdt = C.CU_TENSOR_MAP_DATA_TYPE_UINT8
	default:
		return fail("no TMA element type", kernels.ErrDType)
	}

	var cdims [maxTensorMapRank]C.cuuint64_t
	var cstrides [maxTensorMapRank]C.cuuint64_t // one spare: never empty
	var cbox [maxTensorMapRank]C.cuuint32_t
	for i := range rank {
		cdims[i] = C.cuuint64_t(dims[i])
		cbox[i] = C.cuuint32_t(box[i])
	}
	for i, s := range strides {
		cstrides[i] = C.cuuint64_t(s)
	}

	// CUtensorMap is 64-byte aligned in C; Go does not promise that for a
	// Go variable, so the driver writes into C memory.
	m := (*C.CUtensorMap)(C.aligned_alloc(64, C.size_t(unsafe.Sizeof(C.CUtensorMap{}))))
	if m == nil {
		return fail("allocating the descriptor", kernels.ErrOutOfMemory)
	}
	defer C.free(unsafe.Pointer(m))
	swz := C.int(0)
	if swizzle128 {
		swz = 1
	}
	r := C.zbEncodeTiled(m, cdt, C.cuuint32_t(rank), C.cuuint64_t(base), &cdims[0], &cstrides[0], &cbox[0], swz)
	if err := result(r, "cuTensorMapEncodeTiled"); err != nil {
		return fail("rejected by the driver", err)
	}
	copy(tm[:], unsafe.Slice((*byte)(unsafe.Pointer(m)), min(len(tm), int(unsafe.Sizeof(*m)))))
	return tm, nil
}
