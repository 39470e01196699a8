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

	"github.com/zbench/zbench/internal/hugemem"
)

// block is the unit the read kernel sums: a multiple of its unrolled loop.
const block = 256

// Probe holds two buffers of together at least sixteen times the cache,
// kept for the process so that the bandwidth can be measured again beside
// each benchmark that streams from memory, in passes long enough to be
// streams of their own (milliseconds), not bursts. They are on huge pages
// where the system has them, as the CPU backend's large tensors are. A
// probe is not for concurrent use.
type Probe struct {
	src, dst []byte
	next     int // where Pass's next window starts in each buffer
}

// New allocates and fills a probe's buffers for a cache of the given size
// (bufferSize each).
func New(cache int64) *Probe {
	n := bufferSize(cache)
	p := &Probe{src: buffer(n), dst: buffer(n)}
	for i := range p.src {
		p.src[i] = byte(i)
	}
	copy(p.dst, p.src)
	return p
}

// bufferSize is the size of each of a probe's two buffers for a cache of
// the given size: together sixteen times it, at least 256 MiB and at most
// 1 GiB, a whole number of the read kernel's blocks a goroutine.
func bufferSize(cache int64) int64 {
	n := min(max(16*cache, 256<<20), 1<<30) / 2
	return n - n%(block*64)
}

// buffer returns n bytes for a probe, a mapping on huge pages where the
// system gives one, else Go memory.
func buffer(n int64) []byte {
	if b, ok := hugemem.Map(n); ok {
		return b
	}
	return make([]byte, n)
}

// Copy returns the best rate, in bytes/s, of three copies from one buffer
// to the other split over GOMAXPROCS goroutines, counting the bytes read
// and those written.
func (p *Probe) Copy() float64 { return p.best(false) }

// Read returns the best rate, in bytes/s, of three passes that read both
// buffers once, split over GOMAXPROCS goroutines, summing them as 64-bit
// words so that no load can be dropped.
func (p *Probe) Read() float64 { return p.best(true) }

// best returns the best rate of three whole passes of the copy, or of the
// read-only sum when read is set.
func (p *Probe) best(read bool) float64 {
	rate := 0.0
	for range 3 {
		bytes, d := p.Pass(read, len(p.src))
		rate = max(rate, float64(bytes)/d.Seconds())
	}
	return rate
}

// Pass runs one pass of the copy (the read-only sum when read is set) over
// a window of n bytes of each buffer (all of them at most), the windows
// following each other round the buffers from call to call, split over
// GOMAXPROCS goroutines in contiguous ranges. It returns the bytes moved,
// twice the window, and the time the pass took from the moment all its
// goroutines run: a goroutine that waits for a processor (one that another
// goroutine holds, spinning for its next job) does not count against the
// memory.
func (p *Probe) Pass(read bool, n int) (int, time.Duration) {
	workers := runtime.GOMAXPROCS(0)
	n = min(max(n, block), len(p.src))
	n -= n % block
	if p.next+n > len(p.src) {
		p.next = 0
	}
	lo := p.next
	p.next += n
	chunk := (n/workers + block - 1) / block * block
	var sink atomic.Uint64
	pass := func(a, b int) {
		if read {
			sink.Add(Sum(p.src[a:b]) + Sum(p.dst[a:b]))
		} else {
			copy(p.dst[a:b], p.src[a:b])
		}
	}
	// The calling goroutine takes the first range, each other one a
	// goroutine; all wait at a barrier until every one of them runs.
	var ready atomic.Int32
	spawned := int32(0)
	var start atomic.Bool
	var wg sync.WaitGroup
	for a := lo + chunk; a < lo+n; a += chunk {
		b := min(a+chunk, lo+n)
		spawned++
		wg.Go(func() {
			ready.Add(1)
			for !start.Load() {
			}
			pass(a, b)
		})
	}
	for ready.Load() < spawned {
	}
	t0 := time.Now()
	start.Store(true)
	pass(lo, min(lo+chunk, lo+n))
	wg.Wait()
	d := time.Since(t0)
	runtime.KeepAlive(sink.Load())
	return 2 * n, d
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
