package compare

import (
	"fmt"
	"math"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/zbench/zbench/kernels"
	"github.com/zbench/zbench/zbench/results"
)

func TestHolm(t *testing.T) {
	// Holm's step-down: sorted p times (m − rank + 1), made monotone.
	ds := []*Delta{{P: 0.01}, {P: 0.04}, {P: 0.03}, {P: 0.005}}
	assert.Equal(t, 4, holm(ds))
	want := []float64{0.03, 0.06, 0.06, 0.02}
	for i, d := range ds {
		assert.InDelta(t, want[i], d.PHolm, 1e-12, "p=%v", d.P)
	}
	one := []*Delta{{P: 0.7}}
	holm(one)
	assert.Equal(t, 0.7, one[0].PHolm)
	capped := []*Delta{{P: 0.6}, {P: 0.9}}
	holm(capped)
	assert.Equal(t, []float64{1, 1}, []float64{capped[0].PHolm, capped[1].PHolm})
}

func TestVerdict(t *testing.T) {
	opts := Options{Alpha: 0.05, Threshold: 0.05}
	for _, tc := range []struct {
		name    string
		d       Delta
		better  int
		verdict Verdict
	}{
		{"small change, significant", Delta{Change: 0.03, PHolm: 0.001}, -1, Same},
		{"small change, not significant", Delta{Change: -0.049, PHolm: 0.5}, -1, Same},
		{"big change, not significant", Delta{Change: 0.3, PHolm: 0.2}, -1, Ambiguous},
		{"time up", Delta{Change: 0.2, PHolm: 0.001}, -1, Slower},
		{"time down", Delta{Change: -0.2, PHolm: 0.001}, -1, Faster},
		{"rate up", Delta{Change: 0.2, PHolm: 0.001}, 1, Faster},
		{"rate down", Delta{Change: -0.2, PHolm: 0.001}, 1, Slower},
		{"at the threshold", Delta{Change: 0.05, PHolm: 0.01}, -1, Slower},
		{"p at alpha", Delta{Change: 0.2, PHolm: 0.05}, -1, Ambiguous},
		{"invalid wins", Delta{Change: -0.5, PHolm: 0.001, Reasons: []string{"rel-err"}}, -1, Invalid},
	} {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.verdict, verdict(&tc.d, tc.better, opts))
		})
	}
}

func TestLabels(t *testing.T) {
	assert.Equal(t, []string{"a.txt", "b.txt"}, Labels([]string{"x/a.txt", "y/b.txt"}))
	assert.Equal(t, []string{"x/zbench.txt", "y/zbench.txt"}, Labels([]string{"base/x/zbench.txt", "base/y/zbench.txt"}))
	assert.Equal(t, []string{"a.txt", "a.txt"}, Labels([]string{"a.txt", "./a.txt"}), "the same file twice stays as it is")
	assert.Equal(t, []string{"ebc0a7df17ae", "worktree"}, Labels([]string{"ebc0a7df17ae", "worktree"}))
}

func parse(t *testing.T, name, text string) *results.File {
	t.Helper()
	f, err := results.Parse(strings.NewReader(text), name)
	require.NoError(t, err)
	return f
}

// TestRunSmallSamples: three runs a side can never reach significance
// after correction, so a large change is ambiguous, never slower.
func TestRunSmallSamples(t *testing.T) {
	lines := func(ns ...int) string {
		var b strings.Builder
		for _, v := range ns {
			fmt.Fprintf(&b, "BenchmarkX/dev=cpu/dtype=f32-2 10 %d ns/op\nBenchmarkY/dev=cpu/dtype=f32-2 10 %d ns/op\n", v, 1000)
		}
		return b.String()
	}
	res, err := Run([]*results.File{parse(t, "a", lines(100, 101, 102)), parse(t, "b", lines(150, 151, 152))}, Options{})
	require.NoError(t, err)
	assert.Equal(t, 1, res.Count(Ambiguous))
	assert.Equal(t, 1, res.Count(Same))
	assert.Equal(t, []string{"X/dev=cpu/dtype=f32-2"}, res.With(Ambiguous, false))
	assert.Equal(t, 2, res.Comparisons)
	s := res.Summaries[0]
	assert.Equal(t, 2, s.N)
	assert.InDelta(t, math.Sqrt(151.0/101), s.Geomean, 1e-12)
}

func TestRunThreeFiles(t *testing.T) {
	f := func(name string, v int) *results.File {
		var b strings.Builder
		for i := range 8 {
			fmt.Fprintf(&b, "BenchmarkX/dev=cpu/dtype=f32-2 10 %d ns/op\n", v+i)
		}
		return parse(t, name, b.String())
	}
	res, err := Run([]*results.File{f("base", 1000), f("same", 1001), f("slow", 1500)}, Options{})
	require.NoError(t, err)
	require.Len(t, res.Summaries, 2)
	assert.Equal(t, 1, res.Summaries[0].Counts[Same])
	assert.Equal(t, 1, res.Summaries[1].Counts[Slower])
	assert.Equal(t, []string{"X/dev=cpu/dtype=f32-2 (slow)"}, res.With(Slower, false))
	var out strings.Builder
	require.NoError(t, res.Write(&out, Text))
	assert.Contains(t, out.String(), "same vs base: 1 same")
	assert.Contains(t, out.String(), "slow vs base: 1 slower")
}

func TestParseFormatAndVerdict(t *testing.T) {
	for _, s := range []string{"text", "markdown", "csv", "json"} {
		f, err := ParseFormat(s)
		require.NoError(t, err)
		assert.Equal(t, Format(s), f)
	}
	_, err := ParseFormat("html")
	require.ErrorContains(t, err, `unknown format "html"`)
	for _, v := range Verdicts {
		got, err := ParseVerdict(string(v))
		require.NoError(t, err)
		assert.Equal(t, v, got)
	}
	_, err = ParseVerdict("worse")
	require.ErrorContains(t, err, `unknown verdict "worse"`)
}

func TestOptionsErrors(t *testing.T) {
	a := parse(t, "a", "BenchmarkX-2 1 1 ns/op\n")
	for _, tc := range []struct {
		opts Options
		want string
	}{
		{Options{Alpha: 2}, "alpha 2 is outside (0, 1)"},
		{Options{Threshold: -1}, "threshold -1 is outside"},
		{Options{Confidence: 1}, "confidence 1 is outside"},
		{Options{Tolerance: map[string]float64{"f32": -1}}, "tolerance f32=-1 is not a positive number"},
		{Options{Tolerance: map[string]float64{"fp32": 1e-3}}, `tolerance of unknown dtype "fp32" (known: f32, tf32, f16, bf16, mixed, int8, e4m3, e5m2, fp8, w8a16, q8_0, w4a16, nf4)`},
	} {
		_, err := Run([]*results.File{a, a}, tc.opts)
		require.ErrorContains(t, err, tc.want)
		assert.NotContains(t, err.Error(), "compare:", "the command names itself; the package does not")
	}
	_, err := Run([]*results.File{a}, Options{})
	require.ErrorContains(t, err, "need at least two files")
}

// TestRunCrossHardware: two files from different CPUs are compared, but
// every verdict is marked, the difference is shown above the tables, and
// With leaves the cross-hardware slow-down out unless asked.
func TestRunCrossHardware(t *testing.T) {
	f := func(name, cpu, blas string, v int) *results.File {
		var b strings.Builder
		fmt.Fprintf(&b, "cpu: %s\nblas: %s\ngo: go1.26.8\nzbench-commit: %s\ncpu-bandwidth-gbps: 2%d\n", cpu, blas, name, v%7)
		for i := range 8 {
			fmt.Fprintf(&b, "BenchmarkX/dev=cpu/dtype=f32-2 10 %d ns/op\n", v+i)
		}
		return parse(t, name, b.String())
	}
	intel, amd := "Intel(R) Xeon(R) Processor", "AMD EPYC"
	for _, tc := range []struct {
		name     string
		newer    *results.File
		crossHW  bool
		settings []results.Setting
	}{
		{"same machine", f("head", intel, "gonum", 1500), false, nil},
		{"other BLAS", f("head", intel, "openblas", 1500), false,
			[]results.Setting{{Key: "blas", Base: "gonum", Other: "openblas"}}},
		{"other CPU", f("head", amd, "openblas", 1500), true,
			[]results.Setting{{Key: "cpu", Base: intel, Other: amd, Hardware: true}, {Key: "blas", Base: "gonum", Other: "openblas"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res, err := Run([]*results.File{f("base", intel, "gonum", 1000), tc.newer}, Options{})
			require.NoError(t, err)
			assert.Equal(t, tc.settings, res.Summaries[0].Environment)
			assert.Equal(t, tc.crossHW, res.CrossHardware())
			assert.Equal(t, tc.crossHW, res.Tables[0].Rows[0].Deltas[0].CrossHardware)
			assert.Equal(t, 1, res.Count(Slower), "the verdict itself stands")
			assert.Equal(t, []string{"X/dev=cpu/dtype=f32-2"}, res.With(Slower, true))
			if tc.crossHW {
				assert.Empty(t, res.With(Slower, false), "a cross-hardware slow-down is not the code's")
			} else {
				assert.Equal(t, []string{"X/dev=cpu/dtype=f32-2"}, res.With(Slower, false))
			}
			for _, format := range []Format{Text, Markdown, JSON, CSV} {
				var out strings.Builder
				require.NoError(t, res.Write(&out, format))
				s := out.String()
				switch {
				case tc.crossHW && (format == Text || format == Markdown):
					assert.Contains(t, s, "DIFFERENT HARDWARE")
					assert.Contains(t, strings.ToUpper(s), "DIFFERENT HARDWARE:")
					assert.Contains(t, s, "slower"+map[bool]string{true: "**", false: ""}[format == Markdown]+" (cross-hw)")
					assert.Regexp(t, `cpu\s*\|?\s*Intel\(R\) Xeon\(R\) Processor\s*\|?\s*AMD EPYC\s*\|?\s*HARDWARE`, s)
				case tc.crossHW && format == JSON:
					assert.Contains(t, s, `"cross_hardware": true`)
					assert.Contains(t, s, `"other": "AMD EPYC"`)
				case tc.crossHW:
					assert.Contains(t, s, "slower,,,,,false,true,")
				case format == Text || format == Markdown:
					assert.NotContains(t, strings.ToUpper(s), "DIFFERENT HARDWARE")
					assert.NotContains(t, s, "cross-hw")
				}
				if tc.settings != nil && !tc.crossHW && (format == Text || format == Markdown) {
					assert.Contains(t, s, "software only")
					assert.Regexp(t, `blas\s*\|?\s*gonum\s*\|?\s*openblas`, s)
				}
			}
		})
	}
}

// TestAmbiguousAdvice: an ambiguous verdict comes with what it means and
// what to do.
func TestAmbiguousAdvice(t *testing.T) {
	lines := func(ns ...int) string {
		var b strings.Builder
		for _, v := range ns {
			fmt.Fprintf(&b, "BenchmarkX/dev=cpu/dtype=f32-2 10 %d ns/op\n", v)
		}
		return b.String()
	}
	res, err := Run([]*results.File{parse(t, "a", lines(100)), parse(t, "b", lines(150))}, Options{})
	require.NoError(t, err)
	var out strings.Builder
	require.NoError(t, res.Write(&out, Text))
	assert.Contains(t, out.String(), "Ambiguous (1): the median moved by 5% or more, but the runs cannot confirm it at α = 0.05: with 1 and 1 runs no change can be significant (the U test's smallest p, 1, times 1 comparisons is not below α).")
	assert.Contains(t, out.String(), "-count 10")
	assert.Contains(t, out.String(), "zbench calibrate")

	// Enough runs to be significant, but too noisy.
	res, err = Run([]*results.File{parse(t, "a", lines(100, 150, 90, 160, 95, 155, 105, 145)), parse(t, "b", lines(130, 170, 120, 180, 125, 175, 115, 165))}, Options{})
	require.NoError(t, err)
	require.Equal(t, 1, res.Count(Ambiguous))
	out.Reset()
	require.NoError(t, res.Write(&out, Markdown))
	assert.Contains(t, out.String(), "cannot confirm it at α = 0.05: too few runs for this machine's noise. Run more")
}

func TestFilePeak(t *testing.T) {
	for _, tc := range []struct {
		name   string
		config map[string]string
		ok     bool
		want   map[kernels.DType]float64 // GFLOP/s by dtype that FLOPSFor gives
	}{
		{"none", map[string]string{}, false, nil},
		{"bad", map[string]string{"cpu-peak-gflops": "fast"}, false, nil},
		{"f32 only", map[string]string{"cpu-peak-gflops": "402"}, true,
			map[kernels.DType]float64{kernels.F32: 402, kernels.BF16: 402, kernels.I8: 402}},
		{"bf16 and int8", map[string]string{"cpu-peak-gflops": "402", "cpu-peak-gflops-bf16": "805", "cpu-peak-gflops-int8": "1610"}, true,
			map[kernels.DType]float64{kernels.F32: 402, kernels.BF16: 805, kernels.I8: 1610}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, ok := filePeak(tc.config)
			require.Equal(t, tc.ok, ok)
			for dt, gf := range tc.want {
				assert.InDelta(t, gf*1e9, p.FLOPSFor(dt), 1, "%v", dt)
			}
		})
	}
}

// TestAccuracyGate: the gate holds both files' rel-err to the bound the
// newer file's benchmark reports, else the base's; with neither (files
// written before benchmarks reported their bounds) it gates nothing and
// says so; Options.Tolerance overrides the files' bounds.
func TestAccuracyGate(t *testing.T) {
	file := func(name string, relErr, bound float64) *results.File {
		var b strings.Builder
		for i := range 8 {
			fmt.Fprintf(&b, "BenchmarkX/dev=cpu/dtype=f32-2 10 %d ns/op %g rel-err", 1000+i, relErr)
			if bound > 0 {
				fmt.Fprintf(&b, " %g rel-err-bound", bound)
			}
			b.WriteString("\n")
		}
		return parse(t, name, b.String())
	}
	for _, tc := range []struct {
		name        string
		base, newer *results.File
		opts        Options
		bound       float64 // NaN: no gate
		reason      string  // "" for a valid result
		ungated     bool
	}{
		{"within the newer file's bound", file("a", 1e-5, 1e-4), file("b", 5e-5, 1e-4), Options{}, 1e-4, "", false},
		{"past the newer file's bound", file("a", 1e-5, 1e-4), file("b", 3e-4, 1e-4), Options{}, 1e-4,
			"rel-err 0.0003 (base 1e-05) is past the bound 0.0001 (the newer file's rel-err-bound)", false},
		{"the newer file's bound, not the base's", file("a", 1e-5, 1e-3), file("b", 3e-4, 1e-4), Options{}, 1e-4,
			"is past the bound 0.0001 (the newer file's rel-err-bound)", false},
		{"the base past the newer file's bound", file("a", 3e-4, 1e-3), file("b", 1e-5, 1e-4), Options{}, 1e-4,
			"base rel-err 0.0003 is past the bound 0.0001 (the newer file's rel-err-bound)", false},
		{"an old newer file takes the base's bound", file("a", 1e-5, 1e-4), file("b", 3e-4, 0), Options{}, 1e-4,
			"is past the bound 0.0001 (the base's rel-err-bound)", false},
		{"an old base takes the newer file's bound", file("a", 1e-5, 0), file("b", 3e-4, 1e-4), Options{}, 1e-4,
			"is past the bound 0.0001 (the newer file's rel-err-bound)", false},
		{"two old files: no gate", file("a", 1e-5, 0), file("b", 3e-1, 0), Options{}, math.NaN(), "", true},
		{"-tol over two old files", file("a", 1e-5, 0), file("b", 3e-4, 0), Options{Tolerance: map[string]float64{"f32": 2e-4}}, 2e-4,
			"is past the bound 0.0002 (the f32 tolerance asked for)", false},
		{"-tol over the file's bound", file("a", 1e-5, 1e-4), file("b", 3e-4, 1e-4), Options{Tolerance: map[string]float64{"f32": 1e-3}}, 1e-3, "", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res, err := Run([]*results.File{tc.base, tc.newer}, tc.opts)
			require.NoError(t, err)
			d := res.Tables[0].Rows[0].Deltas[0]
			if math.IsNaN(tc.bound) {
				assert.True(t, math.IsNaN(d.GateBound), "bound %v", d.GateBound)
			} else {
				assert.Equal(t, tc.bound, d.GateBound)
			}
			if tc.reason == "" {
				assert.Equal(t, Same, d.Verdict, "%q", d.Reasons)
			} else {
				assert.Equal(t, Invalid, d.Verdict)
				assert.Contains(t, strings.Join(d.Reasons, "; "), tc.reason)
			}
			var out strings.Builder
			require.NoError(t, res.Write(&out, Text))
			if tc.ungated {
				assert.Contains(t, out.String(), "Not gated on accuracy (1 benchmark): a rel-err without a rel-err-bound in either file")
			} else {
				assert.NotContains(t, out.String(), "Not gated")
			}
			out.Reset()
			require.NoError(t, res.Write(&out, JSON))
			if math.IsNaN(tc.bound) {
				assert.Contains(t, out.String(), `"rel_err_bound": null`)
			} else {
				assert.Contains(t, out.String(), fmt.Sprintf(`"rel_err_bound": %g`, tc.bound))
			}
		})
	}
}

// TestRunNonFinite: a benchmark with a NaN value cannot be ranked by the U
// test; it is unmatched, not compared.
func TestRunNonFinite(t *testing.T) {
	text := func(x string) string {
		return "BenchmarkX-2 1 " + x + " ns/op\nBenchmarkX-2 1 100 ns/op\nBenchmarkY-2 1 100 ns/op\nBenchmarkY-2 1 101 ns/op\n"
	}
	res, err := Run([]*results.File{parse(t, "a", text("100")), parse(t, "b", text("NaN"))}, Options{})
	require.NoError(t, err)
	assert.Equal(t, []Unmatched{{ID: "X-2", In: []string{"a"}, MissingFrom: []string{"b"}}}, res.Unmatched)
	require.Len(t, res.Tables, 1)
	require.Len(t, res.Tables[0].Rows, 1)
	assert.Equal(t, "Y-2", res.Tables[0].Rows[0].ID)
}
