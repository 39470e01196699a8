package zbench

import (
	"os/exec"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestOfflineDeps: the harness and the offline analysis (reading,
// comparing, reporting, calibrating results) link no compute backend, so
// analysing text files needs neither BLAS nor CUDA; backends are
// registered by the programs that run them.
func TestOfflineDeps(t *testing.T) {
	pkgs := []string{".", "./roofline", "./results", "./compare", "./report", "./calibrate", "./runner"}
	for _, tags := range []string{"", "cuda", "openblas"} {
		t.Run("tags="+tags, func(t *testing.T) {
			out, err := exec.Command("go", append([]string{"list", "-deps", "-tags=" + tags}, pkgs...)...).CombinedOutput()
			require.NoError(t, err, "%s", out)
			deps := strings.Fields(string(out))
			require.Contains(t, deps, "github.com/zbench/zbench/kernels", "go list -deps lists the dependencies")
			for _, backend := range []string{"github.com/zbench/zbench/kernels/cpu", "github.com/zbench/zbench/kernels/cuda", "github.com/mumax/3/cuda/cu", "runtime/cgo"} {
				assert.NotContains(t, deps, backend)
			}
		})
	}
}

// TestAnalysisDeps: the offline analysis does not link the harness, which
// imports testing: it reads the peak table from package roofline and
// applies the bounds the benchmarks wrote into their results.
func TestAnalysisDeps(t *testing.T) {
	for _, pkg := range []string{"./roofline", "./compare", "./report", "./calibrate"} {
		t.Run(pkg, func(t *testing.T) {
			out, err := exec.Command("go", "list", "-deps", pkg).CombinedOutput()
			require.NoError(t, err, "%s", out)
			deps := strings.Fields(string(out))
			require.Contains(t, deps, "github.com/zbench/zbench/kernels", "go list -deps lists the dependencies")
			for _, banned := range []string{"testing", "github.com/zbench/zbench/zbench"} {
				assert.NotContains(t, deps, banned)
			}
		})
	}
}
