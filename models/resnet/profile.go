package resnet

import (
	"fmt"
	"slices"
	"time"
)

// OpTime is one op of a pass with its times in Forward.Profile.
type OpTime struct {
	Name  string        // the layer ("layer3.0.conv2") or op ("maxpool", "fc")
	Shape string        // its geometry ("3x3/1 256→256 14x14" for a convolution's input)
	FLOPs float64       // its arithmetic as Config.FLOPs counts it (0 for ops it leaves out)
	Time  time.Duration // the median over the rounds
	// Min is the fastest round: on a shared machine, the op's time with
	// the least interference from other processes.
	Min time.Duration
}

// GFLOPS is the op's arithmetic rate, 0 for an op without FLOPs.
func (o OpTime) GFLOPS() float64 {
	if o.Time <= 0 {
		return 0
	}
	return o.FLOPs / o.Time.Seconds() / 1e9
}

// Profile runs the whole pass rounds times, timing each op between device
// synchronisations, and returns every op in the pass's order with its
// median and least time over the rounds. The synchronisations make a queued device's
// pass slower than Run's; on the CPU, whose ops return when done, the sum
// of the ops is a pass.
func (f *Forward) Profile(rounds int) ([]OpTime, error) {
	if rounds < 1 {
		return nil, fmt.Errorf("resnet: profile of %d rounds, want at least 1", rounds)
	}
	be := f.m.be
	times := make([][]time.Duration, len(f.steps))
	for range rounds {
		if err := be.Sync(); err != nil {
			return nil, fmt.Errorf("resnet: profile: %w", err)
		}
		for i, st := range f.steps {
			start := time.Now()
			if err := st.op(); err != nil {
				return nil, f.opErr(i, err)
			}
			if err := be.Sync(); err != nil {
				return nil, f.opErr(i, err)
			}
			times[i] = append(times[i], time.Since(start))
		}
	}
	out := make([]OpTime, len(f.steps))
	for i, st := range f.steps {
		slices.Sort(times[i])
		out[i] = OpTime{Name: st.name, Shape: st.shape, FLOPs: st.flops, Time: times[i][len(times[i])/2], Min: times[i][0]}
	}
	return out, nil
}
