//go:build !linux

package hugemem

// Map maps memory of its own on Linux only; elsewhere it reports false and
// the caller uses Go memory.
func Map(int64) ([]byte, bool) { return nil, false }

// Unmap has nothing to unmap where Map maps nothing.
func Unmap([]byte) {}
