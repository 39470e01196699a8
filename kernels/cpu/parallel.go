package cpu

import (
	"runtime"
	"sync"
)

// grain is the least work, in elements, worth a goroutine of its own.
const grain = 1 << 14

// parallelFor splits [0, n) into contiguous chunks over GOMAXPROCS
// goroutines and calls f(lo, hi) for each; cost is the work per index in
// elements, so that small jobs stay on one goroutine.
func parallelFor(n, cost int, f func(lo, hi int)) {
	workers := runtime.GOMAXPROCS(0)
	if max := n * cost / grain; max < workers {
		workers = max
	}
	if workers > n {
		workers = n
	}
	if workers <= 1 {
		f(0, n)
		return
	}
	var wg sync.WaitGroup
	chunk := (n + workers - 1) / workers
	for lo := 0; lo < n; lo += chunk {
		hi := min(lo+chunk, n)
		wg.Add(1)
		go func() {
			defer wg.Done()
			f(lo, hi)
		}()
	}
	wg.Wait()
}
