package ranges

import (
	"runtime"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestParallel(t *testing.T) {
	procs := runtime.GOMAXPROCS(0)
	for _, c := range []struct {
		name      string
		n, least  int
		wantParts int
	}{
		{"empty", 0, 4, 1},
		{"under two ranges", 7, 4, 1},
		{"one range", 4, 4, 1},
		{"a range a processor", 100 * procs, 10, procs},
		{"fewer ranges than processors", 25, 10, min(2, procs)},
		{"least 0 taken as 1", 3, 0, min(3, procs)},
	} {
		t.Run(c.name, func(t *testing.T) {
			var mu sync.Mutex
			seen := make([]int, c.n)
			parts := 0
			Parallel(c.n, c.least, func(lo, hi int) {
				mu.Lock()
				defer mu.Unlock()
				parts++
				for i := lo; i < hi; i++ {
					seen[i]++
				}
			})
			assert.Equal(t, c.wantParts, parts)
			for i, s := range seen {
				assert.Equal(t, 1, s, "index %d", i)
			}
		})
	}
}
