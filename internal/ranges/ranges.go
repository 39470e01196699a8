// Package ranges runs a loop over [0, n) in contiguous ranges on the
// processors, for work on the host that is not a kernel's (generating,
// converting and copying a model's weights).
package ranges

import (
	"runtime"
	"sync"
)

// Parallel calls f over [0, n) in contiguous ranges, one per processor
// (GOMAXPROCS) and each of at least least indices, in parallel, and
// returns when all have returned; where n holds fewer than two such
// ranges, it calls f(0, n) on the calling goroutine.
func Parallel(n, least int, f func(lo, hi int)) {
	parts := min(runtime.GOMAXPROCS(0), n/max(least, 1))
	if parts <= 1 {
		f(0, n)
		return
	}
	var wg sync.WaitGroup
	for p := range parts {
		wg.Go(func() { f(n*p/parts, n*(p+1)/parts) })
	}
	wg.Wait()
}
