package zbench

import (
	"fmt"
	"io"
	"os"
	"os/exec"
	"runtime"
	"strings"

	"github.com/zbench/zbench/kernels"
)

// Units are the benchfmt unit lines for the metrics zbench reports: which
// direction is better and, for metrics that do not vary between runs of
// the same code, that they are exact.
var Units = []string{
	"Unit GFLOP/s better=higher",
	"Unit GB/s better=higher",
	"Unit img/s better=higher",
	"Unit tok/s better=higher",
	"Unit seq/s better=higher",
	"Unit %peak better=higher",
	"Unit %bw better=higher",
	"Unit bw-GB/s assume=nothing",
	"Unit rd-GB/s assume=nothing",
	"Unit req/s better=higher",
	"Unit ttft-ms better=lower",
	"Unit ttft-p99-ms better=lower",
	"Unit tpot-ms better=lower",
	"Unit tpot-p99-ms better=lower",
	"Unit gpu-ns/op better=lower",
	"Unit rel-err better=lower assume=exact",
	"Unit rel-err-bound assume=exact",
	"Unit peak-B better=lower assume=exact",
	"Unit allocs better=lower assume=exact",
	"Unit hits better=higher assume=exact",
	"Unit returns better=higher assume=exact",
	"Unit hit-rate better=higher assume=exact",
}

// Config returns the benchfmt configuration lines ("key: value") that
// describe this run's environment: the code's commit, the Go version and,
// per device, what changes a result (BLAS library, peaks; GPU name, driver
// and compute capability).
func Config(devs []kernels.Backend) ([]string, error) {
	lines := []string{
		"zbench-commit: " + Commit(),
		"go: " + runtime.Version(),
		fmt.Sprintf("gomaxprocs: %d", runtime.GOMAXPROCS(0)),
		fmt.Sprintf("cpu-cores: %d", runtime.NumCPU()),
	}
	for _, d := range devs {
		info := d.Info()
		peak, err := PeakOf(d)
		if err != nil {
			return nil, err
		}
		switch info.Kind {
		case kernels.CPU:
			lines = append(lines,
				// The OS's model name, which scripts/machine-id.sh makes the
				// baseline folder from; Go's own "cpu:" line is the CPUID
				// brand string, which some virtual machines set apart.
				"cpu-model: "+info.Name,
				"blas: "+info.BLAS)
			if info.Driver != "" { // the BLAS's description of itself (OpenBLAS's build and kernels)
				lines = append(lines, "blas-config: "+info.Driver)
			}
			lines = append(lines,
				fmt.Sprintf("cpu-peak-gflops: %.0f", peak.FLOPSFor(kernels.F32)/1e9))
			for _, dt := range []kernels.DType{kernels.BF16, kernels.I8} {
				if f, ok := peak.FLOPS[dt]; ok { // the CPU multiplies dt faster than float32
					lines = append(lines, fmt.Sprintf("cpu-peak-gflops-%v: %.0f", dt, f/1e9))
				}
			}
			lines = append(lines,
				fmt.Sprintf("cpu-peak-source: %s", peak.Source),
				fmt.Sprintf("cpu-bandwidth-gbps: %.1f", peak.Bandwidth/1e9),
				fmt.Sprintf("cpu-read-bandwidth-gbps: %.1f", peak.ReadBandwidth/1e9))
		case kernels.GPU:
			lines = append(lines,
				"gpu: "+info.Name,
				"gpu-driver: "+info.Driver,
				"cuda-cc: "+info.Arch,
				fmt.Sprintf("gpu-sms: %d", info.Cores),
				fmt.Sprintf("gpu-mem-bytes: %d", info.Memory),
				fmt.Sprintf("gpu-sm-clock-mhz: %d", info.ClockMHz),
				fmt.Sprintf("gpu-l2-bytes: %d", info.L2Bytes))
			if info.Attention != "" {
				lines = append(lines, "gpu-attention: flash-"+info.Attention)
			}
		}
	}
	return lines, nil
}

// PrintEnv writes the configuration and unit lines once, before results.
func PrintEnv(w io.Writer, devs []kernels.Backend) error {
	lines, err := Config(devs)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintln(w, strings.Join(append(lines, Units...), "\n"))
	return err
}

// buildCommit is the commit a binary was built from, set by the linker
// (-X github.com/zbench/zbench/zbench.buildCommit=…) where the binary runs
// away from its checkout: make gpu-bin's binaries on a GPU host.
var buildCommit string

// Commit identifies the code under test: $ZBENCH_COMMIT if set, else the
// commit the binary was built from where make gpu-bin recorded it, else the
// git revision of the working directory (with "-dirty" when it has
// uncommitted changes), else "unknown".
func Commit() string {
	if c := os.Getenv("ZBENCH_COMMIT"); c != "" {
		return c
	}
	if buildCommit != "" {
		return buildCommit
	}
	out, err := exec.Command("git", "rev-parse", "--short=12", "HEAD").Output()
	if err != nil {
		return "unknown"
	}
	rev := strings.TrimSpace(string(out))
	if st, err := exec.Command("git", "status", "--porcelain", "--untracked-files=no").Output(); err == nil && len(st) > 0 {
		rev += "-dirty"
	}
	return rev
}
