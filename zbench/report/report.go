// Package report writes a report of benchmark results and training runs: a
// self-contained HTML page and a markdown file with tables and plots, from
// any set of files of Go benchmark output (zbench's baselines, a fresh run,
// a peer's output such as PyTorch's) and of training logs (package
// trainlog), either or both.
//
// The report plots throughput and latency against batch size (benchmarks
// with a batch= key; the batch of best throughput of each line below the
// first), latency against sequence length (seq=), matrix multiply
// throughput against size (m=n=k), and, as bars, the speed-up of each of
// our files over each peer file of the same machine. Its tables give every
// speed figure beside its accuracy (rel-err). Every figure is a median with
// benchstat's confidence interval (compare.Median), so that the report and
// benchstat agree; the speed-ups' p-values and verdicts are package
// compare's, with the peer's file as the base.
//
// For results of the load generator (zbench load), it plots the
// server-scenario runs (rate=) against request rate, a line per file and
// metric: TTFT and TPOT p50, p90 and p99 with the files' bounds
// (loadgen-ttft-bound, loadgen-tpot-bound) as horizontal lines, output
// tok/s, and goodput beside req/s; a filled marker is a run that passed
// its bounds, an open one a run that failed. A table per file gives every
// run, of the scenarios without a rate too.
//
// A file is a peer's when its config has an impl: line that does not start
// with "zbench" (the PyTorch peer prints "impl: torch-1.13.0a0"); every
// other file is ours. Files are labelled by the last two elements of their
// path without extension: "cpu-intel-xeon-f6-2core-amx/zbench".
//
// Training logs are labelled the same way ("bert-train-curve/fp8"). The
// report plots their loss against step, one line per log, and tables each
// log's number of steps, first and last loss and the mean loss of its last
// 10 steps; given two or more logs, it also gives each log's last-10 mean
// relative to that of the first log, so that a reader sees how close, say,
// an fp8 run ends to a bf16 one.
package report

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/zbench/zbench/zbench/results"
	"github.com/zbench/zbench/zbench/trainlog"
)

// DefaultTitle is the title of a report whose Options give none.
const DefaultTitle = "zbench benchmark report"

// File names of a report in its directory; each plot adds NAME.svg and
// NAME.png.
const (
	HTMLFile     = "index.html"
	MarkdownFile = "report.md"
)

// Options configure a report.
type Options struct {
	// Title heads the report; empty means DefaultTitle.
	Title string
}

// ErrNoFiles is returned by Write when it is given neither benchmark files
// nor training logs.
var ErrNoFiles = errors.New("no benchmark files or training logs to report on")

// Write writes the report of benchmark files and training logs into dir,
// which it creates if needed: HTMLFile (with every plot inline as SVG),
// MarkdownFile (which links the PNG files) and NAME.svg and NAME.png for
// each plot. Either files or logs may be empty, not both. Files already in
// dir under other names are left alone. It returns the paths it wrote, the
// HTML page and the markdown first.
//
// Benchmarks are matched across files by results.Benchmark.ID. A plot
// that would be empty is left out, and the report says why. The loss
// curves of logs are in one plot, "loss-step", and the last-10 means of
// logs are compared with that of logs[0].
func Write(dir string, files []*results.File, logs []*trainlog.Log, opts Options) ([]string, error) {
	if len(files) == 0 && len(logs) == 0 {
		return nil, ErrNoFiles
	}
	for i, f := range files {
		if f == nil {
			return nil, fmt.Errorf("file %d is nil: %w", i, ErrNoFiles)
		}
	}
	for i, l := range logs {
		if l == nil || len(l.Points) == 0 {
			return nil, fmt.Errorf("training log %d is nil or empty: %w", i, ErrNoFiles)
		}
	}
	doc, err := build(files, logs, opts)
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	type output struct {
		name string
		data []byte
	}
	page, err := doc.html()
	if err != nil {
		return nil, err
	}
	outs := []output{
		{HTMLFile, page},
		{MarkdownFile, doc.markdown()},
	}
	for _, f := range doc.figures {
		outs = append(outs, output{f.name + ".svg", f.svg}, output{f.name + ".png", f.png})
	}
	paths := make([]string, 0, len(outs))
	for _, o := range outs {
		path := filepath.Join(dir, o.name)
		if err := os.WriteFile(path, o.data, 0o644); err != nil {
			return paths, err
		}
		paths = append(paths, path)
	}
	return paths, nil
}

// A document is a report before it is written as markdown or HTML.
type document struct {
	title    string
	intro    []string
	sections []*section
	// figures are every figure of the sections, in order.
	figures []*figure
}

// A section is a heading and what follows it.
type section struct {
	level   int // 2 for ##
	id      string
	heading string
	blocks  []block
}

// A block is one of a paragraph, a table or a figure.
type block struct {
	// para is text where `x` marks code.
	para  string
	table *table
	fig   *figure
}

// A table has a header row and rows of cells; right marks the columns of
// numbers.
type table struct {
	head  []string
	right []bool
	rows  [][]string
}

// builder assembles a document.
type builder struct {
	doc   *document
	ids   map[string]int
	names map[string]int
}

// section starts a section.
func (b *builder) section(level int, heading string) *section {
	id := slug(heading)
	b.ids[id]++
	if n := b.ids[id]; n > 1 {
		id += "-" + strconv.Itoa(n)
	}
	s := &section{level: level, id: id, heading: heading}
	b.doc.sections = append(b.doc.sections, s)
	return s
}

// figure adds f to s, renaming it if another figure has its name.
func (b *builder) figure(s *section, f *figure) {
	b.names[f.name]++
	if n := b.names[f.name]; n > 1 {
		f.name += "-" + strconv.Itoa(n)
	}
	b.doc.figures = append(b.doc.figures, f)
	s.blocks = append(s.blocks, block{fig: f})
}

func (s *section) para(format string, args ...any) {
	s.blocks = append(s.blocks, block{para: fmt.Sprintf(format, args...)})
}

func (s *section) table(t *table) { s.blocks = append(s.blocks, block{table: t}) }

// build analyses files and logs into a document: the benchmarks' sources,
// plots and speed-ups, then the training loss, then every benchmark result.
func build(files []*results.File, logs []*trainlog.Log, opts Options) (*document, error) {
	title := opts.Title
	if title == "" {
		title = DefaultTitle
	}
	b := &builder{doc: &document{title: title}, ids: map[string]int{}, names: map[string]int{}}
	srcs := newSources(files)
	short := sameMachine(srcs)
	name := func(s *source) string {
		if short {
			return s.short
		}
		return s.label
	}
	if len(srcs) > 0 {
		b.doc.intro = append(b.doc.intro,
			fmt.Sprintf("Benchmark results of %d %s. Every figure is the median of the runs, with the 95%% confidence interval of the median as benchstat computes it (± the larger distance to its bounds; ∞ for fewer than 6 runs); rel-err is the accuracy against the reference measured in the same benchmark.", len(srcs), plural(len(srcs), "file", "files")))
		if err := b.benchmarks(srcs, short, name); err != nil {
			return nil, err
		}
	}
	if len(logs) > 0 {
		b.doc.intro = append(b.doc.intro,
			fmt.Sprintf("Training loss of %d %s, each a JSON line per logged step.", len(logs), plural(len(logs), "log", "logs")))
		if err := b.training(logs); err != nil {
			return nil, err
		}
	}
	if len(srcs) > 0 {
		b.results(srcs, name)
	}
	return b.doc, nil
}

// benchmarks adds the sections on benchmark files: their sources, the line
// plots and the speed-ups against peers. short is whether the sources are
// named by file name alone in legends; name names a source in tables.
func (b *builder) benchmarks(srcs []*source, short bool, name func(*source) string) error {
	// Sources.
	s := b.section(2, "Sources")
	t := &table{head: []string{"File", "Role", "impl", "BLAS", "Commit", "Benchmarks", "Path"}, right: []bool{false, false, false, false, false, true, false}}
	for _, src := range srcs {
		impl := src.impl
		if impl == "" {
			impl = "zbench"
		}
		t.rows = append(t.rows, []string{src.label, src.role(), impl, dash(src.config(configBLAS)), dash(src.config(configCommit)),
			strconv.Itoa(len(src.file.Benchmarks)), src.file.Path})
	}
	s.table(t)
	if env := environment(srcs, name); env != nil {
		s.para("The files' environments differ in these settings (configuration lines; HARDWARE rows mean that results compare machines, not only code):")
		s.table(env)
	}
	for _, src := range srcs {
		if n := len(src.file.Skipped); n > 0 {
			s.para("%s: %d malformed benchmark %s skipped (first: %s).", src.label, n, plural(n, "line", "lines"), src.file.Skipped[0])
		}
	}

	// Line plots.
	for i := range sweeps {
		sw := &sweeps[i]
		s := b.section(2, sw.heading)
		lps := sw.plots(srcs)
		if len(lps) == 0 {
			s.para("%s", sw.none)
			continue
		}
		for _, lp := range lps {
			f, err := plotLine(lp, short)
			if err != nil {
				return err
			}
			b.figure(s, f)
			if sw.xKey == "batch" && sw.what == "throughput" {
				s.table(bestBatches(lp, short))
			}
		}
	}

	if err := b.serving(srcs, short, name); err != nil {
		return err
	}

	// Speed-ups.
	s = b.section(2, "Speed-up against peers")
	cmps := comparisons(srcs)
	if len(cmps) == 0 {
		s.para("%s", noComparison(srcs))
	} else {
		o := cmps[0].res.Options
		s.para("Speed-up = peer median time per op / our median time per op, over the benchmarks both files ran (matched by name); above 1× we are faster. "+
			"p and the verdict are zbench compare's, with the peer's file as the base: the Mann–Whitney U test of the two samples of times, Holm–Bonferroni-adjusted over the benchmarks of the comparison; "+
			"faster or slower needs p < %g and a change of the median of at least %g%%. "+
			"A result past its benchmark's accuracy bound (rel-err-bound) or above the device's peak is invalid and left out of the geometric means.",
			o.Alpha, 100*o.Threshold)
	}
	for _, c := range cmps {
		ours, peer := name(c.ours), name(c.peer)
		s := b.section(3, ours+" against "+peer)
		wls, groups := byWorkload(c.rows)
		if env := c.res.Summaries[0]; env.CrossHardware() {
			var hw []string
			for _, d := range env.Environment {
				if d.Hardware {
					hw = append(hw, fmt.Sprintf("%s `%s` against `%s`", d.Key, d.Other, d.Base))
				}
			}
			s.para("DIFFERENT HARDWARE: %s and %s ran on different machines (%s): these speed-ups compare machines, not implementations.", ours, peer, strings.Join(hw, "; "))
		}
		n, gm, _, _ := speedups(c.rows)
		s.para("%d %s in common (%d valid); geometric mean speed-up %s.", len(c.rows), plural(len(c.rows), "benchmark", "benchmarks"), n, formatRatio(gm))
		sum := &table{head: []string{"Workload", "Benchmarks", "Geomean speed-up", "Min", "Max"}, right: []bool{false, true, true, true, true}}
		for _, w := range wls {
			_, gm, lo, hi := speedups(groups[w])
			sum.rows = append(sum.rows, []string{w, strconv.Itoa(len(groups[w])), formatRatio(gm), formatRatio(lo), formatRatio(hi)})
		}
		s.table(sum)
		for _, w := range wls {
			rows := groups[w]
			ws := b.section(4, w+": "+ours+" against "+peer)
			// Long workloads get several charts, to keep each readable.
			for i := 0; i < len(rows); i += maxBars {
				part := rows[i:min(i+maxBars, len(rows))]
				name := slug("speedup-" + ours + "-vs-" + peer + "-" + w)
				if len(rows) > maxBars {
					name += "-" + strconv.Itoa(i/maxBars+1)
				}
				f, err := plotSpeedup(name, w, part, ours, peer)
				if err != nil {
					return err
				}
				b.figure(ws, f)
			}
			bs := make([]*results.Benchmark, len(rows))
			for i, r := range rows {
				bs[i] = r.ours
			}
			fixed := tableFixed(bs)
			t := &table{
				head:  []string{"Benchmark", ours + " time/op", ours + " rel-err", peer + " time/op", peer + " rel-err", "Speed-up", "p", "Verdict"},
				right: []bool{false, true, true, true, true, true, true, false},
			}
			var invalid []string
			for _, r := range rows {
				t.rows = append(t.rows, []string{
					shortName(r.ours, fixed),
					formatTimeStat(r.oursT), formatRelErr(r.oursErr, r.oursErrOK),
					formatTimeStat(r.peerT), formatRelErr(r.peerErr, r.peerErrOK),
					formatRatio(r.speedup), formatP(r.delta.PHolm, true), string(r.delta.Verdict),
				})
				if !r.valid() {
					invalid = append(invalid, shortName(r.ours, fixed)+": "+strings.Join(r.delta.Reasons, "; "))
				}
			}
			ws.table(t)
			if len(fixed) > 0 {
				ws.para("All with %s.", codeKeys(fixed))
			}
			if len(invalid) > 0 {
				ws.para("Invalid: %s.", strings.Join(invalid, "; "))
			}
		}
	}

	return nil
}

// results adds the section of every benchmark result.
func (b *builder) results(srcs []*source, name func(*source) string) {
	s := b.section(2, "Results")
	s.para("Every benchmark of every file: the median time per op, the throughput (the rate of work items the benchmark reports, such as seq/s, else GFLOP/s) and the accuracy, with the number of runs n.")
	wls, rows := resultRows(srcs)
	for _, w := range wls {
		ws := b.section(3, w)
		bs := make([]*results.Benchmark, len(rows[w]))
		for i, r := range rows[w] {
			bs[i] = r.b
		}
		fixed := tableFixed(bs)
		t := &table{head: []string{"Benchmark", "File", "time/op", "Throughput", "rel-err", "n"}, right: []bool{false, false, true, true, true, true}}
		for _, r := range rows[w] {
			tp := "—"
			if u := throughputUnit(r.b); u != "" {
				if st, ok := summary(r.b, u); ok {
					tp = formatRate(st, u)
				}
			}
			tm, n := "—", "—"
			if st, ok := summary(r.b, unitTime); ok {
				tm, n = formatTimeStat(st), strconv.Itoa(st.n)
			}
			re, ok := summary(r.b, unitRelErr)
			t.rows = append(t.rows, []string{shortName(r.b, fixed), name(r.src), tm, tp, formatRelErr(re, ok), n})
		}
		ws.table(t)
		if len(fixed) > 0 {
			ws.para("All with %s.", codeKeys(fixed))
		}
	}
}

// environment is a table of the configuration settings that differ between
// any two of the files (results.DiffConfig), with each file's values; nil
// when they all agree.
func environment(srcs []*source, name func(*source) string) *table {
	kind := map[string]bool{} // key → hardware
	var keys []string
	for i, a := range srcs {
		for _, b := range srcs[i+1:] {
			for _, d := range results.DiffConfig(a.file, b.file) {
				if _, ok := kind[d.Key]; !ok {
					keys = append(keys, d.Key)
				}
				kind[d.Key] = d.Hardware
			}
		}
	}
	if len(keys) == 0 {
		return nil
	}
	slices.SortStableFunc(keys, func(x, y string) int {
		if kind[x] != kind[y] {
			if kind[x] {
				return -1
			}
			return 1
		}
		return 0
	})
	t := &table{head: []string{"Setting", "Kind"}, right: []bool{false, false}}
	for _, src := range srcs {
		t.head = append(t.head, name(src))
		t.right = append(t.right, false)
	}
	for _, k := range keys {
		row := []string{k, "software"}
		if kind[k] {
			row[1] = "HARDWARE"
		}
		for _, src := range srcs {
			row = append(row, dash(src.config(k)))
		}
		t.rows = append(t.rows, row)
	}
	return t
}

// noComparison explains why there are no speed-ups.
func noComparison(srcs []*source) string {
	var ours, peers int
	for _, s := range srcs {
		if s.peer {
			peers++
		} else {
			ours++
		}
	}
	switch {
	case peers == 0:
		return "No peer file was given (a file whose config has an `impl:` line not starting with zbench, such as `impl: torch-1.13.0a0`), so there are no speed-ups."
	case ours == 0:
		return "Every file is a peer's (its config has an `impl:` line not starting with zbench), so there are no speed-ups of ours to show."
	}
	return "Our files and the peer files have no benchmark in common with a time per op, so there are no speed-ups."
}

// A resultRow is one benchmark of one source.
type resultRow struct {
	src *source
	b   *results.Benchmark
}

// resultRows orders every benchmark by workload, then by benchmark ID in
// order of first appearance across the sources, then by source.
func resultRows(srcs []*source) ([]string, map[string][]resultRow) {
	var wls, ids []string
	seen := map[string]bool{}
	wlSeen := map[string]bool{}
	wlOf := map[string]string{}
	for _, src := range srcs {
		for _, b := range src.file.Benchmarks {
			if !wlSeen[b.Workload] {
				wlSeen[b.Workload] = true
				wls = append(wls, b.Workload)
			}
			if id := b.ID(); !seen[id] {
				seen[id] = true
				ids = append(ids, id)
				wlOf[id] = b.Workload
			}
		}
	}
	rows := map[string][]resultRow{}
	for _, id := range ids {
		for _, src := range srcs {
			if b := src.file.Lookup(id); b != nil {
				rows[wlOf[id]] = append(rows[wlOf[id]], resultRow{src, b})
			}
		}
	}
	return wls, rows
}

func dash(s string) string {
	if s == "" {
		return "—"
	}
	return s
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

// tableFixed returns the name keys that every benchmark of a table shares,
// to leave out of its rows; none when the table has one benchmark, which
// then keeps its full name.
func tableFixed(bs []*results.Benchmark) []results.Key {
	for _, b := range bs[1:] {
		if b.ID() != bs[0].ID() {
			_, fixed := varyingKeys(bs)
			return fixed
		}
	}
	return nil
}

// codeKeys writes keys as code: `batch=8`, `dev=cpu`.
func codeKeys(keys []results.Key) string {
	s := ""
	for i, kv := range keys {
		if i > 0 {
			s += ", "
		}
		s += "`" + kv.String() + "`"
	}
	return s
}

// bestBatches tables, for each line of a throughput plot, the batch size
// of its highest median throughput: where a device stops gaining from
// larger batches.
func bestBatches(lp *linePlot, short bool) *table {
	t := &table{head: []string{"Source", "Series", "Best batch", "Throughput"}, right: []bool{false, false, true, true}}
	for _, s := range lp.series {
		if len(s.pts) == 0 {
			continue
		}
		best := s.pts[0]
		for _, p := range s.pts[1:] {
			if p.y.Center > best.y.Center {
				best = p
			}
		}
		var attrs []string
		for _, a := range s.attrs {
			attrs = append(attrs, a.Name+"="+a.Value)
		}
		label := s.src.label
		if short {
			label = s.src.short
		}
		t.rows = append(t.rows, []string{label, strings.Join(attrs, " "), strconv.FormatFloat(best.x, 'g', -1, 64), formatRate(best.y, lp.unit)})
	}
	return t
}
