// Package baselines_test checks the committed baselines: every folder is
// named for the machine its files were measured on (scripts/machine-id.sh),
// so that results are never compared with another machine's by accident.
package baselines_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/zbench/zbench/zbench/results"
)

// machineID runs scripts/machine-id.sh on cpuinfo text with nproc cores.
func machineID(t *testing.T, cpuinfo string, nproc int) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "cpuinfo")
	require.NoError(t, os.WriteFile(path, []byte(cpuinfo), 0o644))
	cmd := exec.Command("../scripts/machine-id.sh")
	cmd.Env = append(os.Environ(), "ZBENCH_CPUINFO="+path, "ZBENCH_NPROC="+strconv.Itoa(nproc))
	out, err := cmd.Output()
	require.NoError(t, err)
	return strings.TrimSpace(string(out))
}

func TestMachineID(t *testing.T) {
	for _, tc := range []struct {
		name, cpuinfo string
		nproc         int
		want          string
	}{
		{"virtual Xeon with AMX",
			"vendor_id\t: GenuineIntel\ncpu family\t: 6\nmodel name\t: Intel(R) Xeon(R) Processor\nflags\t\t: fpu avx2 avx512f amx_bf16\n",
			2, "cpu-intel-xeon-f6-2core-amx"},
		{"EPYC without AVX-512",
			"vendor_id\t: AuthenticAMD\ncpu family\t: 25\nmodel name\t: AMD EPYC\nflags\t\t: fpu avx2\n",
			2, "cpu-amd-epyc-f25-2core-avx2"},
		{"EPYC with AVX-512, another family",
			"vendor_id\t: AuthenticAMD\ncpu family\t: 26\nmodel name\t: AMD EPYC 9654 96-Core Processor\nflags\t\t: fpu avx2 avx512f\n",
			4, "cpu-amd-epyc-9654-f26-4core-avx512"},
		{"clock and trademarks left out",
			"vendor_id\t: GenuineIntel\ncpu family\t: 6\nmodel name\t: Intel(R) Core(TM) i7-8700 CPU @ 3.20GHz\nflags\t\t: avx2\n",
			12, "cpu-intel-core-i7-8700-f6-12core-avx2"},
		{"vendor added to a model name without it",
			"vendor_id\t: GenuineIntel\ncpu family\t: 6\nmodel name\t: Common KVM processor\nflags\t\t: avx2\n",
			8, "cpu-intel-common-kvm-f6-8core-avx2"},
		{"arm64",
			"processor\t: 0\nFeatures\t: fp asimd\nCPU implementer\t: 0x41\nCPU part\t: 0xd40\n",
			8, "cpu-0x41-f0xd40-8core-neon"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, machineID(t, tc.cpuinfo, tc.nproc))
		})
	}
	// The CPUs of the issue that shared one folder no longer do.
	xeon := "vendor_id\t: GenuineIntel\ncpu family\t: 6\nmodel name\t: Intel(R) Xeon(R) Processor\nflags\t\t: avx2 avx512f\n"
	epyc := "vendor_id\t: AuthenticAMD\ncpu family\t: 25\nmodel name\t: AMD EPYC\nflags\t\t: avx2 avx512f\n"
	assert.NotEqual(t, machineID(t, xeon, 2), machineID(t, epyc, 2))
}

// TestFolders: the CPU model and core count in every committed CPU
// baseline's configuration lines are the ones its folder is named for.
func TestFolders(t *testing.T) {
	files, err := filepath.Glob("cpu-*/*.txt")
	require.NoError(t, err)
	require.NotEmpty(t, files)
	for _, path := range files {
		t.Run(path, func(t *testing.T) {
			f, err := results.Read(path)
			require.NoError(t, err)
			conf := f.Config()
			if conf["loadgen-url"] != nil {
				// zbench load's results describe a server, whose machine
				// the folder names in NOTES.md: they carry the run's
				// configuration instead of a host's.
				for _, key := range []string{"loadgen-model", "loadgen-api", "loadgen-dataset", "loadgen-seed"} {
					assert.Len(t, conf[key], 1, "%s: %s", path, key)
				}
				return
			}
			// The model part of the id, from the OS's model name, which
			// scripts/machine-id.sh names the folder from: zbench's
			// cpu-model: line, or the cpu: line where there is none (the
			// peer's, and older files). Go's own cpu: line is the CPUID
			// brand string, which some virtual machines set apart.
			cpu := conf["cpu-model"]
			if cpu == nil {
				cpu = conf["cpu"]
			}
			require.Len(t, cpu, 1, "%s: one cpu-model: or cpu: line value", path)
			folder := filepath.Base(filepath.Dir(path))
			id := machineID(t, "model name\t: "+cpu[0]+"\n", 1)
			model := strings.TrimSuffix(id, "-f0-1core-generic")
			assert.True(t, strings.HasPrefix(folder, model+"-f"), "%s: cpu %q belongs in %s-f…, not %s", path, cpu[0], model, folder)
			for _, procs := range conf["gomaxprocs"] {
				assert.Contains(t, folder, "-"+procs+"core-", "%s: gomaxprocs %s", path, procs)
			}
			for _, b := range f.Benchmarks {
				if b.Procs != 0 {
					require.Contains(t, folder, "-"+strconv.Itoa(b.Procs)+"core-", "%s: %s", path, b.ID())
				}
			}
		})
	}
}

// TestGPUFolders: every committed GPU baseline's gpu: line names the GPU
// its folder is named for, as scripts/gpu-session.sh names it (gpu- and
// nvidia-smi's name in lower case, spaces as dashes, nothing else but
// letters and digits).
func TestGPUFolders(t *testing.T) {
	files, err := filepath.Glob("gpu-*/*.txt")
	require.NoError(t, err)
	for _, path := range files {
		t.Run(path, func(t *testing.T) {
			f, err := results.Read(path)
			require.NoError(t, err)
			gpu := f.Config()["gpu"]
			require.Len(t, gpu, 1, "%s: one gpu: line value", path)
			slug := strings.Map(func(r rune) rune {
				switch {
				case r == ' ':
					return '-'
				case r >= 'a' && r <= 'z', r >= '0' && r <= '9', r == '-':
					return r
				}
				return -1
			}, strings.ToLower(gpu[0]))
			assert.Equal(t, "gpu-"+slug, filepath.Base(filepath.Dir(path)), "%s: gpu %q", path, gpu[0])
		})
	}
}
