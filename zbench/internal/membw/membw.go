// Package membw measures a machine's main-memory bandwidth with the two
// streams a roofline needs: a copy, which reads and writes, and a read-only
// sum, the pattern of a decode step streaming its weights.
package membw

import (
	"encoding/binary"
	"runtime"
	"sync"
	"sync/atomic"
	"time"
)

// block is the unit the read kernel sums: a multiple of its unrolled loop.
const block = 256

// Probe holds two buffers of together at least twice the cache, kept for
// the process so that the bandwidth can be measured again beside each
// benchmark that streams from memory.
type Probe struct{ src, dst []byte }

// New allocates and fills a probe's buffers for a cache of the given size:
// together twice it, at least 64 MiB and at most 512 MiB.
func New(cache int64) *Probe {
	n := min(max(2*cache, 64<<20), 512<<20) / 2
	n -= n % (block * 64)
	p := &Probe{src: make([]byte, n), dst: make([]byte, n)}
	for i := range p.src {
		p.src[i] = byte(i)
	}
	copy(p.dst, p.src)
	return p
}

// Copy returns the best rate, in bytes/s, of three copies from one buffer
// to the other split over GOMAXPROCS goroutines, counting the bytes read
// and those written.
func (p *Probe) Copy() float64 {
	return p.best(func(lo, hi int) { copy(p.dst[lo:hi], p.src[lo:hi]) })
}

// Read returns the best rate, in bytes/s, of three passes that read both
// buffers once, split over GOMAXPROCS goroutines, summing them as 64-bit
// words so that no load can be dropped.
func (p *Probe) Read() float64 {
	var sink atomic.Uint64
	rate := p.best(func(lo, hi int) { sink.Add(Sum(p.src[lo:hi]) + Sum(p.dst[lo:hi])) })
	runtime.KeepAlive(sink.Load())
	return rate
}

// best runs f over GOMAXPROCS contiguous ranges of a buffer's length three
// times and returns the best rate of moving both buffers' bytes.
func (p *Probe) best(f func(lo, hi int)) float64 {
	n, workers := len(p.src), runtime.GOMAXPROCS(0)
	bytes := 2 * n
	chunk := (n/workers + block - 1) / block * block
	rate := 0.0
	for range 3 {
		start := time.Now()
		var wg sync.WaitGroup
		for lo := 0; lo < n; lo += chunk {
			hi := min(lo+chunk, n)
			wg.Go(func() { f(lo, hi) })
		}
		wg.Wait()
		rate = max(rate, float64(bytes)/time.Since(start).Seconds())
	}
	return rate
}

// Sum returns the sum of p's little-endian 64-bit words (a trailing part
// word is ignored): the read kernel, in vector assembly where there is one.
func Sum(p []byte) uint64 {
	n := len(p) - len(p)%block
	var s uint64
	if n > 0 && haveAsm {
		s = sumAsm(&p[0], n)
	} else {
		n = 0
	}
	for i := n; i+8 <= len(p); i += 8 {
		s += binary.LittleEndian.Uint64(p[i:])
	}
	return s
}
