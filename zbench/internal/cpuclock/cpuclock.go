// Package cpuclock measures the clock a CPU core runs at, which a virtual
// machine's kernel does not report and a bare-metal one reports as a
// ceiling that a core may pass: a chain of dependent integer additions
// retires one addition per cycle on every x86 core, so additions per
// second are cycles per second.
package cpuclock

import "time"

// chainAdds is how many dependent additions one iteration of addChain runs.
const chainAdds = 32

// GHz returns the fastest clock seen over a few short runs of the addition
// chain (the fastest, since a run the scheduler interrupts or a core still
// ramping up reads low), and false where the chain is not available on this
// architecture.
func GHz() (float64, bool) {
	if !haveChain {
		return 0, false
	}
	const iters = 1 << 16 // 2M cycles: about half a millisecond
	best := 0.0
	for range 40 {
		start := time.Now()
		addChain(iters)
		if sec := time.Since(start).Seconds(); sec > 0 {
			best = max(best, iters*chainAdds/sec/1e9)
		}
	}
	return best, best > 0
}
