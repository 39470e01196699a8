package hugemem

import (
	"unsafe"

	"golang.org/x/sys/unix"
)

// Map maps n bytes, rounded up to whole pages of Page bytes, at a Page
// boundary and advises them as huge pages; it reports false where the
// mapping fails, and the caller uses Go memory instead. The pages are the
// kernel's zero pages until written, as Go's fresh memory is.
func Map(n int64) ([]byte, bool) {
	size := uintptr(n+Page-1) &^ (Page - 1)
	raw, err := unix.MmapPtr(-1, 0, nil, size+Page, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
	if err != nil {
		return nil, false
	}
	// Keep the aligned middle: unmap the head before the first Page
	// boundary and the tail after size bytes.
	head := (Page - uintptr(raw)%Page) % Page
	if head > 0 {
		_ = unix.MunmapPtr(raw, head)
	}
	aligned := unsafe.Add(raw, head)
	if tail := Page - head; tail > 0 {
		_ = unix.MunmapPtr(unsafe.Add(aligned, size), tail)
	}
	b := unsafe.Slice((*byte)(aligned), size)
	// Without transparent huge pages the advice fails and the mapping
	// keeps small pages, which is still correct.
	_ = unix.Madvise(b, unix.MADV_HUGEPAGE)
	return b[:n:size], true
}

// Unmap unmaps a mapping from Map.
func Unmap(b []byte) {
	_ = unix.MunmapPtr(unsafe.Pointer(unsafe.SliceData(b)), uintptr(cap(b)))
}
