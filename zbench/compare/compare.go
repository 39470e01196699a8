// Package compare compares files of benchmark results, benchstat-style,
// and gives each benchmark a verdict a pull request can act on.
//
// The first file is the base; every other file is compared with it,
// benchmark by benchmark (matched by name, including the -GOMAXPROCS
// suffix). Tables are grouped by workload, /dev and /dtype. For each
// benchmark the metric (sec/op by default) is summarised by its median
// with a distribution-free confidence interval, and the two samples are
// compared with the Mann–Whitney U test (golang.org/x/perf/benchmath, as
// benchstat does). On top of that:
//
//   - Verdict: faster or slower needs a change of at least Threshold in
//     the median and a p-value below Alpha after Holm–Bonferroni
//     correction across every benchmark compared; a change below the
//     threshold is the same; a change at or above the threshold that the
//     test cannot confirm is ambiguous (more runs needed).
//   - Accuracy gate: a result whose rel-err is past its benchmark's bound
//     is invalid, and its speed-up is not counted. A benchmark writes the
//     bound it applied into its result as the rel-err-bound metric
//     (zbench.Bench.MaxRelErr), so the benchmark, not compare, decides what
//     it accepts. The gate takes the newer file's bound, or the base's
//     where the newer file reports none (a file written before benchmarks
//     reported their bounds, or a peer's), and holds both files' rel-err
//     to it. A benchmark for which neither file reports a bound is not
//     gated on accuracy: Delta.GateBound is NaN and the text counts it.
//     Options.Tolerance, where it names the benchmark's dtype, overrides
//     the files' bounds.
//   - Roofline: %peak, as reported by the benchmark or derived from its
//     GFLOP/s and GB/s and the device's peak in the file's config lines;
//     a result above the device's peak is flagged and invalid.
//   - Unmatched benchmarks are listed and left out of the geomean.
//   - Environment: the files' configuration lines are compared
//     (results.DiffConfig). When the hardware differs (CPU or GPU model,
//     cores, clocks) every verdict of that file is marked cross-hardware:
//     it compares machines, not code.
package compare

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"golang.org/x/perf/benchmath"
	"golang.org/x/perf/benchunit"

	"github.com/zbench/zbench/kernels"
	"github.com/zbench/zbench/zbench/results"
	"github.com/zbench/zbench/zbench/roofline"
)

// A Verdict is the outcome of comparing one benchmark in two files.
type Verdict string

// The verdicts, from the point of view of the newer file.
const (
	Faster    Verdict = "faster"    // significantly better by at least the threshold
	Slower    Verdict = "slower"    // significantly worse by at least the threshold
	Same      Verdict = "same"      // a change below the threshold
	Ambiguous Verdict = "ambiguous" // a change at or above the threshold that is not significant
	Invalid   Verdict = "invalid"   // failed the accuracy gate or above the device's peak
)

// Verdicts lists every verdict, in the order summaries print them.
var Verdicts = []Verdict{Slower, Invalid, Ambiguous, Faster, Same}

// ParseVerdict returns the verdict named s.
func ParseVerdict(s string) (Verdict, error) {
	for _, v := range Verdicts {
		if string(v) == s {
			return v, nil
		}
	}
	return "", fmt.Errorf("unknown verdict %q (want one of slower, invalid, ambiguous, faster, same)", s)
}

// Options control a comparison. The zero value of a field takes the
// default in its comment.
type Options struct {
	// Metric is the (tidied) unit compared: "sec/op" by default.
	Metric string
	// Alpha is the significance level of the U test after correction:
	// 0.05 by default.
	Alpha float64
	// Threshold is the smallest relative change of the median that
	// counts as faster or slower: 0.05 (5%) by default.
	Threshold float64
	// Confidence is the level of the medians' intervals: 0.95 by default.
	Confidence float64
	// Tolerance maps a dtype name ("f32", "bf16") to the largest rel-err
	// accepted for every benchmark of that dtype, overriding the
	// rel-err-bound the files report.
	Tolerance map[string]float64
}

func (o Options) withDefaults() (Options, error) {
	if o.Metric == "" {
		o.Metric = "sec/op"
	}
	_, o.Metric = benchunit.Tidy(1, o.Metric) // ns/op is sec/op, as benchfmt reads it
	if o.Alpha == 0 {
		o.Alpha = 0.05
	}
	if o.Threshold == 0 {
		o.Threshold = 0.05
	}
	if o.Confidence == 0 {
		o.Confidence = 0.95
	}
	switch {
	case !(o.Alpha > 0 && o.Alpha < 1):
		return o, fmt.Errorf("alpha %v is outside (0, 1)", o.Alpha)
	case !(o.Threshold > 0 && o.Threshold < 10):
		return o, fmt.Errorf("threshold %v is outside (0, 10)", o.Threshold)
	case !(o.Confidence > 0 && o.Confidence < 1):
		return o, fmt.Errorf("confidence %v is outside (0, 1)", o.Confidence)
	}
	for k, v := range o.Tolerance {
		if !slices.Contains(DTypes, k) {
			return o, fmt.Errorf("tolerance of unknown dtype %q (known: %s)", k, strings.Join(DTypes, ", "))
		}
		if !(v > 0) || math.IsInf(v, 0) {
			return o, fmt.Errorf("tolerance %s=%v is not a positive number", k, v)
		}
	}
	return o, nil
}

// DTypes are the /dtype values of the benchmarks, the keys that
// Options.Tolerance may have.
var DTypes = []string{"f32", "tf32", "f16", "bf16", "mixed", "int8", "e4m3", "e5m2", "fp8", "w8a16", "q8_0", "w4a16", "nf4"}

// Units the accuracy gate reads.
const (
	unitRelErr = "rel-err"
	// unitBound is the rel-err bound a benchmark applied to its result.
	unitBound = "rel-err-bound"
)

// A Cell is one benchmark in one file.
type Cell struct {
	// File is the path of the file the values come from.
	File string
	// N is the number of values of the metric.
	N int
	// Values are the metric's values, in the order they were read.
	Values []float64 `json:"-"`
	// Summary is the median of Values with its confidence interval.
	Summary benchmath.Summary
	// RelErr is the largest rel-err reported, NaN when none was.
	RelErr float64
	// Bound is the largest rel-err-bound reported: the accuracy the
	// benchmark required of itself; NaN when none was.
	Bound float64
	// PctPeak is the median %peak, reported or derived (PeakDerived);
	// NaN when neither is possible.
	PctPeak     float64
	PeakDerived bool
	// AbovePeak says why a value is above the device's peak ("" when
	// none is).
	AbovePeak string

	sample *benchmath.Sample
}

// A Delta is the comparison of one benchmark in one newer file with the
// base.
type Delta struct {
	Cell
	// Change is new median / base median − 1.
	Change float64
	// P is the U test's p-value, and PHolm the Holm–Bonferroni adjusted
	// one that the verdict uses.
	P, PHolm float64
	Verdict  Verdict
	// GateBound is the rel-err bound the accuracy gate applied (see the
	// package doc), NaN when it applied none. Cell.Bound is the one the
	// newer file reports.
	GateBound float64
	// Reasons explain an invalid verdict.
	Reasons []string
	// CrossHardware is true when the file ran on other hardware than the
	// base: the change is the machines', not only the code's.
	CrossHardware bool
}

// A Row is one benchmark in every file.
type Row struct {
	// ID is the full benchmark name (with -GOMAXPROCS), Name its
	// distinguishing part within the table: the name without the
	// workload, dev and dtype.
	ID, Name string
	// DType is the benchmark's /dtype key.
	DType string
	Base  Cell
	// Deltas has one entry per newer file; nil where the benchmark is
	// missing from that file (see Result.Unmatched).
	Deltas []*Delta
}

// A Table is the rows of one workload, device and dtype.
type Table struct {
	Workload, Dev, DType string
	Rows                 []*Row
}

// Title is "Workload · dev=… · dtype=…".
func (t *Table) Title() string {
	parts := []string{t.Workload}
	if t.Dev != "" {
		parts = append(parts, "dev="+t.Dev)
	}
	if t.DType != "" {
		parts = append(parts, "dtype="+t.DType)
	}
	return strings.Join(parts, " · ")
}

// An Unmatched benchmark is in some files but not in all of them (or has
// no value of the metric in some, or one that is NaN or ±Inf).
type Unmatched struct {
	ID string `json:"benchmark"`
	// In and MissingFrom are file paths.
	In          []string `json:"in"`
	MissingFrom []string `json:"missing_from"`
}

// A Summary is the totals of one newer file against the base.
type Summary struct {
	File string
	// Counts is the number of benchmarks of each verdict.
	Counts map[Verdict]int
	// Geomean is the geometric mean of new/base medians over the
	// benchmarks compared, invalid ones left out; NaN when none is left.
	Geomean float64
	// N is the number of benchmarks in Geomean.
	N int
	// Environment lists the configuration lines that differ from the
	// base's (results.DiffConfig), hardware first.
	Environment []results.Setting
}

// CrossHardware reports whether the file ran on other hardware than the
// base: whether any of Environment is hardware.
func (s Summary) CrossHardware() bool { return results.CrossHardware(s.Environment) }

// A Result is the outcome of Run.
type Result struct {
	Files   []string
	Options Options
	// Better is +1 when higher values of the metric are better, −1
	// when lower ones are.
	Better    int
	Tables    []*Table
	Summaries []Summary
	Unmatched []Unmatched
	// Comparisons is the number of tests the Holm–Bonferroni correction
	// spans.
	Comparisons int
}

// Count returns how many benchmarks got verdict v, over every newer file.
func (r *Result) Count(v Verdict) int {
	n := 0
	for _, s := range r.Summaries {
		n += s.Counts[v]
	}
	return n
}

// CrossHardware reports whether any newer file ran on other hardware than
// the base.
func (r *Result) CrossHardware() bool {
	return slices.ContainsFunc(r.Summaries, Summary.CrossHardware)
}

// With returns the IDs of the benchmarks with verdict v (with the file,
// when there are several newer files), in table order. Unless crossHW is
// true, verdicts between different hardware are left out of faster,
// slower and ambiguous: they say nothing of the code. Invalid results are
// always in, since accuracy does not depend on the machine.
func (r *Result) With(v Verdict, crossHW bool) []string {
	var ids []string
	for _, t := range r.Tables {
		for _, row := range t.Rows {
			for j, d := range row.Deltas {
				if d == nil || d.Verdict != v || (d.CrossHardware && !crossHW && v != Invalid) {
					continue
				}
				id := row.ID
				if len(r.Files) > 2 {
					id += " (" + r.Files[j+1] + ")"
				}
				ids = append(ids, id)
			}
		}
	}
	return ids
}

// Run compares files[1:] with files[0].
func Run(files []*results.File, opts Options) (*Result, error) {
	if len(files) < 2 {
		return nil, errors.New("need at least two files, the base and one to compare with it")
	}
	opts, err := opts.withDefaults()
	if err != nil {
		return nil, err
	}
	res := &Result{Options: opts}
	for _, f := range files {
		res.Files = append(res.Files, f.Path)
	}
	res.Better = files[0].Better(opts.Metric)
	if res.Better == 0 {
		return nil, fmt.Errorf("%s: no Unit line says whether higher or lower %s is better: add \"Unit %s better=higher\" (or lower)", files[0].Path, opts.Metric, opts.Metric)
	}

	// How each newer file's environment differs from the base's.
	envs := make([][]results.Setting, len(files)-1)
	cross := make([]bool, len(files)-1)
	for i, f := range files[1:] {
		envs[i] = results.DiffConfig(files[0], f)
		cross[i] = results.CrossHardware(envs[i])
	}

	// Every benchmark ID, in order of first appearance over the files.
	var ids []string
	seen := map[string]bool{}
	for _, f := range files {
		for _, b := range f.Benchmarks {
			if !seen[b.ID()] {
				seen[b.ID()] = true
				ids = append(ids, b.ID())
			}
		}
	}
	// The base file says how the metric is distributed (assume=exact).
	assume := files[0].Units.GetAssumption(opts.Metric)
	found := false
	tables := map[[3]string]*Table{}
	var deltas []*Delta
	for _, id := range ids {
		// The benchmark in each file, nil where it has no value of the
		// metric or a value that is not a finite number (NaN, ±Inf), which
		// no measurement can be and the U test cannot rank.
		bs := make([]*results.Benchmark, len(files))
		var in, missing []string
		var bench *results.Benchmark
		for i, f := range files {
			if b := f.Lookup(id); b != nil && finiteValues(b.Values[opts.Metric]) {
				in = append(in, f.Path)
				bench, bs[i] = b, b
			} else {
				missing = append(missing, f.Path)
			}
		}
		if len(missing) > 0 {
			res.Unmatched = append(res.Unmatched, Unmatched{ID: id, In: in, MissingFrom: missing})
		}
		if bs[0] == nil || len(in) < 2 {
			continue
		}
		found = true
		row := &Row{ID: id, Name: bench.Rest("dev", "dtype"), DType: bench.Get("dtype")}
		if bench.Procs != 0 {
			row.Name += "-" + strconv.Itoa(bench.Procs)
		}
		row.Base = newCell(files[0], bs[0], opts)
		for i, f := range files[1:] {
			b := bs[i+1]
			if b == nil {
				row.Deltas = append(row.Deltas, nil)
				continue
			}
			d := &Delta{Cell: newCell(f, b, opts), CrossHardware: cross[i]}
			d.Change = d.Summary.Center/row.Base.Summary.Center - 1
			d.P = assume.Compare(row.Base.sample, d.sample).P
			d.GateBound, d.Reasons = gate(row, &d.Cell, opts)
			row.Deltas = append(row.Deltas, d)
			deltas = append(deltas, d)
		}
		key := [3]string{bench.Workload, bench.Get("dev"), bench.Get("dtype")}
		t := tables[key]
		if t == nil {
			t = &Table{Workload: key[0], Dev: key[1], DType: key[2]}
			tables[key] = t
			res.Tables = append(res.Tables, t)
		}
		t.Rows = append(t.Rows, row)
	}
	if !found {
		return nil, fmt.Errorf("no benchmark of %s has %s in %s and in another file: nothing to compare", files[0].Path, opts.Metric, files[0].Path)
	}
	res.Comparisons = holm(deltas)
	for _, d := range deltas {
		d.Verdict = verdict(d, res.Better, opts)
	}
	res.Summaries = summarize(res, files[1:], envs)
	return res, nil
}

// finiteValues reports whether vals has values and all of them are finite.
func finiteValues(vals []float64) bool {
	return len(vals) > 0 && !slices.ContainsFunc(vals, func(v float64) bool { return math.IsNaN(v) || math.IsInf(v, 0) })
}

// newCell summarises benchmark b of file f.
func newCell(f *results.File, b *results.Benchmark, opts Options) Cell {
	vals := b.Values[opts.Metric]
	c := Cell{File: f.Path, N: len(vals), Values: vals, RelErr: math.NaN(), Bound: math.NaN(), PctPeak: math.NaN()}
	c.sample = benchmath.NewSample(slices.Clone(vals), &benchmath.DefaultThresholds)
	c.Summary = f.Units.GetAssumption(opts.Metric).Summary(c.sample, opts.Confidence)
	if re := b.Values[unitRelErr]; len(re) > 0 {
		c.RelErr = slices.Max(re)
	}
	if bound := b.Values[unitBound]; len(bound) > 0 {
		c.Bound = slices.Max(bound)
	}
	if pk := b.Values["%peak"]; len(pk) > 0 {
		c.PctPeak = MedianValue(pk)
		if m := slices.Max(pk); m > 100 {
			c.AbovePeak = fmt.Sprintf("%.4g%% of the device's peak reported", m)
		}
		return c
	}
	peak, ok := filePeak(b.Config)
	if !ok {
		return c
	}
	dt := peakDType(b.Get("dtype"))
	gflops, gbs := b.Values["GFLOP/s"], b.Values["GB/s"]
	if len(gflops) == 0 && len(gbs) == 0 {
		return c
	}
	work := func(i int) roofline.Workload {
		w := roofline.Workload{DType: dt}
		if i < len(gflops) {
			w.FLOPs = gflops[i] * 1e9
		}
		if i < len(gbs) {
			w.Bytes = gbs[i] * 1e9
		}
		return w
	}
	var frac []float64
	for i := range max(len(gflops), len(gbs)) {
		w := work(i)
		frac = append(frac, 100*peak.Fraction(w, time.Second))
		if err := peak.Check(w, time.Second); err != nil && c.AbovePeak == "" {
			c.AbovePeak = fmt.Sprintf("%.4g GFLOP/s is above the %s peak of %.4g GFLOP/s (%s)",
				w.FLOPs/1e9, peak.Device, peak.FLOPSFor(dt)/1e9, peak.Source)
		}
	}
	c.PctPeak, c.PeakDerived = MedianValue(frac), true
	return c
}

// filePeak is the device peak described by a file's config lines: a GPU
// known to zbench's table ("gpu: NVIDIA H100 80GB HBM3"), or a CPU with
// cpu-peak-gflops (cpu-peak-gflops-bf16 and -int8 where the CPU multiplies
// those faster, and cpu-bandwidth-gbps) lines. CPU results are checked
// against the arithmetic peak only, since their working sets may sit in a
// cache of unknown size.
func filePeak(config map[string]string) (roofline.Peak, bool) {
	if g := config["gpu"]; g != "" {
		return roofline.GPU(g)
	}
	gf, err := strconv.ParseFloat(config["cpu-peak-gflops"], 64)
	if err != nil || gf <= 0 {
		return roofline.Peak{}, false
	}
	p := roofline.Peak{Device: "CPU", FLOPS: map[kernels.DType]float64{kernels.F32: gf * 1e9},
		CacheBytes: math.MaxInt64, Source: "cpu-peak-gflops config line"}
	for _, dt := range []kernels.DType{kernels.BF16, kernels.I8} {
		if f, err := strconv.ParseFloat(config["cpu-peak-gflops-"+dt.String()], 64); err == nil && f > 0 {
			p.FLOPS[dt] = f * 1e9
		}
	}
	if bw, err := strconv.ParseFloat(config["cpu-bandwidth-gbps"], 64); err == nil {
		p.Bandwidth = bw * 1e9
	}
	return p, true
}

// peakDType is the dtype whose peak bounds a benchmark of the named dtype.
func peakDType(name string) kernels.DType {
	switch name {
	case "tf32", "mixed":
		return kernels.F32 // the table's F32 entry is already the TF32 rate
	}
	dt, err := kernels.ParseDType(name)
	if err != nil {
		return kernels.F32
	}
	return dt
}

// gate returns the rel-err bound that applies to d and the base (NaN for
// none) and why d fails the accuracy gate or the roofline check, on
// either side of the comparison; no reasons when it passes.
func gate(row *Row, d *Cell, opts Options) (float64, []string) {
	bound, from := accuracyBound(row, d, opts)
	var why []string
	switch {
	case math.IsNaN(bound):
	case d.RelErr > bound:
		why = append(why, fmt.Sprintf("rel-err %.3g (base %.3g) is past the bound %.3g (%s)", d.RelErr, row.Base.RelErr, bound, from))
	case row.Base.RelErr > bound:
		why = append(why, fmt.Sprintf("base rel-err %.3g is past the bound %.3g (%s)", row.Base.RelErr, bound, from))
	}
	if d.AbovePeak != "" {
		why = append(why, "above peak: "+d.AbovePeak)
	}
	if row.Base.AbovePeak != "" {
		why = append(why, "base above peak: "+row.Base.AbovePeak)
	}
	return bound, why
}

// accuracyBound returns the rel-err bound of a comparison and where it
// comes from: opts.Tolerance's for the row's dtype, else the newer file's
// rel-err-bound, else the base's; NaN when there is none.
func accuracyBound(row *Row, d *Cell, opts Options) (float64, string) {
	if tol, ok := opts.Tolerance[row.DType]; ok {
		return tol, "the " + row.DType + " tolerance asked for"
	}
	if !math.IsNaN(d.Bound) {
		return d.Bound, "the newer file's rel-err-bound"
	}
	if !math.IsNaN(row.Base.Bound) {
		return row.Base.Bound, "the base's rel-err-bound"
	}
	return math.NaN(), ""
}

// holm sets PHolm of every delta: the Holm–Bonferroni step-down adjusted
// p-values, which keep the chance of any false "faster" or "slower" among
// all the benchmarks compared at most alpha. It returns the number of
// tests.
func holm(ds []*Delta) int {
	order := make([]*Delta, len(ds))
	copy(order, ds)
	sort.SliceStable(order, func(i, j int) bool { return order[i].P < order[j].P })
	m := len(order)
	running := 0.0
	for i, d := range order {
		running = math.Max(running, math.Min(1, float64(m-i)*d.P))
		d.PHolm = running
	}
	return m
}

// verdict decides one delta; better is the metric's direction.
func verdict(d *Delta, better int, opts Options) Verdict {
	switch {
	case len(d.Reasons) > 0:
		return Invalid
	case math.Abs(d.Change) < opts.Threshold:
		return Same
	case !(d.PHolm < opts.Alpha):
		return Ambiguous
	case d.Change*float64(better) > 0:
		return Faster
	}
	return Slower
}

// summarize totals each newer file; envs are their environments'
// differences from the base's.
func summarize(res *Result, files []*results.File, envs [][]results.Setting) []Summary {
	sums := make([]Summary, len(files))
	for j, f := range files {
		s := Summary{File: f.Path, Counts: map[Verdict]int{}, Environment: envs[j]}
		logSum := 0.0
		for _, t := range res.Tables {
			for _, row := range t.Rows {
				d := row.Deltas[j]
				if d == nil {
					continue
				}
				s.Counts[d.Verdict]++
				if d.Verdict == Invalid || d.Summary.Center <= 0 || row.Base.Summary.Center <= 0 {
					continue
				}
				logSum += math.Log(d.Summary.Center / row.Base.Summary.Center)
				s.N++
			}
		}
		s.Geomean = math.NaN()
		if s.N > 0 {
			s.Geomean = math.Exp(logSum / float64(s.N))
		}
		sums[j] = s
	}
	return sums
}
