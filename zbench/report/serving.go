package report

import (
	"cmp"
	"fmt"
	"image/color"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/font"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"

	"github.com/zbench/zbench/zbench/results"
)

// The name key, units and config keys of the load generator's results
// (zbench load).
const (
	keyRate         = "rate"
	unitReqs        = "req/s"
	unitOutToks     = "out-tok/s"
	unitGoodput     = "goodput-req/s"
	unitErrors      = "errors"
	unitPass        = "pass"
	configTTFTBound = "loadgen-ttft-bound"
	configTPOTBound = "loadgen-tpot-bound"
)

// loadUnits are the units of which any one marks a benchmark as a run of
// the load generator.
var loadUnits = []string{unitReqs, unitOutToks, unitGoodput, "ttft-p99-ms", "tpot-p99-ms"}

// isLoadRun reports whether b is a run of the load generator.
func isLoadRun(b *results.Benchmark) bool {
	for _, u := range loadUnits {
		if _, ok := b.Values[u]; ok {
			return true
		}
	}
	return false
}

// rateOf returns the request rate of a server-scenario run: its rate= key,
// a positive number; ok is false for runs of other scenarios.
func rateOf(b *results.Benchmark) (float64, bool) {
	x, err := strconv.ParseFloat(b.Get(keyRate), 64)
	if err != nil || !(x > 0) || math.IsInf(x, 0) {
		return 0, false
	}
	return x, true
}

// loadValue returns the median of unit in the run b; ok is false when b
// has no usable value of it or the value is negative.
func loadValue(b *results.Benchmark, unit string) (float64, bool) {
	s, ok := summary(b, unit)
	if !ok || s.Center < 0 {
		return 0, false
	}
	return s.Center, true
}

// passed reports whether the run b passed its bounds (its pass metric is
// 1); known is false when b has no pass metric.
func passed(b *results.Benchmark) (pass, known bool) {
	s, ok := summary(b, unitPass)
	if !ok {
		return false, false
	}
	return s.Center >= 1, true
}

// loadBound returns the bound that the config key k of b gives (a Go
// duration, loadgen-ttft-bound: 2s); ok is false when there is none (no
// such line, 0 or not a duration).
func loadBound(b *results.Benchmark, k string) (time.Duration, bool) {
	d, err := time.ParseDuration(b.Config[k])
	if err != nil || d <= 0 {
		return 0, false
	}
	return d, true
}

// A rateMetric is one line per series of a plot against request rate.
type rateMetric struct {
	unit string
	// label tells the metric's line from the others of its series in
	// the legend ("p99"); "" when a plot has one metric.
	label string
}

// percentiles are the metrics of the 50th, 90th and 99th percentiles of a
// latency ("ttft"), in milliseconds.
func percentiles(what string) []rateMetric {
	var ms []rateMetric
	for _, p := range []string{"p50", "p90", "p99"} {
		ms = append(ms, rateMetric{unit: what + "-" + p + "-ms", label: p})
	}
	return ms
}

// A rateKind is one kind of plot of the load generator's server runs
// against their request rate.
type rateKind struct {
	// slug starts the file names of its plots: "ttft-rate".
	slug string
	// what is the metric in titles.
	what string
	// yLabel labels the y axis.
	yLabel string
	// metrics are the lines drawn for each series.
	metrics []rateMetric
	// bound is the config key of the bound on the last metric (the
	// 99th percentile), drawn as a horizontal line; "" for none.
	bound string
	// boundLabel names the bound in the legend.
	boundLabel string
	// offered draws the offered rate (y = x) for reference.
	offered bool
}

// rateKinds are the plots against request rate, in order.
var rateKinds = []rateKind{
	{
		slug:       "ttft-rate",
		what:       "time to first token",
		yLabel:     "TTFT (ms)",
		metrics:    percentiles("ttft"),
		bound:      configTTFTBound,
		boundLabel: "TTFT p99 bound",
	},
	{
		slug:       "tpot-rate",
		what:       "time per output token",
		yLabel:     "TPOT (ms)",
		metrics:    percentiles("tpot"),
		bound:      configTPOTBound,
		boundLabel: "TPOT p99 bound",
	},
	{
		slug:    "throughput-rate",
		what:    "output throughput",
		yLabel:  "Output tokens a second (out-tok/s)",
		metrics: []rateMetric{{unit: unitOutToks}},
	},
	{
		slug:    "goodput-rate",
		what:    "goodput",
		yLabel:  "Requests a second",
		metrics: []rateMetric{{unit: unitGoodput, label: "goodput-req/s"}, {unit: unitReqs, label: "req/s"}},
		offered: true,
	},
}

// A ratePlot is one plot of a rateKind: the server-scenario series of one
// workload, or a part of them when there are too many for one plot. The
// points of its series carry their runs, whose metrics are read from
// them.
type ratePlot struct {
	kind     *rateKind
	workload string
	// fixed are the keys every series of the plot shares, for the title.
	fixed  []results.Key
	series []*series
	// name is the file name of the plot without extension.
	name string
}

// rateSeries collects the server-scenario runs of srcs into series, one
// per source, workload and name keys other than rate, each sorted by
// rate; the workloads are in order of first appearance.
func rateSeries(srcs []*source) (workloads []string, groups map[string][]*series) {
	groups = map[string][]*series{}
	byKey := map[string]*series{}
	for _, src := range srcs {
		for _, b := range src.file.Benchmarks {
			x, ok := rateOf(b)
			if !ok || !isLoadRun(b) {
				continue
			}
			var attrs []results.Key
			for _, kv := range b.Keys {
				if kv.Name != keyRate {
					attrs = append(attrs, kv)
				}
			}
			if b.Procs != 0 {
				attrs = append(attrs, results.Key{Name: keyProcs, Value: strconv.Itoa(b.Procs)})
			}
			id := strconv.Itoa(src.index) + "\x00" + b.Workload + "\x00" + keysString(attrs)
			s := byKey[id]
			if s == nil {
				s = &series{src: src, attrs: attrs}
				byKey[id] = s
				if _, ok := groups[b.Workload]; !ok {
					workloads = append(workloads, b.Workload)
				}
				groups[b.Workload] = append(groups[b.Workload], s)
			}
			s.pts = append(s.pts, point{x: x, b: b})
		}
	}
	for _, ss := range groups {
		for _, s := range ss {
			slices.SortStableFunc(s.pts, func(a, b point) int { return cmp.Compare(a.x, b.x) })
		}
	}
	return workloads, groups
}

// ratePlots collects the plots against request rate over srcs: for each
// rate kind and workload, the series with a value of one of its metrics.
func ratePlots(srcs []*source) []*ratePlot {
	workloads, groups := rateSeries(srcs)
	var out []*ratePlot
	for i := range rateKinds {
		k := &rateKinds[i]
		for _, w := range workloads {
			var keep []*series
			for _, s := range groups[w] {
				if k.hasValues(s) {
					keep = append(keep, s)
				}
			}
			for _, f := range facet(keep, nil) {
				parts := []string{k.slug, w}
				for _, kv := range f.fixed {
					parts = append(parts, kv.Value)
				}
				out = append(out, &ratePlot{kind: k, workload: w, fixed: f.fixed, series: f.series, name: slug(strings.Join(parts, "-"))})
			}
		}
	}
	return out
}

// hasValues reports whether a run of s has a value of one of k's metrics.
func (k *rateKind) hasValues(s *series) bool {
	for _, pt := range s.pts {
		for _, m := range k.metrics {
			if _, ok := loadValue(pt.b, m.unit); ok {
				return true
			}
		}
	}
	return false
}

// bounds returns the distinct bounds of the plot's runs, in increasing
// order, each with the labels of the sources that give it.
func (rp *ratePlot) bounds(shortLabels bool) (ds []time.Duration, by map[time.Duration][]string) {
	by = map[time.Duration][]string{}
	if rp.kind.bound == "" {
		return nil, by
	}
	for _, s := range rp.series {
		name := s.src.label
		if shortLabels {
			name = s.src.short
		}
		for _, pt := range s.pts {
			d, ok := loadBound(pt.b, rp.kind.bound)
			if !ok {
				continue
			}
			if _, seen := by[d]; !seen {
				ds = append(ds, d)
			}
			if !slices.Contains(by[d], name) {
				by[d] = append(by[d], name)
			}
		}
	}
	slices.Sort(ds)
	return ds, by
}

// markGlyphs are the shapes of the markers of a plot against rate, by
// metric: filled for a run that passed its bounds, drawn hollow for one
// that failed.
var markGlyphs = []draw.GlyphDrawer{draw.CircleGlyph{}, draw.PyramidGlyph{}, draw.BoxGlyph{}}

// hollowWidth is the width of the outline of a hollow marker.
const hollowWidth = vg.Length(1.3)

// hollow draws a filled glyph as an outline: the glyph, then a smaller one
// inside it in white, which also hides the line through the marker.
type hollow struct{ shape draw.GlyphDrawer }

// DrawGlyph implements draw.GlyphDrawer.
func (h hollow) DrawGlyph(c *draw.Canvas, sty draw.GlyphStyle, pt vg.Point) {
	c.SetColor(sty.Color)
	h.shape.DrawGlyph(c, sty, pt)
	inner := sty
	inner.Radius = max(sty.Radius-hollowWidth, 0)
	c.SetColor(color.White)
	h.shape.DrawGlyph(c, inner, pt)
}

// hline is a horizontal line across the whole plot at y.
type hline struct {
	y     float64
	style draw.LineStyle
}

// Plot implements plot.Plotter.
func (h *hline) Plot(c draw.Canvas, p *plot.Plot) {
	_, trY := p.Transforms(&c)
	y := trY(h.y)
	c.StrokeLine2(h.style, c.Min.X, y, c.Max.X, y)
}

// DataRange implements plot.DataRanger: y alone, no x range.
func (h *hline) DataRange() (xmin, xmax, ymin, ymax float64) {
	return math.Inf(1), math.Inf(-1), h.y, h.y
}

// Thumbnail implements plot.Thumbnailer.
func (h *hline) Thumbnail(c *draw.Canvas) {
	y := c.Center().Y
	c.StrokeLine2(h.style, c.Min.X, y, c.Max.X, y)
}

// glyphThumb is a legend entry drawn as one marker.
type glyphThumb draw.GlyphStyle

// Thumbnail implements plot.Thumbnailer.
func (g glyphThumb) Thumbnail(c *draw.Canvas) { c.DrawGlyph(draw.GlyphStyle(g), c.Center()) }

// plotRate renders a plot against request rate: a line per series and
// metric, with filled markers at the runs that passed and open ones at
// those that failed, the bounds as horizontal lines and, for goodput, the
// offered rate. shortLabels names sources by file name alone.
func plotRate(rp *ratePlot, shortLabels bool) (*figure, error) {
	k := rp.kind
	ss := rp.series
	fixedKV, varying := splitKeys(ss)
	title := fmt.Sprintf("%s: %s against request rate", rp.workload, k.what)
	if len(fixedKV) > 0 {
		title += "\n" + strings.Join(fixedKV, ", ")
	}
	p := newPlot(title)
	p.X.Label.Text = "Offered request rate (req/s)"
	p.Y.Label.Text = k.yLabel

	// The lines' points, and the range they and the bounds span.
	type line struct {
		s      *series
		metric int
		xys    plotter.XYs
		pass   []bool
	}
	var lines []line
	xSet := map[float64]bool{}
	yMin, yMax := math.Inf(1), math.Inf(-1)
	hasPass := false
	for _, s := range ss {
		for mi, m := range k.metrics {
			l := line{s: s, metric: mi}
			for _, pt := range s.pts {
				v, ok := loadValue(pt.b, m.unit)
				if !ok {
					continue
				}
				pass, known := passed(pt.b)
				hasPass = hasPass || known
				l.xys = append(l.xys, plotter.XY{X: pt.x, Y: v})
				l.pass = append(l.pass, pass || !known)
				xSet[pt.x] = true
				yMin, yMax = min(yMin, v), max(yMax, v)
			}
			if len(l.xys) > 0 {
				lines = append(lines, l)
			}
		}
	}
	xs := make([]float64, 0, len(xSet))
	for x := range xSet {
		xs = append(xs, x)
	}
	slices.Sort(xs)
	xMin, xMax := xs[0], xs[len(xs)-1]
	bounds, boundSrcs := rp.bounds(shortLabels)
	for _, d := range bounds {
		ms := d.Seconds() * 1e3
		yMin, yMax = min(yMin, ms), max(yMax, ms)
	}
	if xAxis(p, xs) {
		p.X.Label.Text += " (log scale)"
	}
	if xMin == xMax {
		// One rate: keep it in the middle of an axis around it.
		p.X.Min, p.X.Max = xMin/2, xMax*3/2
	}
	if yAxis(p, yMin, yMax) {
		p.Y.Label.Text += ", log scale"
	}
	addGrid(p)

	// Colours: a source's own when each source has one series here,
	// else one per series.
	perSource := map[*source]int{}
	for _, s := range ss {
		perSource[s.src]++
	}
	oneEach := len(perSource) == len(ss)
	index := map[*series]int{}
	for i, s := range ss {
		index[s] = i
	}

	legend := plot.NewLegend()
	legend.TextStyle.Font = font.From(sans, 9)
	for _, l := range lines {
		ci := index[l.s]
		if oneEach {
			ci = l.s.src.index
		}
		col := palette[ci%len(palette)]
		ln, err := plotter.NewLine(l.xys)
		if err != nil {
			return nil, fmt.Errorf("plot %s: %w", rp.name, err)
		}
		ln.Color, ln.Width, ln.Dashes = col, vg.Points(1.5), dashes[l.metric%len(dashes)]
		sc, err := plotter.NewScatter(l.xys)
		if err != nil {
			return nil, fmt.Errorf("plot %s: %w", rp.name, err)
		}
		shape := markGlyphs[l.metric%len(markGlyphs)]
		sc.GlyphStyle = draw.GlyphStyle{Color: col, Radius: vg.Points(3.5), Shape: shape}
		pass := l.pass
		sc.GlyphStyleFunc = func(i int) draw.GlyphStyle {
			sty := sc.GlyphStyle
			if !pass[i] {
				sty.Shape = hollow{shape}
			}
			return sty
		}
		p.Add(ln, sc)
		name := l.s.src.label
		if shortLabels {
			name = l.s.src.short
		}
		if v := l.s.variant(varying); v != "" {
			name += "  " + v
		}
		if m := k.metrics[l.metric].label; m != "" {
			name += " " + m
		}
		legend.Add(name, ln, sc)
	}
	for _, d := range bounds {
		h := &hline{y: d.Seconds() * 1e3, style: draw.LineStyle{Color: slowerColor, Width: vg.Points(1.2), Dashes: []vg.Length{vg.Points(5), vg.Points(3)}}}
		p.Add(h)
		label := k.boundLabel + " " + d.String()
		if len(bounds) > 1 {
			label += " (" + strings.Join(boundSrcs[d], ", ") + ")"
		}
		legend.Add(label, h)
	}
	if k.offered {
		f := plotter.NewFunction(func(x float64) float64 { return x })
		f.LineStyle = draw.LineStyle{Color: refColor, Width: vg.Points(1), Dashes: []vg.Length{vg.Points(2), vg.Points(2)}}
		p.Add(f)
		legend.Add("offered rate", f)
	}
	if hasPass {
		mark := draw.GlyphStyle{Color: refColor, Radius: vg.Points(3.5), Shape: markGlyphs[0]}
		legend.Add("passed its bounds", glyphThumb(mark))
		mark.Shape = hollow{markGlyphs[0]}
		legend.Add("failed", glyphThumb(mark))
	}
	fitY(p)
	svg, png, err := render(p, &legend, lineW, lineH)
	if err != nil {
		return nil, fmt.Errorf("plot %s: %w", rp.name, err)
	}
	return &figure{name: rp.name, title: strings.ReplaceAll(title, "\n", " — "), svg: svg, png: png}, nil
}

// serving adds the section on the load generator's runs, when any file has
// some: the plots of the server-scenario runs against request rate, and a
// table of each file's runs. short is whether the sources are named by
// file name alone in legends; name names a source in headings.
func (b *builder) serving(srcs []*source, short bool, name func(*source) string) error {
	runs := map[*source][]*results.Benchmark{}
	for _, src := range srcs {
		for _, bm := range src.file.Benchmarks {
			if isLoadRun(bm) {
				runs[src] = append(runs[src], bm)
			}
		}
	}
	if len(runs) == 0 {
		return nil
	}
	s := b.section(2, "Serving load against request rate")
	s.para("Runs of the load generator (`zbench load`), each a set of requests sent to a server in one scenario; the server scenario sends them at a Poisson request rate (`rate=`). " +
		"The plots put each file's server-scenario runs against that rate, a line per file and metric, in order of rate: the 50th, 90th and 99th percentiles of the time to first token (TTFT) and of the time per output token after it (TPOT), in milliseconds; output tokens a second; and the goodput (requests a second whose own TTFT and TPOT are within the bounds) beside all requests completed a second. " +
		"A filled marker is a run that passed (`pass` 1: no errors, TTFT p99 and TPOT p99 within the file's `loadgen-ttft-bound` and `loadgen-tpot-bound`), an open one a run that failed; the horizontal lines are those bounds. " +
		"Runs of other scenarios (offline, singlestream) have no rate: they are in the tables only.")
	rps := ratePlots(srcs)
	if len(rps) == 0 {
		s.para("No run of the load generator has a request rate (`rate=`, the server scenario), so there are no plots against rate.")
	}
	for _, rp := range rps {
		f, err := plotRate(rp, short)
		if err != nil {
			return err
		}
		b.figure(s, f)
	}
	for _, src := range srcs {
		if len(runs[src]) == 0 {
			continue
		}
		fs := b.section(3, "Load-generator runs: "+name(src))
		fs.para("%s", loadSummary(src, runs[src]))
		fs.table(loadTable(runs[src]))
	}
	return nil
}

// loadSummary says what bounds a file's runs were judged by and the
// highest rate that passed them.
func loadSummary(src *source, runs []*results.Benchmark) string {
	var bounds []string
	for _, k := range []struct{ key, what string }{{configTTFTBound, "TTFT"}, {configTPOTBound, "TPOT"}} {
		if v := src.config(k.key); v != "" {
			bounds = append(bounds, k.what+" p99 ≤ "+v)
		}
	}
	text := "No bounds are given (`loadgen-ttft-bound`, `loadgen-tpot-bound`)."
	if len(bounds) > 0 {
		text = "Bounds: " + strings.Join(bounds, ", ") + "."
	}
	best, judged := math.Inf(-1), false
	var bestRun *results.Benchmark
	for _, r := range runs {
		x, ok := rateOf(r)
		if !ok {
			continue
		}
		pass, known := passed(r)
		if !known {
			continue
		}
		judged = true
		if pass && x > best {
			best, bestRun = x, r
		}
	}
	switch {
	case bestRun != nil:
		text += fmt.Sprintf(" Highest rate that passed: %s req/s", formatTick(best))
		if v, ok := loadValue(bestRun, unitOutToks); ok {
			text += fmt.Sprintf(" (%s out-tok/s)", sig4(v))
		}
		text += "."
	case judged:
		text += " No rate passed."
	}
	return text
}

// loadTable tables the runs of one file: their rate (— for scenarios
// without one), throughput, goodput, TTFT and TPOT percentiles, errors
// and verdict; the runs of each scenario together, in order of rate.
func loadTable(runs []*results.Benchmark) *table {
	workloads := map[string]bool{}
	for _, r := range runs {
		workloads[r.Workload] = true
	}
	label := func(r *results.Benchmark) string {
		l := r.Rest(keyRate)
		if len(workloads) > 1 || l == "" {
			l = strings.TrimSuffix(r.Workload+"/"+l, "/")
		}
		if r.Procs != 0 {
			l += "-" + strconv.Itoa(r.Procs)
		}
		return l
	}
	group := map[string]int{}
	for _, r := range runs {
		if _, ok := group[label(r)]; !ok {
			group[label(r)] = len(group)
		}
	}
	sorted := slices.Clone(runs)
	slices.SortStableFunc(sorted, func(a, b *results.Benchmark) int {
		if c := cmp.Compare(group[label(a)], group[label(b)]); c != 0 {
			return c
		}
		x, _ := rateOf(a)
		y, _ := rateOf(b)
		return cmp.Compare(x, y)
	})

	units := []string{unitReqs, unitOutToks, unitGoodput, "ttft-p50-ms", "ttft-p99-ms", "tpot-p50-ms", "tpot-p99-ms", unitErrors}
	t := &table{
		head:  []string{"Run", "Rate (req/s)", "req/s", "out-tok/s", "goodput-req/s", "TTFT p50 (ms)", "TTFT p99 (ms)", "TPOT p50 (ms)", "TPOT p99 (ms)", "Errors", "Pass"},
		right: []bool{false, true, true, true, true, true, true, true, true, true, false},
	}
	for _, r := range sorted {
		row := []string{label(r), "—"}
		if x, ok := rateOf(r); ok {
			row[1] = formatTick(x)
		}
		for _, u := range units {
			cell := "—"
			if v, ok := loadValue(r, u); ok {
				cell = sig4(v)
			}
			row = append(row, cell)
		}
		verdict := "—"
		if pass, known := passed(r); known {
			verdict = "FAIL"
			if pass {
				verdict = "PASS"
			}
		}
		t.rows = append(t.rows, append(row, verdict))
	}
	return t
}
