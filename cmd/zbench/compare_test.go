package main

import (
	"bytes"
	"encoding/csv"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

var update = flag.Bool("update", false, "rewrite the golden files of testdata/compare")

// The A/A files are real output of the -short MatMul and Kernels
// benchmarks on the reference CPU machine: ten passes of one binary,
// alternating between the two files.
const (
	aa1 = "testdata/compare/aa-1.txt"
	aa2 = "testdata/compare/aa-2.txt"
)

// plant writes a copy of src to dir/name in which edit has changed the
// values of the results of the benchmark whose name starts with bench.
func plant(t *testing.T, src, name, bench string, edit func(unit string, v float64) float64) string {
	t.Helper()
	data, err := os.ReadFile(src)
	require.NoError(t, err)
	lines := strings.Split(string(data), "\n")
	n := 0
	for i, l := range lines {
		if !strings.HasPrefix(l, "Benchmark"+bench) {
			continue
		}
		f := strings.Fields(l)
		for j := 2; j+1 < len(f); j += 2 {
			v, err := strconv.ParseFloat(f[j], 64)
			require.NoError(t, err)
			f[j] = strconv.FormatFloat(edit(f[j+1], v), 'g', -1, 64)
		}
		lines[i] = strings.Join(f, "\t")
		n++
	}
	require.Positive(t, n, "no result of %s in %s", bench, src)
	return writeFile(t, t.TempDir(), name, []byte(strings.Join(lines, "\n")))
}

// withMetric writes a copy of src to dir/name in which every result of
// the benchmarks whose names start with bench also reports value unit.
func withMetric(t *testing.T, src, name, bench string, value float64, unit string) string {
	t.Helper()
	data, err := os.ReadFile(src)
	require.NoError(t, err)
	lines := strings.Split(string(data), "\n")
	for i, l := range lines {
		if strings.HasPrefix(l, "Benchmark"+bench) {
			lines[i] = l + "\t" + strconv.FormatFloat(value, 'g', -1, 64) + " " + unit
		}
	}
	return writeFile(t, t.TempDir(), name, []byte(strings.Join(lines, "\n")))
}

// slowDown makes a benchmark's results s times slower, every rate metric
// with it.
func slowDown(s float64) func(string, float64) float64 {
	return func(unit string, v float64) float64 {
		switch unit {
		case "ns/op", "gpu-ns/op":
			return v * s
		case "GFLOP/s", "GB/s", "%peak", "seq/s", "tok/s", "img/s":
			return v / s
		}
		return v
	}
}

// compareRecords runs compare -format json and returns its verdict per
// benchmark, with the error compare returned.
func compareRecords(t *testing.T, args ...string) (map[string]string, map[string][]string, error) {
	t.Helper()
	var stdout, stderr bytes.Buffer
	err := run(append([]string{"compare", "-format", "json"}, args...), &stdout, &stderr)
	var out struct {
		Records []struct {
			Benchmark string   `json:"benchmark"`
			Verdict   string   `json:"verdict"`
			Reasons   []string `json:"reasons"`
		} `json:"records"`
	}
	require.NoError(t, json.Unmarshal(stdout.Bytes(), &out), "stdout: %s", stdout.String())
	verdicts, reasons := map[string]string{}, map[string][]string{}
	for _, r := range out.Records {
		verdicts[r.Benchmark] = r.Verdict
		reasons[r.Benchmark] = r.Reasons
	}
	return verdicts, reasons, err
}

const planted = "MatMul/dev=cpu/dtype=f32/m=1024/n=1024/k=1024/transfer=resident-2"

func TestCompareVerdicts(t *testing.T) {
	slow := plant(t, aa2, "slower.txt", planted, slowDown(1.2))
	fast := plant(t, aa2, "faster.txt", planted, slowDown(1/1.2))
	// aa-1 and aa-2 were written before benchmarks reported their
	// bounds: relErrOld has none, relErr the bound of the f32 kernels.
	relErrOld := plant(t, aa2, "relerr-old.txt", "Kernels/op=gelu/", func(unit string, v float64) float64 {
		if unit == "rel-err" {
			return 3e-3
		}
		return v
	})
	relErr := withMetric(t, relErrOld, "relerr.txt", "Kernels/", 2e-5, "rel-err-bound")
	// An unsynchronised timer: 100 times faster than the machine can be.
	abovePeak := plant(t, aa2, "abovepeak.txt", "MatMul/dev=cpu/dtype=f32/m=256/n=256/k=256/transfer=resident", slowDown(0.01))
	for _, tc := range []struct {
		name    string
		args    []string
		want    map[string]string // benchmark → verdict; every other one is same
		reason  string            // in the reasons of the first of want
		failErr string            // the -fail-on error; "" for none
	}{
		{name: "A/A", args: []string{aa1, aa2, "-fail-on", "slower,faster,invalid,ambiguous"}},
		{name: "A/A reversed", args: []string{aa2, aa1, "-fail-on", "slower,faster,invalid,ambiguous"}},
		{name: "planted 20% slow-down", args: []string{aa1, slow, "-fail-on", "slower"},
			want: map[string]string{planted: "slower"}, failErr: "compare: -fail-on slower: 1 slower (" + planted + ")"},
		{name: "planted 20% speed-up", args: []string{aa1, fast, "-fail-on", "slower"},
			want: map[string]string{planted: "faster"}},
		{name: "planted rel-err rise", args: []string{aa1, relErr, "-fail-on", "slower"},
			want:   map[string]string{"Kernels/op=gelu/dev=cpu/dtype=f32/batch=1/seq=128-2": "invalid"},
			reason: "rel-err 0.003 (base 1e-07) is past the bound 2e-05 (the newer file's rel-err-bound)"},
		{name: "no bound in either file: not gated", args: []string{aa1, relErrOld, "-fail-on", "invalid"}},
		{name: "rel-err rise fails -fail-on invalid", args: []string{aa1, relErr, "-fail-on", "invalid"},
			want:    map[string]string{"Kernels/op=gelu/dev=cpu/dtype=f32/batch=1/seq=128-2": "invalid"},
			failErr: "compare: -fail-on invalid: 1 invalid (Kernels/op=gelu"},
		{name: "above peak", args: []string{aa1, abovePeak, "-fail-on", "slower"},
			want:   map[string]string{"MatMul/dev=cpu/dtype=f32/m=256/n=256/k=256/transfer=resident-2": "invalid"},
			reason: "% of the device's peak reported"},
		{name: "tolerance override", args: []string{aa1, relErr, "-tol", "f32=1e-2", "-fail-on", "invalid"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			verdicts, reasons, err := compareRecords(t, tc.args...)
			require.Len(t, verdicts, 8)
			for b, v := range verdicts {
				want, ok := tc.want[b]
				if !ok {
					want = "same"
				}
				assert.Equal(t, want, v, "%s: reasons %q", b, reasons[b])
			}
			for b := range tc.want {
				if tc.reason != "" {
					assert.Contains(t, strings.Join(reasons[b], "; "), tc.reason)
				}
			}
			if tc.failErr == "" {
				require.NoError(t, err)
				return
			}
			require.ErrorContains(t, err, tc.failErr)
			assert.Equal(t, 1, exitCode(err))
			assert.NotContains(t, err.Error(), "\n")
		})
	}
}

// TestCompareDerivedPeak: a peer's file has no %peak; it is derived from
// GFLOP/s and the peak in the file's config lines, and a rate above it is
// flagged.
func TestCompareDerivedPeak(t *testing.T) {
	noPeak := func(unit string, v float64) float64 {
		if unit == "GFLOP/s" {
			return v * 200 // 2.9% of peak becomes 580%
		}
		return v
	}
	p := plant(t, aa2, "peer.txt", "MatMul/dev=cpu/dtype=f32/m=256/n=256/k=256/transfer=roundtrip", noPeak)
	data, err := os.ReadFile(p)
	require.NoError(t, err)
	// Drop the %peak values so that it must be derived.
	var kept []string
	for _, l := range strings.Split(string(data), "\n") {
		if strings.HasPrefix(l, "Benchmark") {
			f := strings.Fields(l)
			var g []string
			for j := 0; j < len(f); j++ {
				if j+1 < len(f) && f[j+1] == "%peak" {
					j++
					continue
				}
				g = append(g, f[j])
			}
			l = strings.Join(g, "\t")
		}
		kept = append(kept, l)
	}
	require.NoError(t, os.WriteFile(p, []byte(strings.Join(kept, "\n")), 0o644))

	verdicts, reasons, err := compareRecords(t, aa1, p)
	require.NoError(t, err)
	id := "MatMul/dev=cpu/dtype=f32/m=256/n=256/k=256/transfer=roundtrip-2"
	assert.Equal(t, "invalid", verdicts[id])
	assert.Contains(t, strings.Join(reasons[id], ""), "GFLOP/s is above the CPU peak of 499 GFLOP/s (cpu-peak-gflops config line)")

	var stdout bytes.Buffer
	require.NoError(t, run([]string{"compare", aa1, p}, &stdout, &bytes.Buffer{}))
	assert.Contains(t, stdout.String(), "* ABOVE PEAK", "derived %peak is marked and flagged")
}

// TestCompareGolden checks the text and markdown forms byte for byte
// (go test -run TestCompareGolden -update rewrites them).
func TestCompareGolden(t *testing.T) {
	dir := t.TempDir()
	slow := plant(t, aa2, "slower.txt", planted, slowDown(1.2))
	// A benchmark only in the new file is listed as unmatched.
	extra, err := os.ReadFile(slow)
	require.NoError(t, err)
	extra = append(extra, []byte("\nBenchmarkMatMul/dev=cpu/dtype=f32/m=512/n=512/k=512/transfer=resident-2\t100\t16590000 ns/op\n")...)
	slowPath := writeFile(t, dir, "slower.txt", extra)

	for _, tc := range []struct {
		golden string
		args   []string
	}{
		{"aa.txt", []string{aa1, aa2}},
		{"slower.txt", []string{aa1, slowPath}},
		{"slower.md", []string{"-format", "markdown", aa1, slowPath}},
	} {
		t.Run(tc.golden, func(t *testing.T) {
			var stdout bytes.Buffer
			require.NoError(t, run(append([]string{"compare"}, tc.args...), &stdout, &bytes.Buffer{}))
			path := filepath.Join("testdata/compare", "golden-"+tc.golden)
			if *update {
				require.NoError(t, os.WriteFile(path, stdout.Bytes(), 0o644))
			}
			want, err := os.ReadFile(path)
			require.NoError(t, err)
			assert.Equal(t, string(want), stdout.String())
		})
	}
}

func TestCompareFormats(t *testing.T) {
	slow := plant(t, aa2, "slower.txt", planted, slowDown(1.2))
	var stdout bytes.Buffer
	require.NoError(t, run([]string{"compare", "-format", "csv", aa1, slow}, &stdout, &bytes.Buffer{}))
	recs, err := csv.NewReader(&stdout).ReadAll()
	require.NoError(t, err)
	require.Len(t, recs, 9, "header and one record per benchmark")
	col := map[string]int{}
	for i, h := range recs[0] {
		col[h] = i
	}
	for _, r := range recs[1:] {
		want := "same"
		if r[col["benchmark"]] == planted {
			want = "slower"
			change, err := strconv.ParseFloat(r[col["change"]], 64)
			require.NoError(t, err)
			assert.InDelta(t, 0.2, change, 0.08, "a 20% slow-down of one pass's samples, against the other pass's")
		}
		assert.Equal(t, want, r[col["verdict"]], r[col["benchmark"]])
	}

	stdout.Reset()
	require.NoError(t, run([]string{"compare", "-format", "markdown", aa1, slow}, &stdout, &bytes.Buffer{}))
	md := stdout.String()
	assert.Contains(t, md, "| benchmark | aa-1.txt | rel-err | %peak | slower.txt | Δ | p | verdict | rel-err | %peak |\n|---|--:|--:|--:|--:|--:|--:|---|")
	assert.Contains(t, md, "| **slower** |")
}

func TestCompareErrors(t *testing.T) {
	dir := t.TempDir()
	empty := writeFile(t, dir, "empty.txt", nil)
	notBench := writeFile(t, dir, "notes.txt", []byte("ok  \tgithub.com/zbench/zbench/kernels\t0.1s\nsome notes\n"))
	other := writeFile(t, dir, "other.txt", []byte("BenchmarkOther-2\t10\t100 ns/op\n"))
	for _, tc := range []struct {
		name  string
		args  []string
		want  string
		usage bool
	}{
		{name: "one file", args: []string{aa1}, want: "compare: need two or more files, OLD and NEW, got 1", usage: true},
		{name: "missing file", args: []string{aa1, filepath.Join(dir, "nope.txt")}, want: "nope.txt: no such file or directory"},
		{name: "empty file", args: []string{aa1, empty}, want: "empty.txt: empty file: no benchmark results"},
		{name: "not benchmark output", args: []string{notBench, aa1}, want: "notes.txt: no benchmark results (not the output of go test -bench)"},
		{name: "nothing in common", args: []string{aa1, other}, want: "no benchmark of testdata/compare/aa-1.txt has sec/op in testdata/compare/aa-1.txt and in another file"},
		{name: "bad format", args: []string{"-format", "xml", aa1, aa2}, want: `compare: -format: unknown format "xml" (want text, markdown, csv or json)`, usage: true},
		{name: "bad fail-on", args: []string{"-fail-on", "slow", aa1, aa2}, want: `unknown verdict "slow"`, usage: true},
		{name: "bad threshold", args: []string{"-threshold", "-3%", aa1, aa2}, want: `compare: invalid value "-3%" for flag -threshold: want a positive change such as 5% or 0.05`, usage: true},
		{name: "bare threshold", args: []string{"-threshold", "5", aa1, aa2}, want: `compare: invalid value "5" for flag -threshold: a bare 5 is ambiguous: write 5% or 0.05`, usage: true},
		{name: "huge threshold", args: []string{"-threshold", "1e9", aa1, aa2}, want: `invalid value "1e9" for flag -threshold: a bare 1e9 is ambiguous`, usage: true},
		{name: "huge threshold in percent", args: []string{"-threshold", "1e9%", aa1, aa2}, want: `invalid value "1e9%" for flag -threshold: want a change below 1000%`, usage: true},
		{name: "alpha 0", args: []string{"-alpha", "0", aa1, aa2}, want: "compare: -alpha 0: want a significance level between 0 and 1, exclusive", usage: true},
		{name: "alpha 1", args: []string{"-alpha", "1", aa1, aa2}, want: "compare: -alpha 1: want a significance level", usage: true},
		{name: "alpha 2", args: []string{"-alpha", "2", aa1, aa2}, want: "compare: -alpha 2: want a significance level", usage: true},
		{name: "alpha NaN", args: []string{"-alpha", "NaN", aa1, aa2}, want: "compare: -alpha NaN: want a significance level", usage: true},
		{name: "unknown tol dtype", args: []string{"-tol", "xx=1e-2", aa1, aa2}, want: `compare: -tol: unknown dtype "xx" (known: f32, tf32, f16, bf16, mixed, int8, e4m3, e5m2, fp8, w8a16, q8_0, w4a16, nf4)`, usage: true},
		{name: "bad tol", args: []string{"-tol", "f32", aa1, aa2}, want: `-tol: "f32" is not dtype=value`, usage: true},
		{name: "unknown metric direction", args: []string{"-metric", "peak-B/x", aa1, aa2}, want: "no Unit line says whether higher or lower peak-B/x is better"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := run(append([]string{"compare"}, tc.args...), &bytes.Buffer{}, &bytes.Buffer{})
			requireCLIError(t, err, tc.want, tc.usage)
		})
	}
}

// TestCompareAlphaShown checks that the header gives the α and threshold
// the verdicts used.
func TestCompareAlphaShown(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{nil, "verdict needs p < α = 0.05 and |Δ| ≥ 5%"},
		{[]string{"-alpha", "0.01"}, "verdict needs p < α = 0.01 and |Δ| ≥ 5%"},
		{[]string{"-alpha", "0.2", "-threshold", "0.1"}, "verdict needs p < α = 0.2 and |Δ| ≥ 10%"},
		{[]string{"-threshold", "12.5%"}, "verdict needs p < α = 0.05 and |Δ| ≥ 12.5%"},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			var stdout bytes.Buffer
			require.NoError(t, run(append([]string{"compare", aa1, aa2}, tc.args...), &stdout, &bytes.Buffer{}))
			assert.Contains(t, stdout.String(), tc.want)
		})
	}
}

// TestCompareCrossHardware: the same 1.2x slow-down measured on another
// CPU is shown under a warning, with every verdict marked, and -fail-on
// slower does not fail on it unless it lists hardware.
func TestCompareCrossHardware(t *testing.T) {
	slow := plant(t, aa2, "slower.txt", planted, slowDown(1.2))
	data, err := os.ReadFile(slow)
	require.NoError(t, err)
	amd := writeFile(t, t.TempDir(), "amd.txt", []byte(strings.ReplaceAll(string(data), "cpu: Intel(R) Xeon(R) Processor", "cpu: AMD EPYC")))
	for _, tc := range []struct {
		name    string
		newer   string
		failOn  string
		failErr string
	}{
		{"same machine fails on slower", slow, "slower", "1 slower"},
		{"other machine: not the code's", amd, "slower", ""},
		{"other machine, hardware asked for", amd, "slower,hardware", "the files ran on different hardware; 1 slower"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var stdout bytes.Buffer
			err := run([]string{"compare", "-fail-on", tc.failOn, aa1, tc.newer}, &stdout, &bytes.Buffer{})
			if tc.failErr == "" {
				require.NoError(t, err)
			} else {
				require.Error(t, err)
				assert.Contains(t, err.Error(), tc.failErr)
			}
			out := stdout.String()
			if tc.newer == amd {
				assert.Contains(t, out, "WARNING: DIFFERENT HARDWARE: amd.txt ran on other hardware than aa-1.txt")
				assert.Regexp(t, `cpu +Intel\(R\) Xeon\(R\) Processor +AMD EPYC +HARDWARE`, out)
				assert.Regexp(t, `slower \(cross-hw\)`, out)
			} else {
				assert.NotContains(t, out, "DIFFERENT HARDWARE")
			}
		})
	}
}
