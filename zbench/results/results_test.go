package results

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const sample = `goos: linux
blas: gonum
cpu-peak-gflops: 499
Unit GFLOP/s better=higher
Unit rel-err better=lower assume=exact
BenchmarkMatMul/dev=cpu/dtype=f32/m=256-2   	 100	   2000 ns/op	  16.7 GFLOP/s	 2e-07 rel-err
BenchmarkMatMul/dev=cpu/dtype=f32/m=256-2   	 100	   2100 ns/op	  15.9 GFLOP/s	 2e-07 rel-err
--- BENCH: BenchmarkMatMul
    matmul_test.go:10: a log line
blas: openblas
BenchmarkMatMul/dev=cpu/dtype=f32/m=256-4   	 100	   1000 ns/op	  33.4 GFLOP/s
BenchmarkKernels/op=relu/dev=cpu/dtype=f16/batch=8/seq=128/x	 10	 5 ns/op	 1 MB/s
BenchmarkBroken/dev=cpu 10 abc ns/op
PASS
ok  	github.com/zbench/zbench/bench_test	1.0s
`

func TestParse(t *testing.T) {
	f, err := Parse(strings.NewReader(sample), "sample.txt")
	require.NoError(t, err)
	require.Len(t, f.Benchmarks, 3)

	m := f.Lookup("MatMul/dev=cpu/dtype=f32/m=256-2")
	require.NotNil(t, m)
	assert.Equal(t, "MatMul/dev=cpu/dtype=f32/m=256", m.Name)
	assert.Equal(t, 2, m.Procs)
	assert.Equal(t, "MatMul", m.Workload)
	assert.Equal(t, []Key{{"dev", "cpu"}, {"dtype", "f32"}, {"m", "256"}}, m.Keys)
	assert.InDeltaSlice(t, []float64{2000e-9, 2100e-9}, m.Values["sec/op"], 1e-18, "ns/op tidied to sec/op")
	assert.Equal(t, []float64{16.7, 15.9}, m.Values["GFLOP/s"])
	assert.Equal(t, []string{"sec/op", "GFLOP/s", "rel-err"}, m.Units)
	assert.Equal(t, "gonum", m.Config["blas"])
	assert.Equal(t, "sample.txt:6", m.Pos)
	assert.Equal(t, "f32", m.Get("dtype"))
	assert.Equal(t, "", m.Get("batch"))
	assert.Equal(t, "m=256", m.Rest("dev", "dtype"))

	four := f.Lookup("MatMul/dev=cpu/dtype=f32/m=256-4")
	require.NotNil(t, four, "another GOMAXPROCS is another benchmark")
	assert.Equal(t, "openblas", four.Config["blas"], "config in effect at the result")

	k := f.Lookup("Kernels/op=relu/dev=cpu/dtype=f16/batch=8/seq=128/x")
	require.NotNil(t, k)
	assert.Equal(t, 0, k.Procs)
	assert.Equal(t, []float64{1e6}, k.Values["B/s"], "MB/s tidied to B/s")
	assert.Equal(t, "op=relu/batch=8/seq=128/x", k.Rest("dev", "dtype"), "positional parts kept")

	require.Len(t, f.Skipped, 1)
	assert.Contains(t, f.Skipped[0], "sample.txt:13")

	assert.Equal(t, 1, f.Better("GFLOP/s"))
	assert.Equal(t, -1, f.Better("rel-err"))
	assert.Equal(t, -1, f.Better("sec/op"))
	assert.Equal(t, 1, f.Better("tok/s"), "x/s defaults to higher")
	assert.Equal(t, 0, f.Better("widgets"))
}

func TestReadErrors(t *testing.T) {
	dir := t.TempDir()
	write := func(name, data string) string {
		p := filepath.Join(dir, name)
		require.NoError(t, os.WriteFile(p, []byte(data), 0o644))
		return p
	}
	for _, tc := range []struct {
		name, path, want string
		noResults        bool
	}{
		{"missing", filepath.Join(dir, "nope.txt"), "nope.txt: no such file or directory", false},
		{"empty", write("empty.txt", ""), "empty.txt: empty file: no benchmark results", true},
		{"blank", write("blank.txt", "\n \n"), "blank.txt: empty file", true},
		{"not benchmark output", write("readme.md", "# zbench\n\nsome text\n"), "readme.md: no benchmark results (not the output of go test -bench)", true},
		{"only malformed lines", write("bad.txt", "BenchmarkX 10 abc ns/op\n"), "bad.txt: no benchmark results, and 1 malformed benchmark lines (first: ", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Read(tc.path)
			require.ErrorContains(t, err, tc.want)
			assert.Equal(t, tc.noResults, errors.Is(err, ErrNoResults))
			assert.NotContains(t, err.Error(), "\n")
		})
	}
}

// TestReadBaselines reads every committed baseline.
func TestReadBaselines(t *testing.T) {
	paths, err := filepath.Glob("../../baselines/*/*.txt")
	require.NoError(t, err)
	require.NotEmpty(t, paths)
	for _, p := range paths {
		f, err := Read(p)
		require.NoError(t, err, p)
		assert.Empty(t, f.Skipped, p)
		load := f.Config()["loadgen-url"] != nil // zbench load's: a server's figures
		for _, b := range f.Benchmarks {
			if load {
				assert.NotEmpty(t, b.Values["req/s"], "%s: %s", p, b.ID())
				assert.NotEmpty(t, b.Values["pass"], "%s: %s", p, b.ID())
				continue
			}
			assert.NotEmpty(t, b.Values["sec/op"], "%s: %s", p, b.ID())
			assert.NotEmpty(t, b.Get("dev"), "%s: %s", p, b.ID())
		}
	}
}

// FuzzParse: any input gives results or an error, never a panic, and every
// benchmark read has values.
func FuzzParse(f *testing.F) {
	f.Add(sample)
	f.Add("")
	f.Add("BenchmarkA-2 1 1 ns/op\n")
	f.Add("Unit x better=higher\nBenchmarkA/b=c/d 1 1 x\n")
	f.Add("BenchmarkA-0 1 1 ns/op\nBenchmarkA--2 1 NaN ns/op\n")
	f.Fuzz(func(t *testing.T, data string) {
		file, err := Parse(strings.NewReader(data), "fuzz.txt")
		if err != nil {
			require.ErrorIs(t, err, ErrNoResults)
			return
		}
		require.NotEmpty(t, file.Benchmarks)
		for _, b := range file.Benchmarks {
			require.NotEmpty(t, b.Units)
			require.Same(t, b, file.Lookup(b.ID()))
		}
	})
}
