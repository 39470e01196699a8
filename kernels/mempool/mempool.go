// Package mempool is the caching allocator shared by zbench's backends:
// requests are rounded up to size classes, freed blocks are kept per class
// and handed out again (those of a class left idle released, where the
// pool is told to), and every step is counted so that benchmarks can
// report allocations, cache hits and peak bytes.
//
// The pool is generic over the block handle (host bytes, a device pointer)
// and knows the device only through the two functions it is given.
package mempool

import (
	"fmt"
	"math/bits"
	"sync"
	"time"

	"github.com/zbench/zbench/kernels"
)

// MinClass is the smallest size class in bytes; smaller requests share it.
const MinClass = 512

// Class returns the size class of a request of n bytes: n rounded up to a
// multiple of MinClass below 1 MiB and otherwise to one of four steps per
// power of two, so that no class wastes more than a quarter of its size.
func Class(n int64) int64 {
	if n <= MinClass {
		return MinClass
	}
	if n <= 1<<20 {
		return (n + MinClass - 1) / MinClass * MinClass
	}
	p := int64(1) << (63 - bits.LeadingZeros64(uint64(n-1))) // largest power of two < n
	step := p / 4
	return (n + step - 1) / step * step
}

// Pool caches blocks of type H by size class.
type Pool[H any] struct {
	alloc   func(size int64) (H, error)
	release func(H)
	limit   int64 // 0: no limit on live+cached bytes

	mu    sync.Mutex
	free  map[int64][]H
	stats kernels.MemStats

	// idle, when positive, is how long a class's cached blocks stay
	// unused before a Put releases them; used is each class's last Get or
	// Put, swept the last sweep; now is the clock.
	idle  time.Duration
	used  map[int64]time.Time
	swept time.Time
	now   func() time.Time
}

// New returns a pool over alloc and release. limit, if positive, bounds the
// bytes held (live and cached); a request past it first trims the cache and
// then fails with an error wrapping kernels.ErrOutOfMemory.
func New[H any](alloc func(size int64) (H, error), release func(H), limit int64) *Pool[H] {
	return &Pool[H]{alloc: alloc, release: release, limit: limit, free: map[int64][]H{}}
}

// ReleaseIdle makes the pool release the cached blocks of a size class
// that no Get or Put has used for d, so that a workload whose sizes keep
// changing (a server's steps) does not keep a block of every size it ever
// used; a loop that uses its sizes again within d keeps them all. Classes
// are looked at as blocks are returned, at most every d/4. d ≤ 0 (the
// default) keeps every cached block until Trim.
func (p *Pool[H]) ReleaseIdle(d time.Duration) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.idle = d
	if p.used == nil {
		p.used = map[int64]time.Time{}
	}
	if p.now == nil {
		p.now = time.Now
	}
}

// touch records a use of class c, where idle classes are released.
func (p *Pool[H]) touch(c int64) {
	if p.idle > 0 {
		p.used[c] = p.now()
	}
}

// releaseIdleLocked releases the cached blocks of the classes unused for
// p.idle, when the last look is p.idle/4 old.
func (p *Pool[H]) releaseIdleLocked() {
	now := p.now()
	if now.Sub(p.swept) < p.idle/4 {
		return
	}
	p.swept = now
	for c, l := range p.free {
		if now.Sub(p.used[c]) < p.idle {
			continue
		}
		for _, h := range l {
			p.release(h)
		}
		p.stats.CachedBytes -= c * int64(len(l))
		delete(p.free, c)
		delete(p.used, c)
	}
}

// Get returns a block of at least n bytes and its class.
func (p *Pool[H]) Get(n int64) (H, int64, error) {
	c := Class(n)
	p.mu.Lock()
	defer p.mu.Unlock()
	p.touch(c)
	if l := p.free[c]; len(l) > 0 {
		h := l[len(l)-1]
		p.free[c] = l[:len(l)-1]
		p.stats.Hits++
		p.stats.CachedBytes -= c
		p.took(c)
		return h, c, nil
	}
	if p.limit > 0 && p.stats.CurrentBytes+p.stats.CachedBytes+c > p.limit {
		p.trimLocked()
		if p.stats.CurrentBytes+c > p.limit {
			var zero H
			return zero, 0, fmt.Errorf("mempool: request of %d bytes (class %d) with %d in use and a limit of %d: %w",
				n, c, p.stats.CurrentBytes, p.limit, kernels.ErrOutOfMemory)
		}
	}
	h, err := p.alloc(c)
	if err != nil {
		// The device may be full of our own cache: give it back and retry once.
		p.trimLocked()
		if h, err = p.alloc(c); err != nil {
			var zero H
			return zero, 0, fmt.Errorf("mempool: request of %d bytes (class %d) with %d in use: %w", n, c, p.stats.CurrentBytes, err)
		}
	}
	p.took(c)
	return h, c, nil
}

func (p *Pool[H]) took(c int64) {
	p.stats.Allocs++
	p.stats.CurrentBytes += c
	if p.stats.CurrentBytes > p.stats.PeakBytes {
		p.stats.PeakBytes = p.stats.CurrentBytes
	}
}

// Put returns a block of class c, as given by Get, to the cache.
func (p *Pool[H]) Put(h H, c int64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.free[c] = append(p.free[c], h)
	p.stats.Returns++
	p.stats.CurrentBytes -= c
	p.stats.CachedBytes += c
	if p.idle > 0 {
		p.used[c] = p.now()
		p.releaseIdleLocked()
	}
}

// Stats returns the counters.
func (p *Pool[H]) Stats() kernels.MemStats {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.stats
}

// ResetPeak sets the peak to the bytes now in use.
func (p *Pool[H]) ResetPeak() {
	p.mu.Lock()
	p.stats.PeakBytes = p.stats.CurrentBytes
	p.mu.Unlock()
}

// Trim releases every cached block.
func (p *Pool[H]) Trim() {
	p.mu.Lock()
	p.trimLocked()
	p.mu.Unlock()
}

func (p *Pool[H]) trimLocked() {
	for c, l := range p.free {
		for _, h := range l {
			p.release(h)
		}
		delete(p.free, c)
	}
	p.stats.CachedBytes = 0
}
