package report

import (
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"gonum.org/v1/plot"

	"github.com/zbench/zbench/zbench/compare"
	"github.com/zbench/zbench/zbench/results"
	"github.com/zbench/zbench/zbench/trainlog"
)

// bench returns benchmark lines for name, one per time in ms, with the
// other values given as "value unit" pairs in extra.
func bench(name string, ms []float64, extra string) string {
	var b strings.Builder
	for _, t := range ms {
		fmt.Fprintf(&b, "Benchmark%s-2\t1\t%.0f ns/op\t%s\n", name, t*1e6, extra)
	}
	return b.String()
}

// times returns six times around ms, with median ms.
func times(ms float64) []float64 {
	return []float64{ms * 0.98, ms, ms * 1.01, ms * 0.99, ms, ms * 1.02}
}

const header = "goos: linux\ngoarch: amd64\ncpu: Test CPU\n"

// parse parses text as the file path.
func parse(t *testing.T, path, text string) *results.File {
	t.Helper()
	f, err := results.Parse(strings.NewReader(text), path)
	require.NoError(t, err)
	return f
}

// ours is a zbench file with a batch sweep and a sequence sweep of BERT,
// a matmul size sweep and a benchmark with neither.
func ours(t *testing.T, path string) *results.File {
	text := header + "blas: gonum\nzbench-commit: abc123\n" +
		bench("BERT/dev=cpu/dtype=f32/batch=1/seq=128", times(100), "10 seq/s\t1e-06 rel-err") +
		bench("BERT/dev=cpu/dtype=f32/batch=4/seq=128", times(300), "13.3 seq/s\t1e-06 rel-err") +
		bench("BERT/dev=cpu/dtype=f32/batch=16/seq=128", times(1000), "16 seq/s\t1e-06 rel-err") +
		bench("BERT/dev=cpu/dtype=f32/batch=1/seq=512", times(500), "2 seq/s\t1e-06 rel-err") +
		bench("MatMul/dev=cpu/dtype=f32/m=256/n=256/k=256", times(1), "33.5 GFLOP/s\t2e-07 rel-err") +
		bench("MatMul/dev=cpu/dtype=f32/m=1024/n=1024/k=1024", times(40), "53.7 GFLOP/s\t5e-07 rel-err") +
		bench("MemPool/dev=cpu/size=4KiB", times(0.0001), "1 hits")
	return parse(t, path, text)
}

// peer is a PyTorch file timing the BERT benchmarks at twice our time.
func peer(t *testing.T, path string) *results.File {
	text := header + "impl: torch-2.1.0\n" +
		bench("BERT/dev=cpu/dtype=f32/batch=1/seq=128", times(200), "5 seq/s\t2e-06 rel-err") +
		bench("BERT/dev=cpu/dtype=f32/batch=16/seq=128", times(500), "32 seq/s\t2e-06 rel-err")
	return parse(t, path, text)
}

func TestWrite(t *testing.T) {
	for _, tc := range []struct {
		name      string
		files     func(t *testing.T) []*results.File
		wantPlots []string
		wantMD    []string
		notMD     []string
	}{
		{
			name: "ours and a peer",
			files: func(t *testing.T) []*results.File {
				return []*results.File{ours(t, "m1/zbench.txt"), peer(t, "m1/torch.txt")}
			},
			wantPlots: []string{
				"throughput-batch-bert", "latency-batch-bert", "latency-seq-bert", "throughput-size-matmul", "speedup-zbench-vs-torch-bert",
			},
			wantMD: []string{
				"| m1/zbench | ours | zbench | gonum | abc123 | 7 |",
				"| m1/torch | peer | torch-2.1.0 |",
				"![BERT: throughput against batch size", "(throughput-batch-bert.png)",
				"| Source | Series | Best batch | Throughput |",
				"| zbench | dev=cpu dtype=f32 seq=128 procs=2 | 16 | 16.00 seq/s ± 0% |",
				"### zbench against torch",
				"| batch=1 | 100.0 ms ± 2% | 1.0e-06 | 200.0 ms ± 2% | 2.0e-06 | 2.00× | 0.004 | faster |",
				"| batch=16 | 1.000 s ± 2% | 1.0e-06 | 500.0 ms ± 2% | 2.0e-06 | 0.500× | 0.004 | slower |",
				"All with `dev=cpu`, `dtype=f32`, `seq=128`.",
				"geometric mean speed-up 1.00×",
				"| batch=4/seq=128 | zbench | 300.0 ms ± 2% | 13.30 seq/s ± 0% | 1.0e-06 | 6 |",
				"| dev=cpu/size=4KiB | zbench | 100.0 ns ± 2% | — | — | 6 |",
			},
		},
		{
			name:  "ours alone",
			files: func(t *testing.T) []*results.File { return []*results.File{ours(t, "m1/zbench.txt")} },
			wantPlots: []string{
				"throughput-batch-bert", "latency-batch-bert", "latency-seq-bert", "throughput-size-matmul",
			},
			wantMD: []string{"No peer file was given"},
			notMD:  []string{"speedup-"},
		},
		{
			name: "nothing to plot",
			files: func(t *testing.T) []*results.File {
				return []*results.File{parse(t, "x/pool.txt", header+bench("MemPool/dev=cpu/size=4KiB", times(1e-4), "1 hits"))}
			},
			wantMD: []string{
				"so there is no throughput plot", "so there is no latency plot", "so there is no size plot",
				"No peer file was given", "| Benchmark | File | time/op | Throughput | rel-err | n |",
			},
			notMD: []string{".png"},
		},
		{
			name: "peer on another machine",
			files: func(t *testing.T) []*results.File {
				return []*results.File{ours(t, "m1/zbench.txt"), peer(t, "m2/torch.txt")}
			},
			wantPlots: []string{
				"throughput-batch-bert", "latency-batch-bert", "latency-seq-bert", "throughput-size-matmul", "speedup-m1-zbench-vs-m2-torch-bert",
			},
			wantMD: []string{"### m1/zbench against m2/torch", "2.00×"},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			paths, err := Write(dir, tc.files(t), nil, Options{Title: "Test report"})
			require.NoError(t, err)
			require.GreaterOrEqual(t, len(paths), 2)
			assert.Equal(t, filepath.Join(dir, HTMLFile), paths[0])
			assert.Equal(t, filepath.Join(dir, MarkdownFile), paths[1])
			for _, p := range paths {
				assert.FileExists(t, p)
			}
			assert.Len(t, paths, 2+2*len(tc.wantPlots), "paths: %q", paths)
			for _, name := range tc.wantPlots {
				assert.Contains(t, paths, filepath.Join(dir, name+".svg"))
				assert.Contains(t, paths, filepath.Join(dir, name+".png"))
			}

			md := readFile(t, filepath.Join(dir, MarkdownFile))
			assert.True(t, strings.HasPrefix(md, "# Test report\n"))
			for _, s := range tc.wantMD {
				assert.Contains(t, md, s)
			}
			for _, s := range tc.notMD {
				assert.NotContains(t, md, s)
			}
			for _, name := range tc.wantPlots {
				assert.Contains(t, md, "]("+name+".png)")
			}

			page := readFile(t, filepath.Join(dir, HTMLFile))
			assert.Contains(t, page, "<title>Test report</title>")
			assert.Equal(t, len(tc.wantPlots), strings.Count(page, "<svg "), "one inline SVG per plot")
			assertSelfContained(t, page)
		})
	}
}

// assertSelfContained checks that page loads nothing from elsewhere.
func assertSelfContained(t *testing.T, page string) {
	t.Helper()
	assert.NotContains(t, page, "http://")
	assert.NotContains(t, page, "https://")
	assert.NotContains(t, page, "<script")
	assert.NotContains(t, page, "<link")
	assert.NotContains(t, page, "src=")
	for _, m := range regexp.MustCompile(`href="([^"]*)"`).FindAllStringSubmatch(page, -1) {
		assert.True(t, strings.HasPrefix(m[1], "#"), "href %q is not within the page", m[1])
	}
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	return string(b)
}

func TestWriteErrors(t *testing.T) {
	notDir := filepath.Join(t.TempDir(), "file")
	require.NoError(t, os.WriteFile(notDir, nil, 0o644))
	for _, tc := range []struct {
		name    string
		dir     string
		files   []*results.File
		logs    []*trainlog.Log
		wantErr string
		is      error
	}{
		{name: "no files", dir: t.TempDir(), wantErr: "no benchmark files or training logs to report on", is: ErrNoFiles},
		{name: "nil file", dir: t.TempDir(), files: []*results.File{nil}, wantErr: "file 0 is nil", is: ErrNoFiles},
		{name: "nil log", dir: t.TempDir(), logs: []*trainlog.Log{nil}, wantErr: "training log 0 is nil or empty", is: ErrNoFiles},
		{name: "empty log", dir: t.TempDir(), logs: []*trainlog.Log{{Path: "a/b.jsonl"}}, wantErr: "training log 0 is nil or empty", is: ErrNoFiles},
		{name: "log into a file", dir: filepath.Join(notDir, "sub"), logs: []*trainlog.Log{{Path: "a/b.jsonl", Points: []trainlog.Point{{Step: 0, Loss: 1}}}}, wantErr: notDir},
		{name: "dir is a file", dir: filepath.Join(notDir, "sub"), files: []*results.File{ours(t, "m1/zbench.txt")}, wantErr: notDir},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Write(tc.dir, tc.files, tc.logs, Options{})
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.wantErr)
			assert.NotContains(t, err.Error(), "\n")
			if tc.is != nil {
				assert.True(t, errors.Is(err, tc.is))
			}
		})
	}
}

// Values no benchmark should report (NaN, zero or negative times) are left
// out of plots and speed-ups rather than failing or panicking.
func TestWriteOddValues(t *testing.T) {
	text := header +
		"BenchmarkBERT/dev=cpu/dtype=f32/batch=1/seq=128-2\t1\tNaN ns/op\t1 seq/s\n" +
		"BenchmarkBERT/dev=cpu/dtype=f32/batch=2/seq=128-2\t1\t0 ns/op\t0 seq/s\n" +
		"BenchmarkBERT/dev=cpu/dtype=f32/batch=4/seq=128-2\t1\t-5 ns/op\t-1 seq/s\n" +
		"BenchmarkBERT/dev=cpu/dtype=f32/batch=x/seq=y-2\t1\t5 ns/op\t1 seq/s\n" +
		"BenchmarkOdd/<script>alert(1)</script>|x-2\t1\t5 ns/op\n"
	f := parse(t, "m1/odd.txt", text)
	p := parse(t, "m1/peer.txt", "impl: torch\n"+strings.ReplaceAll(text, "NaN ns/op", "5 ns/op"))
	dir := t.TempDir()
	_, err := Write(dir, []*results.File{f, p}, nil, Options{})
	require.NoError(t, err)
	page := readFile(t, filepath.Join(dir, HTMLFile))
	assert.NotContains(t, page, "<script>")
	assert.Contains(t, page, "&lt;script&gt;")
	md := readFile(t, filepath.Join(dir, MarkdownFile))
	assert.NotContains(t, md, "<script>")
	assert.Contains(t, md, `\|x`)
}

func TestNewSources(t *testing.T) {
	for _, tc := range []struct {
		name       string
		path, text string
		wantLabel  string
		wantPeer   bool
	}{
		{"zbench", "baselines/cpu-2core/zbench.txt", "blas: gonum\n", "cpu-2core/zbench", false},
		{"torch", "baselines/cpu-2core/torch-1.13.txt", "impl: torch-1.13.0a0\n", "cpu-2core/torch-1.13", true},
		{"impl zbench", "h100/zbench-cuda.out", "impl: zbench-cuda\n", "h100/zbench-cuda", false},
		{"impl in a later run", "m/mixed.txt", "impl: zbench\n" + bench("A", []float64{1}, "") + "impl: jax\n", "m/mixed", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := parse(t, tc.path, tc.text+bench("X/dev=cpu", []float64{1}, ""))
			s := newSources([]*results.File{f})[0]
			assert.Equal(t, tc.wantLabel, s.label)
			assert.Equal(t, tc.wantPeer, s.peer)
		})
	}

	// The same label twice is told apart.
	a := parse(t, "m/zbench.txt", bench("X", []float64{1}, ""))
	srcs := newSources([]*results.File{a, a})
	assert.Equal(t, "m/zbench", srcs[0].label)
	assert.Equal(t, "m/zbench (2)", srcs[1].label)
}

func TestComparisons(t *testing.T) {
	o1, o2 := ours(t, "m1/zbench.txt"), ours(t, "m2/zbench.txt")
	p1, p3 := peer(t, "m1/torch.txt"), peer(t, "m3/torch.txt")
	cmps := comparisons(newSources([]*results.File{o1, o2, p1, p3}))
	var got []string
	for _, c := range cmps {
		got = append(got, c.ours.label+" vs "+c.peer.label)
	}
	// m1 has a peer of its own; m2 has none, so it is compared with all.
	assert.Equal(t, []string{"m1/zbench vs m1/torch", "m2/zbench vs m1/torch", "m2/zbench vs m3/torch"}, got)
	require.Len(t, cmps[0].rows, 2)
	r := cmps[0].rows[0]
	assert.Equal(t, "BERT/dev=cpu/dtype=f32/batch=1/seq=128-2", r.ours.ID())
	assert.InDelta(t, 2.0, r.speedup, 1e-12)
	assert.True(t, r.oursErrOK)
	assert.InDelta(t, 2e-6, r.peerErr.Center, 1e-18)
	// compare's judgement, with the peer as the base: two samples of six
	// that do not overlap, Holm-adjusted over the two benchmarks.
	assert.Equal(t, compare.Faster, r.delta.Verdict)
	assert.InDelta(t, 2*2.0/924, r.delta.PHolm, 1e-12)
	assert.Equal(t, compare.Slower, cmps[0].rows[1].delta.Verdict)
	assert.Equal(t, 2, cmps[0].res.Comparisons)
}

// TestSpeedups: invalid results are left out of the speed-up summaries,
// as compare leaves them out of its geomean.
func TestSpeedups(t *testing.T) {
	row := func(speedup float64, v compare.Verdict) cmpRow {
		return cmpRow{speedup: speedup, delta: &compare.Delta{Verdict: v}}
	}
	n, gm, lo, hi := speedups([]cmpRow{row(2, compare.Faster), row(0.5, compare.Slower), row(100, compare.Invalid), row(8, compare.Same)})
	assert.Equal(t, 3, n)
	assert.InDelta(t, 2, gm, 1e-12)
	assert.Equal(t, 0.5, lo)
	assert.Equal(t, 8.0, hi)
	n, gm, _, _ = speedups([]cmpRow{row(100, compare.Invalid)})
	assert.Zero(t, n)
	assert.True(t, math.IsNaN(gm))
}

func TestSweepSeries(t *testing.T) {
	srcs := newSources([]*results.File{ours(t, "m1/zbench.txt")})
	for _, tc := range []struct {
		sweep  int
		want   []string // plot name: series x values
		wantYs []float64
	}{
		{0, []string{"throughput-batch-bert: [1 4 16]"}, []float64{10, 13.3, 16}},
		{1, []string{"latency-batch-bert: [1 4 16]"}, []float64{0.1, 0.3, 1.0}},
		{2, []string{"latency-seq-bert: [128 512]"}, []float64{0.1, 0.5}},
		{3, []string{"throughput-size-matmul: [256 1024]"}, []float64{33.5, 53.7}},
	} {
		t.Run(sweeps[tc.sweep].slug, func(t *testing.T) {
			lps := sweeps[tc.sweep].plots(srcs)
			var got []string
			for _, lp := range lps {
				require.Len(t, lp.series, 1)
				var xs []float64
				for i, pt := range lp.series[0].pts {
					xs = append(xs, pt.x)
					assert.InDelta(t, tc.wantYs[i], pt.y.Center, tc.wantYs[i]*1e-9)
				}
				got = append(got, fmt.Sprintf("%s: %v", lp.name, xs))
			}
			assert.Equal(t, tc.want, got)
		})
	}
}

func TestManyBars(t *testing.T) {
	var o, p strings.Builder
	p.WriteString("impl: torch\n")
	for i := range maxBars + 5 {
		name := fmt.Sprintf("Attention/dev=cpu/heads=%d", i+1)
		o.WriteString(bench(name, []float64{1}, ""))
		p.WriteString(bench(name, []float64{2}, ""))
	}
	dir := t.TempDir()
	paths, err := Write(dir, []*results.File{parse(t, "m/zbench.txt", o.String()), parse(t, "m/torch.txt", p.String())}, nil, Options{})
	require.NoError(t, err)
	assert.Contains(t, paths, filepath.Join(dir, "speedup-zbench-vs-torch-attention-1.png"))
	assert.Contains(t, paths, filepath.Join(dir, "speedup-zbench-vs-torch-attention-2.png"))
	md := readFile(t, filepath.Join(dir, MarkdownFile))
	assert.Len(t, regexp.MustCompile(`(?m)^\| heads=\d+ \|.*\| 2\.00× \|`).FindAllString(md, -1), maxBars+5, "one speed-up row per benchmark")
}

func TestFacet(t *testing.T) {
	// 5 ops × 3 dtypes × 1 file = 15 series: one plot per op.
	var text strings.Builder
	for _, op := range []string{"relu", "gelu", "softmax", "layernorm", "attention"} {
		for _, dt := range []string{"f32", "f16", "bf16"} {
			for _, seq := range []string{"128", "384"} {
				text.WriteString(bench("Kernels/op="+op+"/dev=cpu/dtype="+dt+"/batch=8/seq="+seq, []float64{1}, "1 GFLOP/s"))
			}
		}
	}
	lps := sweeps[2].plots(newSources([]*results.File{parse(t, "m/k.txt", text.String())}))
	require.Len(t, lps, 5)
	for _, lp := range lps {
		assert.Len(t, lp.series, 3)
		assert.Equal(t, "op", lp.fixed[0].Name)
	}
	assert.Equal(t, "latency-seq-kernels-relu", lps[0].name)
	assert.Equal(t, "latency-seq-kernels-attention", lps[4].name)
}

func TestFormat(t *testing.T) {
	for _, tc := range []struct {
		got, want string
	}{
		{formatRatio(2), "2.00×"},
		{formatRatio(0.08153), "0.0815×"},
		{formatRatio(12.34), "12.3×"},
		{formatRatio(153.7), "154×"},
		{formatRatio(math.NaN()), "—"},
		{formatRatio(0), "—"},
		{formatTime(0.9504), "950.4 ms"},
		{formatTime(3), "3.000 s"},
		{formatTime(1234.5), "1234 s"},
		{formatTime(1.5e-7), "150.0 ns"},
		{formatTime(2.5e-5), "25.00 µs"},
		{sig4(0.5159), "0.5159"},
		{sig4(12345), "12345"},
		{sig4(0), "0"},
		{formatP(0.0021, true), "0.002"},
		{formatP(1e-5, true), "<0.001"},
		{formatP(0, false), "—"},
		{slug("BERT: zbench vs torch-1.13 / op=relu"), "bert-zbench-vs-torch-1.13-op-relu"},
		{slug("///"), "plot"},
	} {
		assert.Equal(t, tc.want, tc.got)
	}
}

func TestLogTicks(t *testing.T) {
	labels := func(lo, hi float64) []string {
		var l []string
		for _, tk := range (logTicks{}).Ticks(lo, hi) {
			if tk.Label != "" {
				l = append(l, tk.Label)
			}
		}
		return l
	}
	for _, tc := range []struct {
		lo, hi         float64
		want           []string
		wantLo, wantHi float64
	}{
		{200, 5000, []string{"200", "500", "1000", "2000", "5000"}, 200, 5000},
		{0.1, 2, []string{"0.1", "0.2", "0.5", "1", "2"}, 0.1, 2},
		{1, 1e6, []string{"1", "10", "100", "1000", "10000", "100000", "1e+06"}, 1, 1e6},
		{0.8, 1.25, []string{"0.8", "0.9", "1"}, 0.8, 2},
		{212, 3063, []string{"500", "1000", "2000"}, 200, 5000},
	} {
		assert.Equal(t, tc.want, labels(tc.lo, tc.hi), "ticks of [%v, %v]", tc.lo, tc.hi)
		lo, hi := logBounds(tc.lo, tc.hi)
		assert.InDelta(t, tc.wantLo, lo, tc.wantLo*1e-12, "low bound of [%v, %v]", tc.lo, tc.hi)
		assert.InDelta(t, tc.wantHi, hi, tc.wantHi*1e-12, "high bound of [%v, %v]", tc.lo, tc.hi)
	}
	// A range too short for round numbers still gets two labels.
	assert.Len(t, labels(1.01, 1.02), 2)
	// Degenerate ranges do not panic.
	assert.NotPanics(t, func() { (logTicks{}).Ticks(0, 1) })
}

func TestNiceTicks(t *testing.T) {
	var got []float64
	for _, tk := range (niceTicks{}).Ticks(0, 7.1) {
		got = append(got, tk.Value)
	}
	assert.Equal(t, []float64{0, 2, 4, 6}, got)
	assert.InDelta(t, 8.0, niceCeil(7.1), 1e-12)
	assert.InDelta(t, 250.0, niceCeil(230), 1e-12)
	var _ plot.Ticker = niceTicks{}
}

// TestCrossHardware: files from different CPUs get an environment table
// and their speed-ups a warning; files from one machine get neither.
func TestCrossHardware(t *testing.T) {
	other := func(path string) *results.File {
		text := strings.Replace(header, "Test CPU", "Other CPU", 1) + "impl: torch-2.1.0\nblas: openblas\n" +
			bench("BERT/dev=cpu/dtype=f32/batch=1/seq=128", times(200), "5 seq/s")
		return parse(t, path, text)
	}
	for _, tc := range []struct {
		name  string
		files []*results.File
		cross bool
	}{
		{"one machine", []*results.File{ours(t, "m1/zbench.txt"), peer(t, "m1/torch.txt")}, false},
		{"two machines", []*results.File{ours(t, "m1/zbench.txt"), other("m2/torch.txt")}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			_, err := Write(dir, tc.files, nil, Options{})
			require.NoError(t, err)
			md, err := os.ReadFile(filepath.Join(dir, MarkdownFile))
			require.NoError(t, err)
			page, err := os.ReadFile(filepath.Join(dir, HTMLFile))
			require.NoError(t, err)
			for _, doc := range []string{string(md), string(page)} {
				if !tc.cross {
					assert.NotContains(t, doc, "DIFFERENT HARDWARE")
					assert.NotContains(t, doc, "HARDWARE")
					continue
				}
				assert.Contains(t, doc, "DIFFERENT HARDWARE: m1/zbench and m2/torch ran on different machines")
				assert.Regexp(t, `cpu.{0,40}HARDWARE.{0,40}Test CPU.{0,40}Other CPU`, doc)
				assert.Regexp(t, `blas.{0,40}software.{0,40}gonum.{0,40}openblas`, doc)
			}
		})
	}
}

// TestValueTicks checks which of an axis's values get a label: every one
// when they are spread out, not one crowding the last labelled.
func TestValueTicks(t *testing.T) {
	for _, c := range []struct {
		name   string
		xs     []float64
		log    bool
		labels []string
	}{
		{"spread", []float64{1, 2, 3, 4}, false, []string{"1", "2", "3", "4"}},
		{"one", []float64{5}, false, []string{"5"}},
		{"crowded on a log axis", []float64{0.125, 0.1875, 0.25, 1.5, 1.75, 2, 2.125, 2.25}, true,
			[]string{"0.125", "0.1875", "0.25", "1.5", "1.75", "2", "", "2.25"}},
		{"crowded on a linear axis", []float64{0, 0.1, 10, 20}, false, []string{"0", "", "10", "20"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			var got []string
			for _, tk := range valueTicks(c.xs, c.log) {
				got = append(got, tk.Label)
			}
			require.Equal(t, c.labels, got)
		})
	}
}
