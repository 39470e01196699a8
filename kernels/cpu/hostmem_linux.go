package cpu

import (
	"unsafe"

	"golang.org/x/sys/unix"
)

// mapHuge maps n bytes, rounded up to whole 2 MiB pages, at a 2 MiB
// boundary and advises them as huge pages; it reports false where the
// mapping fails, and the caller uses Go memory instead. The pages are the
// kernel's zero pages until written, as Go's fresh memory is.
func mapHuge(n int64) ([]byte, bool) {
	size := uintptr(n+hugeMin-1) &^ (hugeMin - 1)
	raw, err := unix.MmapPtr(-1, 0, nil, size+hugeMin, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
	if err != nil {
		return nil, false
	}
	// Keep the aligned middle: unmap the head before the first 2 MiB
	// boundary and the tail after size bytes.
	head := (hugeMin - uintptr(raw)%hugeMin) % hugeMin
	if head > 0 {
		_ = unix.MunmapPtr(raw, head)
	}
	aligned := unsafe.Add(raw, head)
	if tail := hugeMin - head; tail > 0 {
		_ = unix.MunmapPtr(unsafe.Add(aligned, size), tail)
	}
	b := unsafe.Slice((*byte)(aligned), size)
	// Without transparent huge pages the advice fails and the mapping
	// keeps small pages, which is still correct.
	_ = unix.Madvise(b, unix.MADV_HUGEPAGE)
	return b[:n:size], true
}

// unmapHuge unmaps a mapping from mapHuge.
func unmapHuge(b []byte) {
	_ = unix.MunmapPtr(unsafe.Pointer(unsafe.SliceData(b)), uintptr(cap(b)))
}
