package zbench

import (
	"bufio"
	"fmt"
	"math"
	"os"
	"strconv"
	"strings"
	"sync"

	"golang.org/x/sys/cpu"

	"github.com/zbench/zbench/kernels"
	"github.com/zbench/zbench/zbench/internal/cpuclock"
	"github.com/zbench/zbench/zbench/internal/membw"
	"github.com/zbench/zbench/zbench/roofline"
)

// Workload is the work one operation of a benchmark declares, which
// Measure turns into throughput metrics and checks against the device's
// peak; the offline analysis reads it from package roofline.
type Workload = roofline.Workload

// PeakOf returns the roofline of a backend's device: from the table of
// known GPUs, or for a CPU from its vector width, core count and clock, with
// the memory bandwidth measured once per process.
func PeakOf(b kernels.Backend) (roofline.Peak, error) {
	info := b.Info()
	if info.Kind == kernels.GPU {
		if p, ok := roofline.GPU(info.Name); ok {
			return p, nil
		}
		return roofline.Peak{}, fmt.Errorf("roofline: no peak table entry for GPU %q (known: T4, A100, H100, H200): add one to zbench/roofline/roofline.go", info.Name)
	}
	cpuPeakOnce.Do(func() { cpuPeak = measureCPUPeak(info) })
	return cpuPeak, nil
}

var (
	cpuPeakOnce sync.Once
	cpuPeak     roofline.Peak
	cpuProbe    *membw.Probe // measureCPUPeak's, for Measure's adjacent measurements
)

// measureCPUPeak derives the CPU's arithmetic peak from its widest FMA
// units and measures its memory bandwidth with a copy larger than the cache,
// and the rate of a stream that only reads.
func measureCPUPeak(info kernels.DeviceInfo) roofline.Peak {
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
	cpuProbe = membw.New(cache)
	bw := cpuProbe.Copy()
	return roofline.Peak{
		Device:         info.Name,
		FLOPS:          flops,
		Bandwidth:      bw,
		ReadBandwidth:  cpuProbe.Read(),
		BandwidthLimit: copyBandwidthLimit * bw,
		CacheBytes:     cache,
		Source: fmt.Sprintf("%d cores x %.2f GHz (%s) x %g f32 FLOP/cycle (%s); bandwidth measured by copy, results held to %gx it",
			info.Cores, ghz, clock, perCycle, isa, copyBandwidthLimit),
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

// copyBandwidthLimit is how far above the copy-measured bandwidth a CPU
// result may go before the roofline check calls it impossible: a copy
// counts two of the three transfers it makes (the destination is read
// before it is written), so a stream that only reads, as a decode step
// reads its weights, may run faster on some machines; and the copy is one
// sample of a machine that may be shared.
const copyBandwidthLimit = 2.0
