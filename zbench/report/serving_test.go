package report

import (
	"fmt"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/zbench/zbench/zbench/results"
)

// servingDir holds committed results of the load generator: zbench's and
// llama.cpp's servers swept over request rates, and single streams.
const servingDir = "../../baselines/cpu-amd-epyc-f26-2core-avx512"

// readBaseline reads a committed results file of servingDir.
func readBaseline(t *testing.T, name string) *results.File {
	t.Helper()
	f, err := results.Read(filepath.Join(servingDir, name))
	require.NoError(t, err)
	return f
}

// loadHeader is the head of a load generator's results file with the
// given bounds (config lines left out where "").
func loadHeader(ttft, tpot string) string {
	h := "loadgen-url: http://127.0.0.1:8000\nloadgen-model: tiny\n"
	if ttft != "" {
		h += "loadgen-ttft-bound: " + ttft + "\n"
	}
	if tpot != "" {
		h += "loadgen-tpot-bound: " + tpot + "\n"
	}
	return h + "Unit req/s better=higher\nUnit out-tok/s better=higher\nUnit goodput-req/s better=higher\nUnit errors better=lower assume=exact\nUnit pass better=higher assume=exact\n"
}

// loadLine is a result line of the load generator for name: reqs req/s,
// 50 output tokens a request, TTFT and TPOT p99 as given (p50 half and
// p90 0.8 times them), and the verdict pass.
func loadLine(name string, reqs, ttftP99, tpotP99 float64, pass bool) string {
	goodput, p := reqs/2, 0
	if pass {
		goodput, p = reqs, 1
	}
	return fmt.Sprintf("Benchmark%s\t24\t%g req/s\t%g out-tok/s\t%g goodput-req/s\t%g ttft-p50-ms\t%g ttft-p90-ms\t%g ttft-p99-ms\t%g tpot-p50-ms\t%g tpot-p90-ms\t%g tpot-p99-ms\t0 errors\t%d pass\n",
		name, reqs, 50*reqs, goodput, ttftP99/2, ttftP99*0.8, ttftP99, tpotP99/2, tpotP99*0.8, tpotP99, p)
}

// rateFiles are the plots of the load generator's server runs of the
// workload Load.
var rateFiles = []string{"ttft-rate-load", "tpot-rate-load", "throughput-rate-load", "goodput-rate-load"}

// mixed is a file of every scenario: offline, single stream, and server
// runs at two rates written out of order.
func mixed(t *testing.T, path string) *results.File {
	return parse(t, path, loadHeader("2s", "200ms")+
		loadLine("Load/scenario=offline/concurrency=4", 1.5, 9000, 120, false)+
		loadLine("Load/scenario=singlestream", 0.4, 900, 40, true)+
		loadLine("Load/scenario=server/rate=2", 1.9, 2500, 150, false)+
		loadLine("Load/scenario=server/rate=1", 1, 1500, 100, true))
}

func TestWriteServing(t *testing.T) {
	for _, tc := range []struct {
		name      string
		files     func(t *testing.T) []*results.File
		wantPlots []string
		wantMD    []string
		notMD     []string
	}{
		{
			name: "committed sweeps",
			files: func(t *testing.T) []*results.File {
				return []*results.File{readBaseline(t, "serve-zbench-q8-batched-sweep.txt"), readBaseline(t, "serve-llamacpp-q8-sweep.txt")}
			},
			wantPlots: rateFiles,
			wantMD: []string{
				"## Serving load against request rate",
				"![Load: time to first token against request rate — scenario=server](ttft-rate-load.png)",
				"### Load-generator runs: serve-zbench-q8-batched-sweep",
				"Bounds: TTFT p99 ≤ 2s, TPOT p99 ≤ 200ms. Highest rate that passed: 0.3125 req/s (15.56 out-tok/s).",
				"| Run | Rate (req/s) | req/s | out-tok/s | goodput-req/s | TTFT p50 (ms) | TTFT p99 (ms) | TPOT p50 (ms) | TPOT p99 (ms) | Errors | Pass |\n",
				"| scenario=server | 0.3125 | 0.3413 | 15.56 | 0.3413 | 734.9 | 1221 | 53.33 | 121.8 | 0 | PASS |\n" +
					"| scenario=server | 0.5 | 0.5320 | 24.25 | 0.4655 | 893.9 | 1776 | 114.3 | 226.8 | 0 | FAIL |\n",
				"Highest rate that passed: 0.25 req/s (12.38 out-tok/s).",
				// In order of rate, not of the file.
				"| scenario=server | 0.25 | 0.2716 |",
				"| scenario=server | 0.375 | 0.3929 | 17.91 | 0.04911 | 991.9 | 4869 | 377.4 | 1190 | 0 | FAIL |\n" +
					"| scenario=server | 0.5 | 0.4063 | 18.52 | 0 | 1548 | 16630 | 423.4 | 1101 | 0 | FAIL |\n",
			},
		},
		{
			name: "one rate",
			files: func(t *testing.T) []*results.File {
				return []*results.File{parse(t, "m/one.txt", loadHeader("2s", "200ms")+loadLine("Load/scenario=server/rate=0.5", 0.5, 1200, 80, true))}
			},
			wantPlots: rateFiles,
			wantMD: []string{
				"Highest rate that passed: 0.5 req/s (25.00 out-tok/s).",
				"| scenario=server | 0.5 | 0.5000 | 25.00 | 0.5000 | 600.0 | 1200 | 40.00 | 80.00 | 0 | PASS |",
			},
		},
		{
			name:      "mixed scenarios",
			files:     func(t *testing.T) []*results.File { return []*results.File{mixed(t, "m/mixed.txt")} },
			wantPlots: rateFiles,
			wantMD: []string{
				"| scenario=offline/concurrency=4 | — | 1.500 | 75.00 | 0.7500 | 4500 | 9000 | 60.00 | 120.0 | 0 | FAIL |\n" +
					"| scenario=singlestream | — | 0.4000 | 20.00 | 0.4000 | 450.0 | 900.0 | 20.00 | 40.00 | 0 | PASS |\n" +
					"| scenario=server | 1 | 1.000 | 50.00 | 1.000 | 750.0 | 1500 | 50.00 | 100.0 | 0 | PASS |\n" +
					"| scenario=server | 2 | 1.900 | 95.00 | 0.9500 | 1250 | 2500 | 75.00 | 150.0 | 0 | FAIL |\n",
				"Highest rate that passed: 1 req/s (50.00 out-tok/s).",
			},
		},
		{
			name: "no rate passed, no bounds",
			files: func(t *testing.T) []*results.File {
				return []*results.File{parse(t, "m/fail.txt", loadHeader("", "")+
					loadLine("Load/scenario=server/rate=1", 1, 5000, 300, false)+
					loadLine("Load/scenario=server/rate=2", 1.5, 9000, 400, false))}
			},
			wantPlots: rateFiles,
			wantMD:    []string{"No bounds are given (`loadgen-ttft-bound`, `loadgen-tpot-bound`). No rate passed."},
		},
		{
			name: "single streams alone",
			files: func(t *testing.T) []*results.File {
				return []*results.File{readBaseline(t, "serve-zbench-q8-batched-singlestream.txt"), readBaseline(t, "serve-llamacpp-q8-singlestream.txt")}
			},
			wantMD: []string{
				"## Serving load against request rate",
				"No run of the load generator has a request rate (`rate=`, the server scenario), so there are no plots against rate.",
				"| scenario=singlestream | — | 0.4113 | 19.13 | 0.4113 |",
				"| scenario=singlestream | — | 0.3584 | 16.66 | 0.3584 |",
			},
			notMD: []string{"Highest rate", "No rate passed", "-rate-"},
		},
		{
			name: "no load-generator runs",
			files: func(t *testing.T) []*results.File {
				return []*results.File{ours(t, "m1/zbench.txt"), parse(t, "m1/dropout.txt", header+bench("Dropout/dev=cpu/rate=0.1", times(1), "")+bench("Dropout/dev=cpu/rate=0.5", times(1), ""))}
			},
			wantPlots: []string{"throughput-batch-bert", "latency-batch-bert", "latency-seq-bert", "throughput-size-matmul"},
			notMD:     []string{"Serving load", "Load-generator runs", "-rate-"},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			paths, err := Write(dir, tc.files(t), nil, Options{Title: "Serving"})
			require.NoError(t, err)
			assert.Len(t, paths, 2+2*len(tc.wantPlots), "paths: %q", paths)
			for _, name := range tc.wantPlots {
				assert.Contains(t, paths, filepath.Join(dir, name+".svg"))
				assert.Contains(t, paths, filepath.Join(dir, name+".png"))
			}
			md := readFile(t, filepath.Join(dir, MarkdownFile))
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
			assert.Equal(t, len(tc.wantPlots), strings.Count(page, "<svg "), "one inline SVG per plot")
			if len(tc.wantMD) > 0 {
				assert.Contains(t, page, "<th class=\"num\">TTFT p99 (ms)</th>", "the runs' table in the page")
			}
			// The loadgen-url config lines are text in the page, not links.
			assert.NotContains(t, page, "<script")
			assert.NotContains(t, page, "src=")
			for _, m := range regexp.MustCompile(`href="([^"]*)"`).FindAllStringSubmatch(page, -1) {
				assert.True(t, strings.HasPrefix(m[1], "#"), "href %q is not within the page", m[1])
			}
		})
	}
}

// TestRatePlots checks the plots against rate that the committed sweeps of
// zbench's and llama.cpp's servers give: their names, a series per file
// with its rates in increasing order, and each file's bounds.
func TestRatePlots(t *testing.T) {
	srcs := newSources([]*results.File{readBaseline(t, "serve-zbench-q8-batched-sweep.txt"), readBaseline(t, "serve-llamacpp-q8-sweep.txt")})
	rps := ratePlots(srcs)
	var names []string
	for _, rp := range rps {
		names = append(names, rp.name)
		require.Len(t, rp.series, 2, rp.name)
		var got []string
		for _, s := range rp.series {
			var xs []float64
			for _, pt := range s.pts {
				xs = append(xs, pt.x)
			}
			got = append(got, fmt.Sprintf("%s %v", s.src.short, xs))
		}
		assert.Equal(t, []string{"serve-zbench-q8-batched-sweep [0.3125 0.5]", "serve-llamacpp-q8-sweep [0.25 0.375 0.5]"}, got, rp.name)
	}
	assert.Equal(t, rateFiles, names)

	for _, tc := range []struct {
		plot   int
		bounds []time.Duration
	}{
		{0, []time.Duration{2 * time.Second}},
		{1, []time.Duration{200 * time.Millisecond}},
		{2, nil},
		{3, nil},
	} {
		got, by := rps[tc.plot].bounds(true)
		assert.Equal(t, tc.bounds, got, rps[tc.plot].name)
		for _, d := range got {
			assert.Equal(t, []string{"serve-zbench-q8-batched-sweep", "serve-llamacpp-q8-sweep"}, by[d])
		}
	}
}

// boundStroke is the style of the bound lines in the SVG plots.
const boundStroke = "stroke:#C44E52;stroke-width:1.2;stroke-dasharray:5,3"

// legendText returns the texts of an SVG plot: its title, axis labels,
// ticks and legend.
func legendText(svg []byte) []string {
	var out []string
	for _, m := range regexp.MustCompile(`>([^<>]+)</text>`).FindAllSubmatch(svg, -1) {
		out = append(out, string(m[1]))
	}
	return out
}

// TestPlotRate checks what each plot against rate draws: a legend entry
// per file and metric, the bound where the files give one (one line per
// distinct bound, named by file where they differ), the offered rate for
// goodput and the markers of passed and failed runs.
func TestPlotRate(t *testing.T) {
	sweep := func(path, ttft, tpot string) *results.File {
		return parse(t, path, loadHeader(ttft, tpot)+
			loadLine("Load/scenario=server/rate=1", 1, 1500, 100, true)+
			loadLine("Load/scenario=server/rate=2", 1.9, 2500, 250, false))
	}
	for _, tc := range []struct {
		name   string
		files  []*results.File
		plot   string
		want   []string
		unwant []string
		bounds int // horizontal lines drawn
	}{
		{
			name:  "ttft of two files, one bound",
			files: []*results.File{sweep("m/a.txt", "2s", "200ms"), sweep("m/b.txt", "2s", "200ms")},
			plot:  "ttft-rate-load",
			want: []string{
				"Load: time to first token against request rate", "TTFT (ms)", "Offered request rate (req/s)",
				"a p50", "a p90", "a p99", "b p50", "b p90", "b p99",
				"TTFT p99 bound 2s", "passed its bounds", "failed",
			},
			unwant: []string{"offered rate", "TPOT p99 bound 200ms"},
			bounds: 1,
		},
		{
			name:   "tpot bounds that differ",
			files:  []*results.File{sweep("m/a.txt", "2s", "200ms"), sweep("m/b.txt", "2s", "150ms")},
			plot:   "tpot-rate-load",
			want:   []string{"a p99", "b p99", "TPOT p99 bound 150ms (b)", "TPOT p99 bound 200ms (a)"},
			bounds: 2,
		},
		{
			name:   "no bound",
			files:  []*results.File{sweep("m/a.txt", "", "0s")},
			plot:   "tpot-rate-load",
			want:   []string{"a p50", "a p99", "passed its bounds"},
			unwant: []string{"TPOT p99 bound 0s"},
		},
		{
			name:   "goodput",
			files:  []*results.File{sweep("m/a.txt", "2s", "200ms")},
			plot:   "goodput-rate-load",
			want:   []string{"a goodput-req/s", "a req/s", "offered rate"},
			unwant: []string{"TTFT p99 bound 2s"},
		},
		{
			name:  "throughput",
			files: []*results.File{sweep("m/a.txt", "2s", "200ms")},
			plot:  "throughput-rate-load",
			want:  []string{"Output tokens a second (out-tok/s)", "a"},
		},
		{
			name:   "one rate",
			files:  []*results.File{parse(t, "m/one.txt", loadHeader("2s", "200ms")+loadLine("Load/scenario=server/rate=0.5", 0.5, 1200, 80, true))},
			plot:   "ttft-rate-load",
			want:   []string{"one p50", "one p99", "TTFT p99 bound 2s", "0.5"},
			bounds: 1,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var rp *ratePlot
			for _, p := range ratePlots(newSources(tc.files)) {
				if p.name == tc.plot {
					rp = p
				}
			}
			require.NotNil(t, rp, "plot %s", tc.plot)
			f, err := plotRate(rp, true)
			require.NoError(t, err)
			assert.NotEmpty(t, f.png)
			text := legendText(f.svg)
			for _, s := range tc.want {
				assert.Contains(t, text, s)
			}
			for _, s := range tc.unwant {
				assert.NotContains(t, text, s)
			}
			// Each bound is stroked twice: across the plot and in the
			// legend.
			assert.Equal(t, 2*tc.bounds, strings.Count(string(f.svg), boundStroke), "bound lines")
		})
	}
}

// TestRateSeries: only the load generator's server runs make series: not
// its other scenarios, and not another benchmark's rate= key.
func TestRateSeries(t *testing.T) {
	other := parse(t, "m/dropout.txt", header+bench("Dropout/dev=cpu/rate=0.1", times(1), "")+bench("Dropout/dev=cpu/rate=0.5", times(1), ""))
	ws, groups := rateSeries(newSources([]*results.File{mixed(t, "m/mixed.txt"), other}))
	assert.Equal(t, []string{"Load"}, ws)
	require.Len(t, groups["Load"], 1)
	s := groups["Load"][0]
	assert.Equal(t, []results.Key{{Name: "scenario", Value: "server"}}, s.attrs)
	require.Len(t, s.pts, 2)
	assert.Equal(t, 1.0, s.pts[0].x)
	assert.Equal(t, 2.0, s.pts[1].x)
}

// TestPlotRateMarkers: a run that passed gets a filled marker, one that
// failed an open one (a filled marker with a white one inside).
func TestPlotRateMarkers(t *testing.T) {
	f := parse(t, "m/a.txt", loadHeader("2s", "200ms")+
		loadLine("Load/scenario=server/rate=1", 1, 1500, 100, true)+
		loadLine("Load/scenario=server/rate=2", 1.9, 2500, 250, false)+
		loadLine("Load/scenario=server/rate=3", 2.2, 4000, 400, false))
	rps := ratePlots(newSources([]*results.File{f}))
	require.NotEmpty(t, rps)
	fig, err := plotRate(rps[0], true)
	require.NoError(t, err)
	// The p50 line's circles (radius 3.5 points) at the three rates, in
	// its legend entry and in those of passed and failed; white circles
	// inside those of the two failed runs and of the failed entry.
	circles := func(r string) int {
		return len(regexp.MustCompile(`<path d="M[^"]*A`+regexp.QuoteMeta(r+","+r)+` `).FindAll(fig.svg, -1))
	}
	assert.Equal(t, 3+1+2, circles("3.5"), "circles")
	assert.Equal(t, 2+1, circles("2.2"), "open circles")
}
