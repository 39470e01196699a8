package cpu

import (
	"runtime"
	"unsafe"

	"github.com/zbench/zbench/internal/hugemem"
)

// hugeMin is the size from which a tensor's memory is a mapping of its own
// advised as transparent huge pages (hugemem.Map), where the system has
// them (Linux with transparent_hugepage "madvise" or "always").
const hugeMin = hugemem.Page

// hostBuf is a block of the backend's memory pool: Go memory, or a
// mapping (hugemem.Map) that is unmapped when the pool trims it or, if a
// tensor holding it is dropped without Free, when it becomes unreachable.
type hostBuf struct {
	buf     []byte
	mapped  bool
	cleanup runtime.Cleanup
}

// newHostBuf returns n bytes, 8-byte aligned so that they can be viewed as
// float32 or int32.
func newHostBuf(n int64) (*hostBuf, error) {
	if n >= hugeMin {
		if b, ok := hugemem.Map(n); ok {
			h := &hostBuf{buf: b, mapped: true}
			h.cleanup = runtime.AddCleanup(h, hugemem.Unmap, b)
			return h, nil
		}
	}
	words := make([]uint64, (n+7)/8)
	return &hostBuf{buf: unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(words))), n)}, nil
}

// release gives a mapping back to the system; Go memory is left to the
// garbage collector.
func (h *hostBuf) release() {
	if h.mapped {
		h.cleanup.Stop()
		hugemem.Unmap(h.buf)
		h.buf, h.mapped = nil, false
	}
}
