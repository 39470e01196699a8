package zbench

import (
	"errors"
	"fmt"
	"math"
	"os"
	"testing"
	"time"

	"github.com/zbench/zbench/kernels"
	"github.com/zbench/zbench/zbench/roofline"
)

// Bench is one benchmarked operation on a device.
type Bench struct {
	Dev  kernels.Backend
	Work Workload
	// Op queues one operation. It may return before the device finishes;
	// Measure synchronises after each call.
	Op func() error
	// Verify, optional, runs once after the warm-up call, outside the timer,
	// and returns the relative error of the result against a reference. It
	// is reported as rel-err; NaN or an error fails the benchmark.
	Verify func() (float64, error)
	// MaxRelErr, if positive, fails the benchmark when Verify's error is
	// larger: the speed of a wrong answer is not reported. It is reported
	// beside rel-err as rel-err-bound, the bound zbench compare's accuracy
	// gate applies to the result.
	MaxRelErr float64
	// NoRoofline says why an operation has no Workload (a memory pool's
	// bookkeeping moves no data and does no arithmetic). Measure refuses a
	// zero Work without it, since the roofline guard cannot check a result
	// that declares no work.
	NoRoofline string
	// Cold, on a device that implements kernels.CacheFlusher, evicts its
	// caches before every timed call (outside the wall timer and before
	// the device timer's start mark): the cache=cold of kernel benchmarks.
	Cold bool
}

// ProfileEnv is the environment variable that, set to a non-empty value,
// makes Measure mark its timed loop as the profiled region on devices that
// implement kernels.Profiled: Nsight Compute started with
// --profile-from-start off then records the timed calls' kernels alone,
// not those of set-up, warm-up and Verify.
const ProfileEnv = "ZBENCH_PROFILE_TIMED"

// Measure runs bm under b: one warm-up call outside the timer, Verify,
// then the timed loop with the device synchronised in every iteration, so
// that ns/op is what a caller waits. It reports GFLOP/s, GB/s, the item
// rate, rel-err and rel-err-bound, peak-B (the pool's high-water mark over
// the timed calls, live inputs and workspaces included), %peak, on GPUs
// gpu-ns/op from device timers, and for a CPU operation bound by memory
// beyond the cache the bandwidth of a stream run between its iterations
// (bw-GB/s of copies, or rd-GB/s of a read-only stream for a ReadOnly
// workload) and its share of that (%bw);
// and it fails the benchmark when the result is above the device's
// roofline.
func Measure(b *testing.B, bm Bench) {
	b.Helper()
	if err := bm.check(); err != nil {
		b.Fatal(err)
	}
	dev := bm.Dev
	peak, err := PeakOf(dev)
	if err != nil {
		b.Fatal(err)
	}
	if err := bm.Op(); err != nil {
		b.Fatalf("warm-up: %v", err)
	}
	if err := dev.Sync(); err != nil {
		b.Fatalf("warm-up sync: %v", err)
	}
	relErr := math.NaN()
	if bm.Verify != nil {
		if relErr, err = bm.Verify(); err != nil {
			b.Fatalf("verify: %v", err)
		}
		if relErr != relErr {
			b.Fatal("verify: relative error is NaN: the result holds NaN or Inf")
		}
		if bm.MaxRelErr > 0 && relErr > bm.MaxRelErr {
			b.Fatalf("verify: rel-err %.3g exceeds %.3g: not timing a wrong result", relErr, bm.MaxRelErr)
		}
	}

	// peak-B is the timed calls' high-water mark: what Verify allocated
	// for its reference and has freed is not the operation's.
	dev.ResetPeak()
	var timer kernels.Timer
	if dev.Info().Kind == kernels.GPU {
		if timer, err = dev.NewTimer(); err != nil {
			b.Fatal(err)
		}
		defer timer.Close()
	}
	var flusher kernels.CacheFlusher
	if bm.Cold {
		if flusher, err = kernels.Group[kernels.CacheFlusher](dev); err != nil {
			b.Fatalf("cache=cold: %v", err)
		}
	}
	// A CPU operation streaming more than the cache from memory is also
	// reported against the bandwidth of a stream measured between its
	// iterations, outside the timer (interleaved): on a shared machine the
	// bandwidth of the run's start, or of the moments before and after its
	// loop, may not be the bandwidth while it runs. Each pass moves about
	// as many bytes as one call of the operation: at least twice the cache,
	// at most the probe's buffers.
	adjacent := dev.Info().Kind == kernels.CPU && peak.MemoryBound(bm.Work) && bm.Work.Bytes > float64(peak.CacheBytes)
	bwUnit := "bw-GB/s"
	if bm.Work.ReadOnly {
		bwUnit = "rd-GB/s"
	}
	window := int(max(bm.Work.Bytes/2, float64(peak.CacheBytes)))
	var probed int
	var probeTime time.Duration
	var devTime time.Duration
	if p, ok := dev.(kernels.Profiled); ok && os.Getenv(ProfileEnv) != "" {
		if err := p.ProfileStart(); err != nil {
			b.Fatal(err)
		}
		defer func() {
			if err := p.ProfileStop(); err != nil {
				b.Error(err)
			}
		}()
	}
	for b.Loop() {
		if flusher != nil || adjacent {
			b.StopTimer()
			if flusher != nil {
				if err := flusher.FlushCache(); err != nil {
					b.Fatal(err)
				}
				if err := dev.Sync(); err != nil {
					b.Fatal(err)
				}
			}
			if adjacent {
				n, d := cpuProbe.Pass(bm.Work.ReadOnly, window)
				probed, probeTime = probed+n, probeTime+d
			}
			b.StartTimer()
		}
		if timer != nil {
			if err := timer.Start(); err != nil {
				b.Fatal(err)
			}
		}
		if err := bm.Op(); err != nil {
			b.Fatal(err)
		}
		if timer != nil {
			if err := timer.Stop(); err != nil {
				b.Fatal(err)
			}
		}
		if err := dev.Sync(); err != nil {
			b.Fatal(err)
		}
		if timer != nil { // the stop mark has passed: this read does not wait
			d, err := timer.Elapsed()
			if err != nil {
				b.Fatal(err)
			}
			devTime += d
		}
	}

	perOp := b.Elapsed() / time.Duration(b.N)
	if timer != nil {
		gpuPerOp := devTime / time.Duration(b.N)
		b.ReportMetric(float64(gpuPerOp.Nanoseconds()), "gpu-ns/op")
		perOp = min(perOp, gpuPerOp) // the kinder time is the one to guard
	}
	if err := peak.Check(bm.Work, perOp); err != nil {
		b.Fatal(err)
	}
	report(b, bm.Work, perOp, peak)
	if adjacent {
		bw := float64(probed) / probeTime.Seconds()
		b.ReportMetric(bw/1e9, bwUnit)
		b.ReportMetric(100*bm.Work.Bytes/perOp.Seconds()/bw, "%bw")
	}
	if bm.Verify != nil {
		b.ReportMetric(relErr, "rel-err")
		if bm.MaxRelErr > 0 {
			b.ReportMetric(bm.MaxRelErr, "rel-err-bound")
		}
	}
	b.ReportMetric(float64(dev.MemStats().PeakBytes), "peak-B")
}

// check returns what makes bm unmeasurable, or nil.
func (bm Bench) check() error {
	switch {
	case bm.Dev == nil:
		return errors.New("zbench.Measure: Bench.Dev is nil: set it to one of zbench.Devices() (and import the backend, e.g. _ \"github.com/zbench/zbench/kernels/cpu\")")
	case bm.Op == nil:
		return errors.New("zbench.Measure: Bench.Op is nil: nothing to time")
	case bm.Work.FLOPs < 0 || bm.Work.Bytes < 0 || bm.Work.Items < 0:
		return fmt.Errorf("zbench.Measure: Bench.Work has a negative count (%+v)", bm.Work)
	case bm.Work.FLOPs == 0 && bm.Work.Bytes == 0 && bm.NoRoofline == "":
		return errors.New("zbench.Measure: Bench.Work declares no FLOPs and no bytes, so the roofline guard cannot check the result: declare the operation's work, or set Bench.NoRoofline to say why it has none")
	case bm.Work.Items > 0 && bm.Work.ItemUnit == "":
		return errors.New("zbench.Measure: Bench.Work.Items is set without an ItemUnit (seq/s, img/s, tok/s)")
	}
	return nil
}

// report emits the throughput metrics of w done in perOp.
func report(b *testing.B, w Workload, perOp time.Duration, peak roofline.Peak) {
	sec := perOp.Seconds()
	if w.FLOPs > 0 {
		b.ReportMetric(w.FLOPs/sec/1e9, "GFLOP/s")
	}
	if w.Bytes > 0 {
		b.ReportMetric(w.Bytes/sec/1e9, "GB/s")
	}
	if w.Items > 0 && w.ItemUnit != "" {
		b.ReportMetric(w.Items/sec, w.ItemUnit)
	}
	if f := peak.Fraction(w, perOp); f > 0 {
		b.ReportMetric(100*f, "%peak")
	}
}
