package main

import (
	"bytes"
	"debug/elf"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// nativeLibs matches the base names of the libraries the offline commands
// must neither load nor look for: the CPU engines' BLAS and CUDA's.
var nativeLibs = regexp.MustCompile(`^lib(dnnl|openblas|blas|mkl|cuda|cublas)`)

// loaderLine is a line of glibc's LD_DEBUG=libs trace that names a library
// the process looked for (find library=NAME, dlopen included) or loaded
// (calling init: PATH).
var loaderLine = regexp.MustCompile(`(?:find library=|calling init: )(\S+)`)

// traceLine matches every line of the trace: the process id, then a colon.
var traceLine = regexp.MustCompile(`^\s*\d+:`)

// TestOfflineLoadsNoLibrary builds the zbench binary and runs compare,
// report, diff and calibrate with glibc's loader tracing the libraries it
// loads (LD_DEBUG=libs), under every value of ZBENCH_CPU_ENGINE: none
// loads or looks for a BLAS or CUDA library, since none opens a backend.
// zbench env, which opens the CPU backend, is the control: with oneDNN
// forced, the trace names libdnnl.
func TestOfflineLoadsNoLibrary(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the zbench binary")
	}
	if _, err := exec.LookPath("go"); err != nil {
		t.Skip("needs the go command")
	}
	dir := t.TempDir()
	bin := filepath.Join(dir, "zbench")
	out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput()
	require.NoError(t, err, "go build: %s", out)

	f, err := elf.Open(bin)
	require.NoError(t, err)
	needed, err := f.ImportedLibraries()
	require.NoError(t, err)
	interp := f.Section(".interp") != nil
	require.NoError(t, f.Close())
	for _, lib := range needed {
		assert.NotRegexp(t, nativeLibs, lib, "the binary links %s", lib)
	}
	if !interp {
		t.Skip("the binary is static (built without cgo): it loads no library, and there is no loader to trace")
	}
	if libs, _, _ := traceLibs(t, bin, "", "help"); len(libs) == 0 {
		t.Skip("LD_DEBUG=libs traced nothing: the dynamic loader is not glibc's")
	}

	testdata := filepath.Join("testdata", "compare")
	a, b := filepath.Join(testdata, "aa-1.txt"), filepath.Join(testdata, "aa-2.txt")
	for _, engine := range []string{"", "auto", "purego", "openblas", "onednn", "no-such-engine"} {
		for _, args := range [][]string{
			{"compare", a, b},
			{"report", "-o", filepath.Join(dir, "report-"+engine), a, b},
			{"diff", "-h"},
			{"calibrate", "-h"},
		} {
			t.Run("engine="+engine+"/"+args[0], func(t *testing.T) {
				libs, stdout, err := traceLibs(t, bin, engine, args...)
				require.NoError(t, err)
				assert.NotEmpty(t, stdout)
				assert.Contains(t, libs, "libc.so.6", "the trace lists what the process loads")
				for _, lib := range libs {
					assert.NotRegexp(t, nativeLibs, lib, "zbench %s loads or looks for %s", args[0], lib)
				}
			})
		}
	}

	t.Run("control/env", func(t *testing.T) {
		libs, _, err := traceLibs(t, bin, "onednn", "env")
		if os.Getenv("ZBENCH_REQUIRE_ENGINES") != "" {
			require.NoError(t, err, "oneDNN is installed")
		}
		assert.True(t, slices.ContainsFunc(libs, func(lib string) bool { return strings.HasPrefix(lib, "libdnnl") }),
			"zbench env with oneDNN forced loads or looks for libdnnl: %q", libs)
	})
}

// traceLibs runs bin with args under LD_DEBUG=libs and ZBENCH_CPU_ENGINE
// set to engine, and returns the base names of the libraries the trace
// shows it looking for or loading, its stdout, and its error (with its
// stderr less the trace).
func traceLibs(t *testing.T, bin, engine string, args ...string) ([]string, string, error) {
	t.Helper()
	cmd := exec.Command(bin, args...)
	cmd.Env = slices.DeleteFunc(os.Environ(), func(kv string) bool {
		return strings.HasPrefix(kv, "LD_DEBUG") || strings.HasPrefix(kv, "ZBENCH_CPU_ENGINE=")
	})
	cmd.Env = append(cmd.Env, "LD_DEBUG=libs", "ZBENCH_CPU_ENGINE="+engine)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	var libs, rest []string
	for line := range strings.Lines(stderr.String()) {
		switch m := loaderLine.FindStringSubmatch(line); {
		case m != nil:
			libs = append(libs, filepath.Base(m[1]))
		case !traceLine.MatchString(line):
			rest = append(rest, line)
		}
	}
	if err != nil {
		err = fmt.Errorf("zbench %s: %w: %s", strings.Join(args, " "), err, strings.Join(rest, ""))
	}
	slices.Sort(libs)
	return slices.Compact(libs), stdout.String(), err
}
