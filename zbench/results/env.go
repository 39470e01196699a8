package results

import (
	"slices"
	"strings"
)

// HardwareKeys are the configuration keys that describe the machine a
// result was measured on: CPU or GPU model, core counts, clocks and memory.
// Two files whose values of one of these differ ran on different hardware,
// and a speed difference between them is not the code's.
var HardwareKeys = []string{
	"cpu", "cpu-model", "cpu-cores", "gomaxprocs", "goarch", "cpu-peak-gflops",
	"cpu-peak-gflops-bf16", "cpu-peak-gflops-int8",
	"gpu", "cuda-cc", "gpu-sms", "gpu-mem-bytes", "gpu-sm-clock-mhz", "gpu-l2-bytes",
}

// runKeys are configuration keys that differ between any two runs by
// design (the code's commit, the package, a bandwidth measured in each run)
// and say nothing about whether two environments match.
var runKeys = []string{"zbench-commit", "pkg", "cpu-bandwidth-gbps", "cpu-peak-source"}

// A Setting is one configuration key whose values differ between two files.
type Setting struct {
	Key string `json:"key"`
	// Base and Other are the key's values in the two files, several
	// joined by " | " when a file of appended runs has more than one.
	Base  string `json:"base"`
	Other string `json:"other"`
	// Hardware is true for one of HardwareKeys.
	Hardware bool `json:"hardware"`
}

// Config returns the values of every configuration key over the file's
// benchmarks: distinct, in order of first appearance.
func (f *File) Config() map[string][]string {
	conf := map[string][]string{}
	for _, b := range f.Benchmarks {
		for k, v := range b.Config {
			if !slices.Contains(conf[k], v) {
				conf[k] = append(conf[k], v)
			}
		}
	}
	return conf
}

// DiffConfig returns the configuration keys that both files set to
// different values, hardware keys first, then the others (BLAS or engine,
// Go, driver, ...) by name. Keys only one file sets (a peer prints
// impl:, Go benchmarks print go:) and keys that differ between any two runs
// (the commit) are not differences of environment and are left out.
//
// Go's cpu: line is the CPUID brand string; zbench's benchmarks add a
// cpu-model: line, the OS's model name, which is what the peer's cpu: line
// holds, and which some virtual machines set apart from the brand string.
// Where both files have a cpu-model: line, both lines are compared, so
// that a different processor shows in either. Where only one has, its
// cpu-model: value stands for its cpu: value, so that zbench and the peer
// on such a virtual machine are not called different hardware.
func DiffConfig(base, other *File) []Setting {
	bc, oc := base.Config(), other.Config()
	if _, ok := bc["cpu-model"]; !ok {
		oc = osCPU(oc)
	} else if _, ok := oc["cpu-model"]; !ok {
		bc = osCPU(bc)
	}
	var diffs []Setting
	for k, bv := range bc {
		ov, ok := oc[k]
		if !ok || slices.Contains(runKeys, k) || sameValues(bv, ov) {
			continue
		}
		diffs = append(diffs, Setting{Key: k, Base: strings.Join(bv, " | "), Other: strings.Join(ov, " | "),
			Hardware: slices.Contains(HardwareKeys, k)})
	}
	slices.SortFunc(diffs, func(a, b Setting) int {
		if a.Hardware != b.Hardware {
			if a.Hardware {
				return -1
			}
			return 1
		}
		if a.Hardware {
			return slices.Index(HardwareKeys, a.Key) - slices.Index(HardwareKeys, b.Key)
		}
		return strings.Compare(a.Key, b.Key)
	})
	return diffs
}

// osCPU replaces conf's cpu values by its cpu-model values, if any.
func osCPU(conf map[string][]string) map[string][]string {
	if m, ok := conf["cpu-model"]; ok {
		conf["cpu"] = m
		delete(conf, "cpu-model")
	}
	return conf
}

// CrossHardware reports whether any of diffs is a hardware difference.
func CrossHardware(diffs []Setting) bool {
	return slices.ContainsFunc(diffs, func(s Setting) bool { return s.Hardware })
}

// sameValues reports whether two files' values of a key are the same set.
func sameValues(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for _, v := range a {
		if !slices.Contains(b, v) {
			return false
		}
	}
	return true
}
