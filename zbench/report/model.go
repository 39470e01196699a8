package report

import (
	"cmp"
	"math"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"golang.org/x/perf/benchmath"

	"github.com/zbench/zbench/zbench/compare"
	"github.com/zbench/zbench/zbench/results"
)

// confidence is the level of the confidence intervals around medians, the
// one benchstat uses.
const confidence = 0.95

// maxSeries is the most lines one plot holds before it is split by a key
// of the benchmark names (Kernels by op=, say).
const maxSeries = 8

// maxBars is the most bars one speed-up chart holds.
const maxBars = 40

// Units, name keys and config keys the report reads.
const (
	unitTime     = "sec/op"
	unitRelErr   = "rel-err"
	unitGFLOPs   = "GFLOP/s"
	keyDevice    = "dev"
	keyDType     = "dtype"
	keyProcs     = "procs" // a pseudo key for the -GOMAXPROCS suffix
	implZbench   = "zbench"
	configImpl   = "impl"
	configBLAS   = "blas"
	configCommit = "zbench-commit"
)

// A source is one input file: its label and whether it is ours or a peer's.
type source struct {
	file *results.File
	// label is the last two elements of the path without extension:
	// "cpu-intel-xeon-f6-2core-amx/zbench".
	label string
	// short is the last element alone ("zbench"), used in legends when
	// every file comes from the same machine directory.
	short string
	// machine is the directory the file is in ("cpu-intel-xeon-f6-2core-amx").
	machine string
	// impl is the file's impl: config line, if any.
	impl string
	// peer is true for a peer implementation (impl: not starting with
	// "zbench"), false for ours.
	peer bool
	// index numbers the sources in input order; it picks the colour.
	index int
}

// role names the source's role for the tables.
func (s *source) role() string {
	if s.peer {
		return "peer"
	}
	return "ours"
}

// A labeler names input files by the last two elements of their paths
// without extension, telling apart files that would share a label.
type labeler map[string]int

// label returns the label of the file at path ("m1/zbench"), its last
// element alone ("zbench") and the directory it is in ("m1"). The second
// file of a label gets " (2)" added, and so on.
func (seen labeler) label(path string) (label, base, dir string) {
	if abs, err := filepath.Abs(path); err == nil {
		path = abs
	}
	base = strings.TrimSuffix(filepath.Base(path), filepath.Ext(path))
	dir = filepath.Base(filepath.Dir(path))
	label = base
	if dir != "" && dir != "." && dir != string(filepath.Separator) {
		label = dir + "/" + base
	}
	seen[label]++
	if n := seen[label]; n > 1 {
		label += " (" + strconv.Itoa(n) + ")"
		base += " (" + strconv.Itoa(n) + ")"
	}
	return label, base, dir
}

// newSources labels and classifies files.
func newSources(files []*results.File) []*source {
	srcs := make([]*source, 0, len(files))
	seen := labeler{}
	for i, f := range files {
		label, base, dir := seen.label(f.Path)
		s := &source{file: f, label: label, short: base, machine: dir, index: i}
		for _, b := range f.Benchmarks {
			if v, ok := b.Config[configImpl]; ok {
				s.impl = v
				break
			}
		}
		// A file is a peer's if any of its runs says so.
		for _, b := range f.Benchmarks {
			if v, ok := b.Config[configImpl]; ok && !strings.HasPrefix(v, implZbench) {
				s.impl = v
			}
		}
		s.peer = s.impl != "" && !strings.HasPrefix(s.impl, implZbench)
		srcs = append(srcs, s)
	}
	return srcs
}

// sameMachine reports whether every source is in the same directory, so
// that legends can use the short names.
func sameMachine(srcs []*source) bool {
	for _, s := range srcs {
		if s.machine != srcs[0].machine {
			return false
		}
	}
	return true
}

// config returns the values of config key k among the file's benchmarks,
// distinct and in order (results.File.Config), joined by ", "; "" when there
// are none. A file of several runs appended can have several (commits).
func (s *source) config(k string) string {
	return strings.Join(s.file.Config()[k], ", ")
}

// A stat is the median of one unit of one benchmark with its confidence
// interval and sample size.
type stat struct {
	benchmath.Summary
	n int
}

// summary returns the median of unit's values in b; ok is false when b has
// no usable values of unit (none, or a NaN or ±Inf among them).
func summary(b *results.Benchmark, unit string) (stat, bool) {
	if b == nil {
		return stat{}, false
	}
	x := b.Values[unit]
	s, err := compare.Median(x, confidence)
	if err != nil {
		return stat{}, false
	}
	return stat{Summary: s, n: len(x)}, true
}

// throughputUnit is the unit that measures b's throughput: a rate of work
// items it reports (seq/s, tok/s, img/s), else GFLOP/s, else "".
func throughputUnit(b *results.Benchmark) string {
	for _, u := range b.Units {
		if isItemRate(u) {
			return u
		}
	}
	if _, ok := b.Values[unitGFLOPs]; ok {
		return unitGFLOPs
	}
	return ""
}

// isItemRate reports whether u is a rate of work items (seq/s, img/s)
// rather than of FLOPs or bytes.
func isItemRate(u string) bool {
	item, ok := strings.CutSuffix(u, "/s")
	if !ok || item == "" {
		return false
	}
	switch strings.TrimLeft(item, "kKMGTP") {
	case "FLOP", "B", "bit", "b", "":
		return false
	}
	return true
}

// A point is one benchmark's median at one x of a sweep.
type point struct {
	x float64
	y stat
	b *results.Benchmark
}

// A series is one line of a plot: the benchmarks of one source that differ
// only in the sweep's x key.
type series struct {
	src *source
	// attrs are the name keys held fixed along the line (dtype=f32,
	// seq=128), and procs when the name has a -GOMAXPROCS suffix.
	attrs []results.Key
	pts   []point
}

// get returns the value of attribute k, or "".
func (s *series) get(k string) string {
	for _, a := range s.attrs {
		if a.Name == k {
			return a.Value
		}
	}
	return ""
}

// A sweep is one kind of line plot: a metric against a numeric name key.
type sweep struct {
	// slug starts the file names of its plots: "throughput-batch".
	slug string
	// heading titles the report section.
	heading string
	// what is the metric in titles: "throughput", "latency".
	what string
	// xKey is the key on the x axis; also are keys that must equal it
	// and are left out of the series (n= and k= for square matmuls).
	xKey string
	also []string
	// xLabel labels the x axis.
	xLabel string
	// unit returns the unit plotted for b, or "" to leave b out.
	unit func(b *results.Benchmark) string
	// none explains an absent plot.
	none string
}

// sweeps are the line plots of a report, in order.
var sweeps = []sweep{
	{
		slug:    "throughput-batch",
		heading: "Throughput against batch size",
		what:    "throughput",
		xKey:    "batch",
		xLabel:  "Batch size",
		unit:    throughputUnit,
		none:    "No benchmark was run at two or more batch sizes (`batch=`) with its other keys fixed, so there is no throughput plot.",
	},
	{
		slug:    "latency-batch",
		heading: "Latency against batch size",
		what:    "latency",
		xKey:    "batch",
		xLabel:  "Batch size",
		unit:    func(*results.Benchmark) string { return unitTime },
		none:    "No benchmark was run at two or more batch sizes (`batch=`) with its other keys fixed, so there is no latency plot.",
	},
	{
		slug:    "latency-seq",
		heading: "Latency against sequence length",
		what:    "latency",
		xKey:    "seq",
		xLabel:  "Sequence length (tokens)",
		unit:    func(*results.Benchmark) string { return unitTime },
		none:    "No benchmark was run at two or more sequence lengths (`seq=`) with its other keys fixed, so there is no latency plot.",
	},
	{
		slug:    "throughput-size",
		heading: "Matrix multiply throughput against size",
		what:    "throughput",
		xKey:    "m",
		also:    []string{"n", "k"},
		xLabel:  "Matrix size m = n = k",
		unit: func(b *results.Benchmark) string {
			if _, ok := b.Values[unitGFLOPs]; ok {
				return unitGFLOPs
			}
			return ""
		},
		none: "No square matrix multiply (`m=`, `n=`, `k=` equal) was run at two or more sizes with its other keys fixed, so there is no size plot.",
	},
}

// A linePlot is one plot of a sweep: the series of one workload and unit,
// or a part of them when there are too many for one plot.
type linePlot struct {
	sweep    *sweep
	workload string
	unit     string
	// fixed are the keys every series of the plot shares, for the title.
	fixed  []results.Key
	series []*series
	// name is the file name of the plot without extension.
	name string
}

// xValue parses the sweep's x key of b: a positive number, and for a sweep
// with also keys, equal to each of them.
func (sw *sweep) xValue(b *results.Benchmark) (float64, bool) {
	v := b.Get(sw.xKey)
	x, err := strconv.ParseFloat(v, 64)
	if err != nil || !(x > 0) || math.IsInf(x, 0) {
		return 0, false
	}
	for _, k := range sw.also {
		if b.Get(k) != v {
			return 0, false
		}
	}
	return x, true
}

// plots collects the sweep's line plots over srcs.
func (sw *sweep) plots(srcs []*source) []*linePlot {
	type groupKey struct{ workload, unit string }
	var order []groupKey
	groups := map[groupKey][]*series{}
	byKey := map[string]*series{}
	for _, src := range srcs {
		for _, b := range src.file.Benchmarks {
			x, ok := sw.xValue(b)
			if !ok {
				continue
			}
			unit := sw.unit(b)
			if unit == "" {
				continue
			}
			y, ok := summary(b, unit)
			if !ok || !(y.Center > 0) {
				continue
			}
			var attrs []results.Key
			for _, kv := range b.Keys {
				if kv.Name != sw.xKey && !slices.Contains(sw.also, kv.Name) {
					attrs = append(attrs, kv)
				}
			}
			if b.Procs != 0 {
				attrs = append(attrs, results.Key{Name: keyProcs, Value: strconv.Itoa(b.Procs)})
			}
			gk := groupKey{b.Workload, unit}
			id := strconv.Itoa(src.index) + "\x00" + gk.workload + "\x00" + gk.unit + "\x00" + keysString(attrs)
			s := byKey[id]
			if s == nil {
				s = &series{src: src, attrs: attrs}
				byKey[id] = s
				if _, ok := groups[gk]; !ok {
					order = append(order, gk)
				}
				groups[gk] = append(groups[gk], s)
			}
			s.pts = append(s.pts, point{x: x, y: y, b: b})
		}
	}
	var out []*linePlot
	for _, gk := range order {
		var keep []*series
		for _, s := range groups[gk] {
			slices.SortStableFunc(s.pts, func(a, b point) int { return cmp.Compare(a.x, b.x) })
			if s.pts[0].x != s.pts[len(s.pts)-1].x {
				keep = append(keep, s)
			}
		}
		for _, f := range facet(keep, nil) {
			out = append(out, &linePlot{sweep: sw, workload: gk.workload, unit: gk.unit, fixed: f.fixed, series: f.series})
		}
	}
	// Name the plots, adding the unit where one workload has two.
	units := map[string]map[string]bool{}
	for _, p := range out {
		if units[p.workload] == nil {
			units[p.workload] = map[string]bool{}
		}
		units[p.workload][p.unit] = true
	}
	for _, p := range out {
		parts := []string{sw.slug, p.workload}
		if len(units[p.workload]) > 1 {
			parts = append(parts, p.unit)
		}
		for _, kv := range p.fixed {
			parts = append(parts, kv.Value)
		}
		p.name = slug(strings.Join(parts, "-"))
	}
	return out
}

// A facetGroup is series that share the values of the keys in fixed.
type facetGroup struct {
	fixed  []results.Key
	series []*series
}

// facet splits ss into groups of at most maxSeries by the values of the
// first key (other than dev and dtype) that varies among them, and so on
// recursively. fixed holds the keys already split on.
func facet(ss []*series, fixed []results.Key) []facetGroup {
	if len(ss) == 0 {
		return nil
	}
	if len(ss) <= maxSeries {
		return []facetGroup{{fixed, ss}}
	}
	for _, k := range attrKeys(ss) {
		if k == keyDevice || k == keyDType || k == "" || constant(ss, k) {
			continue
		}
		var vals []string
		parts := map[string][]*series{}
		for _, s := range ss {
			v := s.get(k)
			if _, ok := parts[v]; !ok {
				vals = append(vals, v)
			}
			parts[v] = append(parts[v], s)
		}
		var out []facetGroup
		for _, v := range vals {
			f := append(slices.Clone(fixed), results.Key{Name: k, Value: v})
			out = append(out, facet(parts[v], f)...)
		}
		return out
	}
	return []facetGroup{{fixed, ss}}
}

// attrKeys lists the attribute keys of ss in order of first appearance.
func attrKeys(ss []*series) []string {
	var keys []string
	for _, s := range ss {
		for _, a := range s.attrs {
			if !slices.Contains(keys, a.Name) {
				keys = append(keys, a.Name)
			}
		}
	}
	return keys
}

// constant reports whether attribute k has the same value in every series.
func constant(ss []*series, k string) bool {
	for _, s := range ss[1:] {
		if s.get(k) != ss[0].get(k) {
			return false
		}
	}
	return true
}

// keysString joins keys as a benchmark name joins them.
func keysString(keys []results.Key) string {
	parts := make([]string, len(keys))
	for i, kv := range keys {
		parts[i] = kv.String()
	}
	return strings.Join(parts, "/")
}

// A comparison is one of our files against one peer file over the
// benchmarks both ran, judged by package compare with the peer as the base.
type comparison struct {
	ours, peer *source
	// res is compare's result: its options, the number of comparisons
	// the Holm–Bonferroni correction spans and the environment's
	// differences (Summaries[0]).
	res  *compare.Result
	rows []cmpRow
}

// A cmpRow is one benchmark of a comparison.
type cmpRow struct {
	ours, peer *results.Benchmark
	// oursT and peerT are the median times per op.
	oursT, peerT stat
	// oursErr and peerErr are the median rel-err; the ok flags say
	// whether the files report one.
	oursErr, peerErr     stat
	oursErrOK, peerErrOK bool
	// speedup is peerT / oursT: above 1 we are faster.
	speedup float64
	// delta is compare's judgement of ours against the peer: the
	// Holm-adjusted p-value, the verdict ("faster": ours is) and why a
	// result is invalid.
	delta *compare.Delta
}

// valid reports whether the row counts towards speed-up summaries: it
// passed compare's accuracy gate and roofline check.
func (r *cmpRow) valid() bool { return r.delta.Verdict != compare.Invalid }

// comparisons pairs each of our files with the peers on the same machine
// (any peer when there are none there) over matched benchmark IDs.
func comparisons(srcs []*source) []*comparison {
	var ours, peers []*source
	for _, s := range srcs {
		if s.peer {
			peers = append(peers, s)
		} else {
			ours = append(ours, s)
		}
	}
	var out []*comparison
	for _, o := range ours {
		var found []*comparison
		for _, p := range peers {
			if p.machine == o.machine {
				if c := comparePair(o, p); c != nil {
					found = append(found, c)
				}
			}
		}
		if len(found) == 0 {
			for _, p := range peers {
				if c := comparePair(o, p); c != nil {
					found = append(found, c)
				}
			}
		}
		out = append(out, found...)
	}
	return out
}

// comparePair runs compare with peer as the base and ours as the newer
// file, and keeps the benchmarks with a positive median time in both, in
// the order of our file; nil when there are none.
func comparePair(ours, peer *source) *comparison {
	res, err := compare.Run([]*results.File{peer.file, ours.file}, compare.Options{Metric: unitTime})
	if err != nil { // no benchmark in common
		return nil
	}
	rows := map[string]*compare.Row{}
	for _, t := range res.Tables {
		for _, row := range t.Rows {
			rows[row.ID] = row
		}
	}
	c := &comparison{ours: ours, peer: peer, res: res}
	for _, ob := range ours.file.Benchmarks {
		row := rows[ob.ID()]
		if row == nil || row.Deltas[0] == nil {
			continue
		}
		d := row.Deltas[0]
		ot := stat{Summary: d.Summary, n: d.N}
		pt := stat{Summary: row.Base.Summary, n: row.Base.N}
		if !(ot.Center > 0) || !(pt.Center > 0) || math.IsInf(ot.Center, 0) || math.IsInf(pt.Center, 0) {
			continue
		}
		pb := peer.file.Lookup(ob.ID())
		r := cmpRow{ours: ob, peer: pb, oursT: ot, peerT: pt, speedup: pt.Center / ot.Center, delta: d}
		r.oursErr, r.oursErrOK = summary(ob, unitRelErr)
		r.peerErr, r.peerErrOK = summary(pb, unitRelErr)
		c.rows = append(c.rows, r)
	}
	if len(c.rows) == 0 {
		return nil
	}
	return c
}

// byWorkload splits rows by workload, in order of first appearance.
func byWorkload(rows []cmpRow) (names []string, groups map[string][]cmpRow) {
	groups = map[string][]cmpRow{}
	for _, r := range rows {
		w := r.ours.Workload
		if _, ok := groups[w]; !ok {
			names = append(names, w)
		}
		groups[w] = append(groups[w], r)
	}
	return names, groups
}

// speedups summarises the speed-ups of the valid rows, as compare's
// geomean leaves invalid results out: their number, geometric mean,
// smallest and largest (NaN when no row is valid).
func speedups(rows []cmpRow) (n int, geomean, lo, hi float64) {
	logSum, lo, hi := 0.0, math.Inf(1), math.Inf(-1)
	for _, r := range rows {
		if !r.valid() {
			continue
		}
		n++
		logSum += math.Log(r.speedup)
		lo, hi = min(lo, r.speedup), max(hi, r.speedup)
	}
	if n == 0 {
		return 0, math.NaN(), math.NaN(), math.NaN()
	}
	return n, math.Exp(logSum / float64(n)), lo, hi
}

// varyingKeys returns the benchmark name keys that differ among bs (in
// name order) and the ones every benchmark shares.
func varyingKeys(bs []*results.Benchmark) (varying []string, fixed []results.Key) {
	var keys []string
	for _, b := range bs {
		for _, kv := range b.Keys {
			if kv.Name != "" && !slices.Contains(keys, kv.Name) {
				keys = append(keys, kv.Name)
			}
		}
	}
	for _, k := range keys {
		same := true
		for _, b := range bs[1:] {
			if b.Get(k) != bs[0].Get(k) {
				same = false
				break
			}
		}
		if same {
			fixed = append(fixed, results.Key{Name: k, Value: bs[0].Get(k)})
		} else {
			varying = append(varying, k)
		}
	}
	return varying, fixed
}

// shortName is b's name without the workload and the keys in fixed, or the
// workload when nothing is left.
func shortName(b *results.Benchmark, fixed []results.Key) string {
	omit := make([]string, len(fixed))
	for i, kv := range fixed {
		omit[i] = kv.Name
	}
	if s := b.Rest(omit...); s != "" {
		return s
	}
	return b.Workload
}

// slug makes s safe as a file name: lower case letters, digits, '.', and
// single '-' between words.
func slug(s string) string {
	var sb strings.Builder
	dash := false
	for _, r := range strings.ToLower(s) {
		switch {
		case r >= 'a' && r <= 'z', r >= '0' && r <= '9', r == '.':
			if dash && sb.Len() > 0 {
				sb.WriteByte('-')
			}
			dash = false
			sb.WriteRune(r)
		default:
			dash = true
		}
	}
	if sb.Len() == 0 {
		return "plot"
	}
	return sb.String()
}
