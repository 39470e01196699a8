package cpu

import (
	"runtime"
	"sync"
	"sync/atomic"
	"time"
)

// grain is the least work, in elements, worth a goroutine of its own.
const grain = 1 << 14

// parallelFor splits [0, n) into contiguous chunks over GOMAXPROCS
// goroutines and calls f(lo, hi) for each; cost is the work per index in
// elements, so that small jobs stay on one goroutine. The chunks run on the
// process's team (see team): the calling goroutine and GOMAXPROCS−1
// persistent workers, chunk p taken first by the one running on a
// processor whose number is p modulo the chunks, so that each call over
// the same data gives each chunk to the same processor. A call that finds the team busy (a
// nested call, or another goroutine's) runs its chunks on goroutines of
// their own.
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
	chunk := (n + workers - 1) / workers
	parts := (n + chunk - 1) / chunk
	part := func(p int) { f(p*chunk, min((p+1)*chunk, n)) }
	if t := theTeam(); t != nil && t.mu.TryLock() {
		t.run(parts, part)
		t.mu.Unlock()
		return
	}
	var wg sync.WaitGroup
	for p := range parts {
		wg.Go(func() { part(p) })
	}
	wg.Wait()
}

// teamSpin is how long a worker, and a caller waiting for the workers,
// polls for the next job (or the job's end) before it sleeps: a model's
// ops follow each other within microseconds, and waking a sleeping thread
// costs tens of them (30–40 µs on this repository's virtual machine), as
// OpenMP's workers spin between parallel regions for the same reason. It is
// longer than one streaming op's run-to-run spread: at 50 µs, ReLU over
// [1024, 3072] (about 130 µs) found its worker asleep in 5% of 4000 calls
// and left the caller asleep on the last chunk in 6% (each then paying a
// wake-up), at 400 µs in under 0.1% of them.
const teamSpin = 400 * time.Microsecond

// team runs the chunks of parallelFor's loops on the calling goroutine and
// size−1 persistent workers (size being GOMAXPROCS when it was made). A
// chunk is claimed first by the participant running on the processor of
// the chunk's number (cpuID): a loop over the same data splits it the same
// way every time, so each processor finds its chunk in its own caches, as
// OpenMP's threads, which stay on their processors, do. Goroutines move
// between threads and threads between processors, so parallelFor's
// goroutines of old ran each chunk on whichever processor came first, and
// a streaming op over data that fits the caches only in halves read it
// from memory: ReLU over BERT-base's [1024, 3072] FFN activations took
// 245 µs on two cores against 165 µs for OpenMP.
type team struct {
	size     int
	mu       sync.Mutex              // one loop at a time
	job      atomic.Pointer[teamJob] // the latest loop
	sleepers atomic.Int32            // workers asleep on wake
	wake     chan struct{}
}

// teamJob is one loop: its parts, which participants claim, and what is
// left of them.
type teamJob struct {
	part    func(p int)
	claimed []atomic.Bool
	left    atomic.Int32
	done    chan struct{} // closed when left reaches 0
}

var (
	teamOnce sync.Once
	teamOf   *team
)

// theTeam returns the process's team, made on first use with GOMAXPROCS
// participants, or nil where GOMAXPROCS has changed since (the loops then
// run on goroutines of their own).
func theTeam() *team {
	teamOnce.Do(func() {
		n := runtime.GOMAXPROCS(0)
		teamOf = &team{size: n, wake: make(chan struct{}, n)}
		for range n - 1 {
			go teamOf.worker()
		}
	})
	if teamOf.size != runtime.GOMAXPROCS(0) {
		return nil
	}
	return teamOf
}

// run runs part(p) for p < parts (at most t.size) on the team and returns
// when all have returned.
func (t *team) run(parts int, part func(p int)) {
	j := &teamJob{part: part, claimed: make([]atomic.Bool, parts), done: make(chan struct{})}
	j.left.Store(int32(parts))
	t.job.Store(j)
	for n := t.sleepers.Load(); n > 0; n-- {
		select {
		case t.wake <- struct{}{}:
		default:
		}
	}
	j.work()
	for start := time.Now(); j.left.Load() > 0; {
		if time.Since(start) > teamSpin {
			<-j.done
			return
		}
		runtime.Gosched()
	}
}

// worker runs the team's jobs as they come, polling for teamSpin after
// each before it sleeps.
func (t *team) worker() {
	var last *teamJob
	for {
		start := time.Now()
		for t.job.Load() == last {
			if time.Since(start) < teamSpin {
				runtime.Gosched()
				continue
			}
			t.sleepers.Add(1)
			if t.job.Load() == last { // else a job came after the check
				<-t.wake
			}
			t.sleepers.Add(-1)
			start = time.Now()
		}
		last = t.job.Load()
		last.work()
	}
}

// work claims and runs j's parts until none is left unclaimed: first the
// part of the processor it runs on, then any other.
func (j *teamJob) work() {
	n := len(j.claimed)
	first := 0
	if c := cpuID(); c >= 0 {
		first = c % n
	}
	for k := range n {
		p := (first + k) % n
		if j.claimed[p].Load() || !j.claimed[p].CompareAndSwap(false, true) {
			continue
		}
		j.part(p)
		if j.left.Add(-1) == 0 {
			close(j.done)
		}
	}
}
