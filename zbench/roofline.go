package zbench

import (
	"bufio"
	"fmt"
	"math"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/cpu"

	"github.com/zbench/zbench/kernels"
	"github.com/zbench/zbench/zbench/internal/cpuclock"
)

// Workload declares the work one operation of a benchmark does: what the
// harness turns into throughput metrics and checks against the device's peak.
type Workload struct {
	// FLOPs is the arithmetic of one operation (a multiply-add counts 2).
	FLOPs float64
	// Bytes is the least traffic one operation needs between memory and
	// the processor: every input read once and every output written once.
	Bytes float64
	// DType is the type the arithmetic runs in; it selects the peak.
	DType kernels.DType
	// Items, with ItemUnit ("seq/s", "img/s", "tok/s"), reports a rate of
	// work items per second; zero reports none.
	Items    float64
	ItemUnit string
}

// Peak is what a device can do at best: the roofline.
type Peak struct {
	Device string
	// FLOPS is the peak arithmetic rate per compute dtype, in FLOP/s
	// (dense; tensor cores where the dtype uses them).
	FLOPS map[kernels.DType]float64
	// Bandwidth is the peak rate of main (device) memory in bytes/s.
	Bandwidth float64
	// CacheBytes is the largest cache: that much of a working set may be
	// served from it at rates above Bandwidth, so the bandwidth check only
	// applies to the traffic beyond it.
	CacheBytes int64
	// Source says where the numbers come from.
	Source string
}

// FLOPSFor returns the peak rate for dt, falling back to the F32 rate.
func (p Peak) FLOPSFor(dt kernels.DType) float64 {
	if f, ok := p.FLOPS[dt]; ok {
		return f
	}
	return p.FLOPS[kernels.F32]
}

// Check returns an error when w done in perOp would exceed the peak: a
// result no device can produce, and so a broken benchmark.
func (p Peak) Check(w Workload, perOp time.Duration) error {
	if perOp <= 0 {
		return fmt.Errorf("roofline: %v per operation on %s: the timer measured nothing (missing device sync, or the work was never queued)", perOp, p.Device)
	}
	sec := perOp.Seconds()
	if peak := p.FLOPSFor(w.DType); w.FLOPs > 0 && peak > 0 && w.FLOPs/sec > peak {
		return fmt.Errorf("roofline: %.4g GFLOP/s in %v exceeds the %s peak of %.4g GFLOP/s (%s) by %.1fx: "+
			"likely a missing device synchronisation (the timer stopped before the work finished), "+
			"work the compiler or backend eliminated, or a declared FLOP count larger than the work done",
			w.FLOPs/sec/1e9, w.DType, p.Device, peak/1e9, p.Source, w.FLOPs/sec/peak)
	}
	// At most the cache's worth of the working set can be served from the
	// cache; the rest must come from memory.
	if spill := w.Bytes - float64(p.CacheBytes); spill > 0 && p.Bandwidth > 0 && spill/sec > p.Bandwidth {
		return fmt.Errorf("roofline: %.4g GB/s exceeds the %s memory bandwidth of %.4g GB/s (%s) by %.1fx for the %.3g MB of a %.3g MB working set that its %d MB cache cannot hold: "+
			"likely a missing device synchronisation, cache reuse across iterations that a real run would not get, or a declared byte count larger than the data moved",
			spill/sec/1e9, p.Device, p.Bandwidth/1e9, p.Source, spill/sec/p.Bandwidth, spill/1e6, w.Bytes/1e6, p.CacheBytes>>20)
	}
	return nil
}

// Fraction is the share of the roofline that w in perOp reaches, between 0
// and 1: of the arithmetic peak when w is compute-bound (its arithmetic
// intensity above the ridge point) and of the bandwidth otherwise.
func (p Peak) Fraction(w Workload, perOp time.Duration) float64 {
	sec := perOp.Seconds()
	peak := p.FLOPSFor(w.DType)
	if w.Bytes == 0 || p.Bandwidth == 0 || (w.FLOPs > 0 && w.FLOPs/w.Bytes > peak/p.Bandwidth) {
		if peak == 0 || w.FLOPs == 0 {
			return 0
		}
		return w.FLOPs / sec / peak
	}
	return w.Bytes / sec / p.Bandwidth
}

// PeakOf returns the roofline of a backend's device: from the table of
// known GPUs, or for a CPU from its vector width, core count and clock, with
// the memory bandwidth measured once per process.
func PeakOf(b kernels.Backend) (Peak, error) {
	info := b.Info()
	if info.Kind == kernels.GPU {
		if p, ok := GPUPeak(info.Name); ok {
			return p, nil
		}
		return Peak{}, fmt.Errorf("roofline: no peak table entry for GPU %q (known: T4, A100, H100, H200): add one to zbench/roofline.go", info.Name)
	}
	cpuPeakOnce.Do(func() { cpuPeak = measureCPUPeak(info) })
	return cpuPeak, nil
}

// GPUPeak returns the vendor peak of the GPU with the given device name
// (as the driver and torch.cuda.get_device_name report it), and false for a
// GPU the table does not know.
func GPUPeak(name string) (Peak, bool) {
	for _, g := range gpuPeaks {
		if strings.Contains(name, g.match) {
			p := g.peak
			p.Device = name
			return p, true
		}
	}
	return Peak{}, false
}

var (
	cpuPeakOnce sync.Once
	cpuPeak     Peak
)

// measureCPUPeak derives the CPU's arithmetic peak from its widest FMA
// units and measures its memory bandwidth with a copy larger than the cache.
func measureCPUPeak(info kernels.DeviceInfo) Peak {
	perCycle, isa := cpuFLOPsPerCycle()
	ghz, clock := cpuGHz()
	perSec := float64(info.Cores) * ghz * 1e9
	flops := map[kernels.DType]float64{kernels.F32: perSec * perCycle}
	if cpu.X86.HasAVX512BF16 {
		// VDPBF16PS: two products per float32 lane, at the FMA's rate.
		flops[kernels.BF16] = 2 * perSec * perCycle
		isa += ", avx512-bf16 2x"
	}
	if cpu.X86.HasAVX512VNNI {
		// VPDPBUSD: four 8-bit products per 32-bit lane.
		flops[kernels.I8] = 4 * perSec * perCycle
		isa += ", avx512-vnni 4x"
	}
	if cpu.X86.HasAMXBF16 {
		// A peer's BF16 matmul may run on AMX tiles: 1024 FLOP per cycle
		// per core; INT8 at twice that.
		flops[kernels.BF16] = perSec * 1024
		isa += ", amx-bf16 1024 FLOP/cycle"
	}
	if cpu.X86.HasAMXInt8 {
		flops[kernels.I8] = perSec * 2048
	}
	cache := lastLevelCache()
	return Peak{
		Device:     info.Name,
		FLOPS:      flops,
		Bandwidth:  measureBandwidth(cache),
		CacheBytes: cache,
		Source: fmt.Sprintf("%d cores x %.2f GHz (%s) x %g f32 FLOP/cycle (%s); bandwidth measured by copy",
			info.Cores, ghz, clock, perCycle, isa),
	}
}

// cpuFLOPsPerCycle is the float32 FLOPs one core can retire per cycle:
// two FMA units of the widest vector ISA present.
func cpuFLOPsPerCycle() (float64, string) {
	switch {
	case cpu.X86.HasAVX512F:
		return 2 * 2 * 16, "avx512 2xFMA"
	case cpu.X86.HasAVX2 && cpu.X86.HasFMA:
		return 2 * 2 * 8, "avx2 2xFMA"
	case cpu.ARM64.HasASIMD:
		return 4 * 2 * 4, "neon 4xFMA"
	}
	return 2 * 4, "sse 2 units"
}

// cpuGHz is a clock no core is expected to exceed, and where it comes from:
// the maximum frequency the kernel reports, or, where it reports none (a
// virtual machine), twice the nominal clock of /proc/cpuinfo, or 4 GHz;
// raised, where a core runs faster still, to the clock cpuclock measures
// plus a tenth, rounded up to 0.1 GHz. A virtual machine's nominal clock
// is its base, and cores boost up to about twice their base (an EPYC 9005
// from 2.1 to 4.1 GHz, a Xeon 6 from 2.0 to 3.9); 1.5 times was not enough
// there. The ceiling is a configuration line that names the hardware, so
// it must not move between runs: the measurement only counts where it
// exceeds the other bound.
func cpuGHz() (float64, string) {
	ghz, source := 4.0, "assumed"
	if khz := cpufreqMaxKHz(); khz > 0 {
		ghz, source = khz/1e6, "cpufreq maximum"
	} else if nominal := nominalGHz(); nominal > 0 {
		ghz, source = 2*nominal, fmt.Sprintf("2x nominal %.2f GHz", nominal)
	}
	if measured, ok := cpuclock.GHz(); ok {
		if bound := math.Ceil(11*measured) / 10; bound > ghz {
			ghz, source = bound, fmt.Sprintf("measured %.2f GHz + 10%%", measured)
		}
	}
	return ghz, source
}

// cpufreqMaxKHz is the maximum frequency the kernel reports for cpu0, in
// kHz, or 0 where it reports none.
func cpufreqMaxKHz() float64 {
	b, err := os.ReadFile("/sys/devices/system/cpu/cpu0/cpufreq/cpuinfo_max_freq")
	if err != nil {
		return 0
	}
	khz, err := strconv.ParseFloat(strings.TrimSpace(string(b)), 64)
	if err != nil {
		return 0
	}
	return khz
}

// nominalGHz is the first "cpu MHz" of /proc/cpuinfo in GHz, or 0.
func nominalGHz() float64 {
	f, err := os.Open("/proc/cpuinfo")
	if err != nil {
		return 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if k, v, ok := strings.Cut(sc.Text(), ":"); ok && strings.TrimSpace(k) == "cpu MHz" {
			if mhz, err := strconv.ParseFloat(strings.TrimSpace(v), 64); err == nil && mhz > 0 {
				return mhz / 1e3
			}
		}
	}
	return 0
}

// lastLevelCache returns the size of the largest cache the kernel lists, or
// 64 MiB if it lists none.
func lastLevelCache() int64 {
	var largest int64
	for i := range 8 {
		b, err := os.ReadFile(fmt.Sprintf("/sys/devices/system/cpu/cpu0/cache/index%d/size", i))
		if err != nil {
			continue
		}
		s := strings.TrimSpace(string(b))
		mult := int64(1)
		switch {
		case strings.HasSuffix(s, "K"):
			mult, s = 1<<10, strings.TrimSuffix(s, "K")
		case strings.HasSuffix(s, "M"):
			mult, s = 1<<20, strings.TrimSuffix(s, "M")
		}
		if n, err := strconv.ParseInt(s, 10, 64); err == nil && n*mult > largest {
			largest = n * mult
		}
	}
	if largest == 0 {
		return 64 << 20
	}
	return largest
}

// measureBandwidth times copies between two buffers of together twice the
// cache (at least 64 MiB and at most 512 MiB) and returns the best rate,
// counting the bytes read and written.
func measureBandwidth(cache int64) float64 {
	n := min(max(2*cache, 64<<20), 512<<20) / 2
	src, dst := make([]byte, n), make([]byte, n)
	for i := range src {
		src[i] = byte(i)
	}
	workers := runtime.GOMAXPROCS(0)
	best := 0.0
	for range 3 {
		start := time.Now()
		var wg sync.WaitGroup
		chunk := (len(src) + workers - 1) / workers
		for lo := 0; lo < len(src); lo += chunk {
			hi := min(lo+chunk, len(src))
			wg.Go(func() { copy(dst[lo:hi], src[lo:hi]) })
		}
		wg.Wait()
		best = max(best, 2*float64(n)/time.Since(start).Seconds())
	}
	return best
}

// gpuPeaks are vendor dense peaks (no sparsity) of the GPUs zbench knows,
// matched by substring of the device name, most specific first.
var gpuPeaks = []struct {
	match string
	peak  Peak
}{
	{"H200", Peak{FLOPS: tensorPeaks(67e12, 494.7e12, 989.4e12, 1978.9e12), Bandwidth: 4.8e12, CacheBytes: 50 << 20, Source: "H200 SXM datasheet"}},
	{"H100 PCIe", Peak{FLOPS: tensorPeaks(51.2e12, 378e12, 756e12, 1513e12), Bandwidth: 2.0e12, CacheBytes: 50 << 20, Source: "H100 PCIe datasheet"}},
	{"H100", Peak{FLOPS: tensorPeaks(67e12, 494.7e12, 989.4e12, 1978.9e12), Bandwidth: 3.35e12, CacheBytes: 50 << 20, Source: "H100 SXM datasheet"}},
	{"A100", Peak{FLOPS: tensorPeaks(19.5e12, 156e12, 312e12, 624e12), Bandwidth: 2.039e12, CacheBytes: 40 << 20, Source: "A100 SXM 80GB datasheet"}},
	{"T4", Peak{FLOPS: tensorPeaks(8.1e12, 0, 65e12, 130e12), Bandwidth: 320e9, CacheBytes: 4 << 20, Source: "T4 datasheet"}},
}

// tensorPeaks fills the per-dtype table from the CUDA-core f32 rate and the
// tensor-core TF32, 16-bit and 8-bit rates. F32 takes the TF32 rate where
// there is one, since an f32 matmul may run on tensor cores in TF32 and the
// table is a ceiling; 8-bit floats run at the INT8 rate from Hopper on.
func tensorPeaks(f32, tf32, f16, i8 float64) map[kernels.DType]float64 {
	m := map[kernels.DType]float64{kernels.F32: max(f32, tf32), kernels.F16: f16, kernels.BF16: f16, kernels.I8: i8}
	if i8 >= 1.9e15 { // Hopper: FP8 at the INT8 rate
		m[kernels.E4M3], m[kernels.E5M2] = i8, i8
	}
	return m
}
