package main

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/zbench/zbench/zbench/results"
	"github.com/zbench/zbench/zbench/trainlog"
)

// baselineDir holds the committed baselines of one machine.
const baselineDir = "../../baselines/cpu-intel-xeon-f6-2core-amx"

// servingBaselineDir holds committed results of the load generator.
const servingBaselineDir = "../../baselines/cpu-amd-epyc-f26-2core-avx512"

var (
	ourBaseline      = filepath.Join(baselineDir, "zbench.txt")
	openBLASBaseline = filepath.Join(baselineDir, "zbench-openblas.txt")
	// torchBaseline is a PyTorch 1.13 peer run of that machine, with the
	// spinning OpenMP default that made it no fair peer: kept as the
	// report's test input, not as a baseline.
	torchBaseline = filepath.Join("testdata", "cpu-intel-xeon-f6-2core-amx", "torch-1.13.txt")
)

func TestReportBaselines(t *testing.T) {
	for _, tc := range []struct {
		name      string
		files     []string
		wantPlots []string // a few of the plots expected, without extension
		wantMD    []string
	}{
		{
			name:  "zbench, openblas and torch",
			files: []string{ourBaseline, openBLASBaseline, torchBaseline},
			wantPlots: []string{
				"throughput-batch-bert", "latency-seq-bert", "latency-seq-kernels-relu", "throughput-size-matmul",
				"speedup-zbench-vs-torch-1.13-bert", "speedup-zbench-vs-torch-1.13-kernels",
				"speedup-zbench-openblas-vs-torch-1.13-matmul",
			},
			wantMD: []string{"### zbench against torch-1.13", "### zbench-openblas against torch-1.13", "| cpu-intel-xeon-f6-2core-amx/torch-1.13 | peer | torch-1.13.0a0 |"},
		},
		{
			name: "load-generator sweeps and a single stream",
			files: []string{
				filepath.Join(servingBaselineDir, "serve-zbench-q8-batched-sweep.txt"),
				filepath.Join(servingBaselineDir, "serve-llamacpp-q8-sweep.txt"),
				filepath.Join(servingBaselineDir, "serve-zbench-q8-batched-singlestream.txt"),
			},
			wantPlots: []string{"ttft-rate-load", "tpot-rate-load", "throughput-rate-load", "goodput-rate-load"},
			wantMD: []string{
				"### Load-generator runs: serve-llamacpp-q8-sweep",
				"Highest rate that passed: 0.3125 req/s (15.56 out-tok/s).",
				"| scenario=server | 0.25 | 0.2716 | 12.38 | 0.2716 | 715.0 | 1215 | 89.16 | 182.0 | 0 | PASS |",
				"| scenario=singlestream | — | 0.4113 | 19.13 | 0.4113 | 883.1 | 1049 | 34.41 | 34.98 | 0 | PASS |",
			},
		},
		{
			name:      "torch alone",
			files:     []string{torchBaseline},
			wantPlots: []string{"throughput-batch-bert", "latency-seq-kernels-gelu"},
			wantMD:    []string{"Every file is a peer's"},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "out")
			var stdout, stderr bytes.Buffer
			err := runReport(append([]string{"-o", dir, "-title", "Baselines"}, tc.files...), &stdout, &stderr)
			require.NoError(t, err)
			assert.Empty(t, stderr.String())

			// stdout lists every file written, one a line, and only those.
			paths := strings.Split(strings.TrimSuffix(stdout.String(), "\n"), "\n")
			require.GreaterOrEqual(t, len(paths), 2)
			assert.Equal(t, filepath.Join(dir, "index.html"), paths[0])
			assert.Equal(t, filepath.Join(dir, "report.md"), paths[1])
			entries, err := os.ReadDir(dir)
			require.NoError(t, err)
			assert.Len(t, entries, len(paths))
			for _, p := range paths {
				assert.FileExists(t, p)
				if strings.HasSuffix(p, ".svg") {
					assert.Contains(t, paths, strings.TrimSuffix(p, ".svg")+".png", "every SVG has its PNG")
				}
			}
			for _, name := range tc.wantPlots {
				assert.Contains(t, paths, filepath.Join(dir, name+".svg"))
				assert.Contains(t, paths, filepath.Join(dir, name+".png"))
			}

			md := readString(t, filepath.Join(dir, "report.md"))
			assert.True(t, strings.HasPrefix(md, "# Baselines\n"))
			assert.Contains(t, md, "\n| Benchmark | File | time/op | Throughput | rel-err | n |\n|---|---|---:|---:|---:|---:|\n", "a GitHub table: header row, then separator")
			for _, s := range tc.wantMD {
				assert.Contains(t, md, s)
			}
			// The markdown shows every PNG, by relative path.
			for _, p := range paths {
				if name := filepath.Base(p); strings.HasSuffix(name, ".png") {
					assert.Contains(t, md, "]("+name+")")
				}
			}

			page := readString(t, filepath.Join(dir, "index.html"))
			assert.Contains(t, page, "<title>Baselines</title>")
			assert.Equal(t, (len(paths)-2)/2, strings.Count(page, "<svg "), "every plot inline")
			for _, m := range regexp.MustCompile(`(?i)\b(?:src|href)\s*=\s*["']?([^"'\s>]*)`).FindAllStringSubmatch(page, -1) {
				assert.NotRegexp(t, `(?i)^(https?:)?//`, m[1], "external resource in the page")
				assert.True(t, strings.HasPrefix(m[1], "#"), "link %q out of the page", m[1])
			}
			assert.NotContains(t, page, "<script")
			assert.NotContains(t, page, "<link")
			assert.NotContains(t, page, "@import")
		})
	}
}

// The speed-up in the markdown is the peer's median time over ours,
// computed here from the raw samples; its p-value and verdict are zbench
// compare's with the peer as the base.
func TestReportSpeedup(t *testing.T) {
	dir := t.TempDir()
	var stdout bytes.Buffer
	require.NoError(t, runReport([]string{"-o", dir, ourBaseline, openBLASBaseline, torchBaseline}, &stdout, &stdout))
	md := readString(t, filepath.Join(dir, "report.md"))

	for _, tc := range []struct {
		ours    string
		section string // the markdown heading of the speed-up table
		row     string // the benchmark's first cell there
		id      string
	}{
		{ourBaseline, "#### BERT: zbench against torch-1.13", "batch=1/seq=128", "BERT/dev=cpu/dtype=f32/batch=1/seq=128-2"},
		{ourBaseline, "#### Kernels: zbench against torch-1.13", "op=gelu/dtype=bf16/seq=384", "Kernels/op=gelu/dev=cpu/dtype=bf16/batch=8/seq=384-2"},
		{openBLASBaseline, "#### MatMul: zbench-openblas against torch-1.13", "dtype=f32/m=1024/n=1024/k=1024/transfer=roundtrip", "MatMul/dev=cpu/dtype=f32/m=1024/n=1024/k=1024/transfer=roundtrip-2"},
	} {
		t.Run(tc.id, func(t *testing.T) {
			want := median(t, torchBaseline, tc.id) / median(t, tc.ours, tc.id)
			cells := tableRow(t, md, tc.section, tc.row)
			require.Len(t, cells, 8, "row %q", cells)
			got, err := strconv.ParseFloat(strings.TrimSuffix(cells[5], "×"), 64)
			require.NoError(t, err, "speed-up cell %q", cells[5])
			assert.InEpsilon(t, want, got, 0.006, "speed-up of %s: report %s, computed %.4f", tc.id, cells[5], want)

			verdicts, _, err := compareRecords(t, torchBaseline, tc.ours)
			require.NoError(t, err)
			assert.Equal(t, verdicts[tc.id], cells[7], "compare's verdict")
			assert.NotEqual(t, "—", cells[2], "our rel-err is beside our time")
			assert.NotEqual(t, "—", cells[4], "the peer's rel-err is beside its time")
		})
	}
}

// median is the median of the ns/op samples of benchmark id in path,
// computed without the report's statistics.
func median(t *testing.T, path, id string) float64 {
	t.Helper()
	f, err := results.Read(path)
	require.NoError(t, err)
	b := f.Lookup(id)
	require.NotNil(t, b, "%s in %s", id, path)
	x := slices.Clone(b.Values["sec/op"])
	require.NotEmpty(t, x)
	slices.Sort(x)
	n := len(x)
	if n%2 == 1 {
		return x[n/2]
	}
	return (x[n/2-1] + x[n/2]) / 2
}

// tableRow returns the cells of the first row whose first cell is first in
// the table after heading.
func tableRow(t *testing.T, md, heading, first string) []string {
	t.Helper()
	_, after, ok := strings.Cut(md, "\n"+heading+"\n")
	require.True(t, ok, "no heading %q", heading)
	if i := strings.Index(after, "\n#"); i >= 0 {
		after = after[:i]
	}
	for _, line := range strings.Split(after, "\n") {
		if !strings.HasPrefix(line, "|") {
			continue
		}
		cells := strings.Split(strings.Trim(line, "|"), "|")
		for i := range cells {
			cells[i] = strings.TrimSpace(cells[i])
		}
		if cells[0] == first {
			return cells
		}
	}
	require.Failf(t, "no row", "no row %q under %q", first, heading)
	return nil
}

func TestReportErrors(t *testing.T) {
	dir := t.TempDir()
	empty := writeFile(t, dir, "empty.txt", nil)
	notBench := writeFile(t, dir, "notes.txt", []byte("These are my notes.\nPASS\nok  \tpkg\t1.0s\n"))
	missing := filepath.Join(dir, "missing.txt")
	out := filepath.Join(dir, "out")

	for _, tc := range []struct {
		name      string
		args      []string
		wantErr   []string
		wantUsage bool
		wantIs    error
	}{
		{name: "missing file", args: []string{"-o", out, ourBaseline, missing}, wantErr: []string{missing, "no such file"}, wantIs: os.ErrNotExist},
		{name: "empty file", args: []string{"-o", out, empty}, wantErr: []string{empty, "empty file"}, wantIs: results.ErrNoResults},
		{name: "not benchmark output", args: []string{"-o", out, notBench}, wantErr: []string{notBench, "no benchmark results"}, wantIs: results.ErrNoResults},
		{name: "no files", args: []string{"-o", out}, wantErr: []string{"report: no benchmark files or training logs given"}, wantUsage: true},
		{name: "no args", args: nil, wantErr: []string{"report: no benchmark files or training logs given", "zbench report -h"}, wantUsage: true},
		{name: "unknown flag", args: []string{"-frob", ourBaseline}, wantErr: []string{"report: flag provided but not defined: -frob"}, wantUsage: true},
		{name: "unknown flag after files", args: []string{ourBaseline, "-frob"}, wantErr: []string{"report: flag provided but not defined: -frob"}, wantUsage: true},
		{name: "empty -o", args: []string{"-o", "", ourBaseline}, wantErr: []string{"-o: empty"}, wantUsage: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			err := run(append([]string{"report"}, tc.args...), &stdout, &stderr)
			require.Error(t, err)
			msg := oneLine(err)
			assert.True(t, strings.HasPrefix(msg, "report: "), "%q names the command first", msg)
			assert.Equal(t, 1, strings.Count(msg, "report: "), "%q names the command once", msg)
			assert.NotContains(t, err.Error(), "\n", "one line")
			for _, s := range tc.wantErr {
				assert.Contains(t, msg, s)
			}
			if tc.wantIs != nil {
				assert.True(t, errors.Is(err, tc.wantIs), "%v is %v", err, tc.wantIs)
			}
			want := 1
			if tc.wantUsage {
				want = 2
			}
			assert.Equal(t, want, exitCode(err))
			assert.Empty(t, stdout.String())
			assert.NoDirExists(t, out, "nothing written on error")
		})
	}
}

func TestReportHelpAndDefaultDir(t *testing.T) {
	var stdout, stderr bytes.Buffer
	err := runReport([]string{"-h"}, &stdout, &stderr)
	require.ErrorIs(t, err, errHelp)
	assert.Contains(t, stdout.String(), "usage: zbench report [-o DIR] [-title TEXT] FILE|LOG.jsonl...")
	assert.Contains(t, stdout.String(), "training logs (LOG.jsonl)")
	assert.Contains(t, stdout.String(), "against request rate")
	assert.Contains(t, stdout.String(), "-o DIR")
	assert.Empty(t, stderr.String())

	// Without -o the report goes to zbench-report in the working
	// directory.
	abs, err := filepath.Abs(torchBaseline)
	require.NoError(t, err)
	t.Chdir(t.TempDir())
	stdout.Reset()
	require.NoError(t, runReport([]string{abs}, &stdout, &stderr))
	assert.True(t, strings.HasPrefix(stdout.String(), filepath.Join("zbench-report", "index.html")+"\n"))
	assert.FileExists(t, filepath.Join("zbench-report", "report.md"))
	assert.Contains(t, readString(t, filepath.Join("zbench-report", "index.html")), "<title>zbench benchmark report</title>")
}

func readString(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	return string(b)
}

// TestReportWarnsSkipped checks that report, like compare, tells about
// lines that looked like results but were not, instead of dropping them
// silently.
func TestReportWarnsSkipped(t *testing.T) {
	dir := t.TempDir()
	good := readString(t, torchBaseline)
	bad := writeFile(t, dir, "torch.txt", []byte(good+"BenchmarkBERT/dev=cpu/dtype=f32/batch=1/seq=8-2\t10\tx ns/op\n"))
	var stdout, stderr bytes.Buffer
	require.NoError(t, run([]string{"report", "-o", filepath.Join(dir, "out"), bad}, &stdout, &stderr))
	assert.Equal(t, "zbench: warning: 1 malformed benchmark lines skipped, first: "+bad+":", strings.SplitAfter(stderr.String(), bad+":")[0])
	assert.Contains(t, stderr.String(), "parsing measurement")
}

// TestReportDefaultDirIgnored checks that git ignores the report's default
// output directory at the top of the repository.
func TestReportDefaultDirIgnored(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("needs git")
	}
	top, err := exec.Command("git", "rev-parse", "--show-toplevel").Output()
	if err != nil {
		t.Skipf("not in a git checkout: %v", err)
	}
	cmd := exec.Command("git", "check-ignore", "-q", "--no-index", "zbench-report/index.html")
	cmd.Dir = strings.TrimSpace(string(top))
	assert.NoError(t, cmd.Run(), "zbench-report/ is not in .gitignore")
}

// writeLog writes a training log of losses, one a step from step 0, as the
// BERT training test writes it, into dir/name.
func writeLog(t *testing.T, dir, name string, losses ...float64) string {
	t.Helper()
	require.NoError(t, os.MkdirAll(dir, 0o755))
	var b strings.Builder
	for i, l := range losses {
		fmt.Fprintf(&b, `{"step":%d,"loss":%v}`+"\n", i, l)
	}
	return writeFile(t, dir, name, []byte(b.String()))
}

// TestReportTrainingLogs: .jsonl files are training logs, plotted and
// tabled, alone or beside benchmark files; the last-10 means are compared
// with the first log's.
func TestReportTrainingLogs(t *testing.T) {
	curves := filepath.Join(t.TempDir(), "bert-train-curve")
	// bf16: mean of the last 10 losses 2.0; fp8 2.01, +0.5%.
	bf16 := writeLog(t, curves, "bf16.jsonl", 8.31, 6, 4, 3, 2.5, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2)
	fp8 := writeLog(t, curves, "fp8.jsonl", 8.31, 6.1, 4.2, 3, 2.5, 2.01, 2.01, 2.01, 2.01, 2.01, 2.01, 2.01, 2.01, 2.01, 2.01)
	for _, tc := range []struct {
		name      string
		files     []string
		wantPlots []string
	}{
		{"logs alone", []string{bf16, fp8}, []string{"loss-step"}},
		{"logs and benchmarks", []string{torchBaseline, bf16, fp8}, []string{"loss-step", "throughput-batch-bert"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "out")
			var stdout, stderr bytes.Buffer
			require.NoError(t, run(append([]string{"report", "-o", dir}, tc.files...), &stdout, &stderr))
			assert.Empty(t, stderr.String())
			paths := strings.Fields(stdout.String())
			for _, name := range tc.wantPlots {
				assert.Contains(t, paths, filepath.Join(dir, name+".svg"))
				assert.Contains(t, paths, filepath.Join(dir, name+".png"))
			}
			md := readString(t, filepath.Join(dir, "report.md"))
			assert.Contains(t, md, "](loss-step.png)")
			assert.Equal(t, []string{"bert-train-curve/bf16", "15", "14", "8.310", "2.000", "2.000", "reference", bf16},
				tableRow(t, md, "## Training loss", "bert-train-curve/bf16"))
			assert.Equal(t, []string{"bert-train-curve/fp8", "15", "14", "8.310", "2.010", "2.010", "+0.5%", fp8},
				tableRow(t, md, "## Training loss", "bert-train-curve/fp8"))
			page := readString(t, filepath.Join(dir, "index.html"))
			assert.Equal(t, (len(paths)-2)/2, strings.Count(page, "<svg "), "every plot inline")
		})
	}
}

func TestReportTrainingLogErrors(t *testing.T) {
	dir := t.TempDir()
	good := writeLog(t, dir, "good.jsonl", 3, 2, 1)
	for _, tc := range []struct {
		name, text string
		wantErr    string // after "report: FILE"
		wantIs     error
	}{
		{"empty", "", ": empty file: no training steps", trainlog.ErrNoSteps},
		{"malformed line", `{"step":0,"loss":1}` + "\n" + `{"step":1,"loss":`, ":2: malformed JSON: unexpected end of JSON input: invalid training log", trainlog.ErrInvalid},
		{"missing loss", `{"step":0}`, `:1: no "loss" field: invalid training log`, trainlog.ErrInvalid},
		{"NaN loss", `{"step":0,"loss":1}` + "\n\n" + `{"step": 1, "loss": NaN}`, ":3: loss is NaN, not a finite number: invalid training log", trainlog.ErrInvalid},
		{"negative step", `{"step":-3,"loss":1}`, ":1: step -3 is negative: invalid training log", trainlog.ErrInvalid},
		{"repeated step", `{"step":0,"loss":1}` + "\n" + `{"step":0,"loss":1}`, ":2: step 0 after step 0: steps must increase: invalid training log", trainlog.ErrInvalid},
	} {
		t.Run(tc.name, func(t *testing.T) {
			bad := writeFile(t, dir, strings.ReplaceAll(tc.name, " ", "-")+".jsonl", []byte(tc.text))
			out := filepath.Join(dir, "out")
			var stdout, stderr bytes.Buffer
			err := run([]string{"report", "-o", out, good, bad}, &stdout, &stderr)
			require.Error(t, err)
			assert.Equal(t, "report: "+bad+tc.wantErr, oneLine(err))
			assert.ErrorIs(t, err, tc.wantIs)
			assert.Equal(t, 1, exitCode(err))
			assert.Empty(t, stdout.String())
			assert.NoDirExists(t, out, "nothing written on error")
		})
	}
}
