//go:build !linux

package cpu

// mapHuge maps memory of its own on Linux only; elsewhere tensors live in
// Go memory.
func mapHuge(int64) ([]byte, bool) { return nil, false }

// unmapHuge has nothing to unmap where mapHuge maps nothing.
func unmapHuge([]byte) {}
