//go:build cuda

package cuda

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math"
	"unsafe"

	"github.com/mumax/3/cuda/cu"

	"github.com/zbench/zbench/kernels"
	"github.com/zbench/zbench/kernels/check"
)

// adamwChunk is the elements of a parameter one block of adamw_all takes
// at a time (ADAMW_CHUNK in optim.cu).
const adamwChunk = 4096

// adamwEntryBytes is the size of optim.cu's AdamWEntry.
const adamwEntryBytes = 64

// AdamWAll applies AdamW to every parameter of ps in one launch of
// adamw_all over a table of the parameters in device memory, copied there
// again only when it changes (a model's parameters stay where they are
// from one step to the next).
func (b *Backend) AdamWAll(ps []kernels.AdamWParam, p kernels.AdamWParams) error {
	if err := check.AdamWAll("cuda: AdamWAll", b, ps, p); err != nil {
		return err
	}
	if len(ps) == 0 {
		return nil
	}
	table, chunks := adamwTable(ps, p)
	if chunks == 0 {
		return nil
	}
	dev, err := b.adamw.get(int64(len(table)), b.memAlloc)
	if err != nil {
		return wrap("AdamWAll", err)
	}
	if !bytes.Equal(table, b.adamwLast) {
		if b.capturing {
			return fmt.Errorf("cuda: AdamWAll: the parameters changed during graph capture: %w", kernels.ErrValue)
		}
		if err := b.call("cuda: AdamWAll's table", func() {
			b.stream.Synchronize() // the last step's launch may still read the old table
			cu.MemcpyHtoD(cu.DevicePtr(dev), unsafe.Pointer(&table[0]), int64(len(table)))
		}); err != nil {
			return wrap("AdamWAll", err)
		}
		b.adamwLast = table
	}
	bc1, bc2 := p.BiasCorrections()
	c1, c2 := float32(1-float64(p.Beta1)), float32(1-float64(p.Beta2))
	stepSize, bc2Sqrt := float32(float64(p.LR)/bc1), float32(math.Sqrt(bc2))
	return wrap("AdamWAll", b.launch("adamw_all", dim3{x: int(min(chunks, int64(32*b.info.Cores)))}, dim3{x: block}, 0,
		dev, dev+devptr(len(ps)*adamwEntryBytes), int32(len(ps)), p.Beta1, c1, p.Beta2, c2, stepSize, bc2Sqrt, p.Eps))
}

// adamwTable returns adamw_all's table for ps, little-endian: an AdamWEntry
// of 64 bytes per parameter (its five addresses, its length, its decay
// factor, its gradient's and its copy's type codes), then the chunks
// before each parameter and their total (int64s); and that total.
func adamwTable(ps []kernels.AdamWParam, p kernels.AdamWParams) ([]byte, int64) {
	code := func(t *kernels.Tensor) int32 {
		switch {
		case t == nil:
			return 0
		case t.DType() == kernels.F16:
			return 1
		case t.DType() == kernels.BF16:
			return 2
		}
		return 0
	}
	decayed := float32(1 - float64(p.LR)*float64(p.WeightDecay))
	out := make([]byte, 0, len(ps)*adamwEntryBytes+(len(ps)+1)*8)
	first := make([]int64, 0, len(ps)+1)
	var chunks int64
	for _, x := range ps {
		decay := decayed
		if x.NoDecay {
			decay = 1
		}
		n := int64(x.Param.Len())
		for _, t := range []*kernels.Tensor{x.Param, x.Grad, x.M, x.V, x.Copy} {
			out = binary.LittleEndian.AppendUint64(out, uint64(ptrOf(t)))
		}
		out = binary.LittleEndian.AppendUint64(out, uint64(n))
		out = binary.LittleEndian.AppendUint32(out, math.Float32bits(decay))
		out = binary.LittleEndian.AppendUint32(out, uint32(code(x.Grad)))
		out = binary.LittleEndian.AppendUint32(out, uint32(code(x.Copy)))
		out = binary.LittleEndian.AppendUint32(out, 0)
		first = append(first, chunks)
		chunks += (n + adamwChunk - 1) / adamwChunk
	}
	for _, c := range append(first, chunks) {
		out = binary.LittleEndian.AppendUint64(out, uint64(c))
	}
	return out, chunks
}
