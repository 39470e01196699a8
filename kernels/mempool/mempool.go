// Package mempool is the caching allocator shared by zbench's backends:
// requests are rounded up to size classes, freed blocks are kept per class
// and handed out again, and every step is counted so that benchmarks can
// report allocations, cache hits and peak bytes.
//
// The pool is generic over the block handle (host bytes, a device pointer)
// and knows the device only through the two functions it is given.
package mempool

import (
	"fmt"
	"math/bits"
	"sync"

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
}

// New returns a pool over alloc and release. limit, if positive, bounds the
// bytes held (live and cached); a request past it first trims the cache and
// then fails with an error wrapping kernels.ErrOutOfMemory.
func New[H any](alloc func(size int64) (H, error), release func(H), limit int64) *Pool[H] {
	return &Pool[H]{alloc: alloc, release: release, limit: limit, free: map[int64][]H{}}
}

// Get returns a block of at least n bytes and its class.
func (p *Pool[H]) Get(n int64) (H, int64, error) {
	c := Class(n)
	p.mu.Lock()
	defer p.mu.Unlock()
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
