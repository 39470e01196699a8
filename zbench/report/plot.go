package report

import (
	"bytes"
	"fmt"
	"image/color"
	"math"
	"slices"
	"strconv"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/font"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/text"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
	"gonum.org/v1/plot/vg/vgsvg"

	"github.com/zbench/zbench/zbench/results"
)

// A figure is a rendered plot.
type figure struct {
	// name is the file name without extension: name.svg, name.png.
	name string
	// title is the figure's title, for the alt text and caption.
	title string
	// svg and png are the encoded images.
	svg, png []byte
}

// pngDPI is the resolution of the PNG files: sharp on high-density
// screens, small enough for a repository.
const pngDPI = 144

// Plot layout.
var (
	lineW       = 6.2 * vg.Inch // the plot, without the legend
	lineH       = 3.8 * vg.Inch
	barW        = 7.6 * vg.Inch
	barRowH     = 0.26 * vg.Inch
	barMinH     = 2.2 * vg.Inch
	legendGap   = 0.15 * vg.Inch
	sans        = font.Font{Typeface: "Liberation", Variant: "Sans"}
	gridColor   = color.Gray{Y: 0xdd}
	fasterColor = color.RGBA{R: 0x3a, G: 0x92, B: 0x5d, A: 0xff}
	slowerColor = color.RGBA{R: 0xc4, G: 0x4e, B: 0x52, A: 0xff}
	refColor    = color.Gray{Y: 0x40}
)

// palette colours the sources (Tableau 10): a file keeps its colour in
// every plot of a report.
var palette = []color.Color{
	color.RGBA{0x1f, 0x77, 0xb4, 0xff},
	color.RGBA{0xff, 0x7f, 0x0e, 0xff},
	color.RGBA{0x2c, 0xa0, 0x2c, 0xff},
	color.RGBA{0xd6, 0x27, 0x28, 0xff},
	color.RGBA{0x94, 0x67, 0xbd, 0xff},
	color.RGBA{0x8c, 0x56, 0x4b, 0xff},
	color.RGBA{0xe3, 0x77, 0xc2, 0xff},
	color.RGBA{0x7f, 0x7f, 0x7f, 0xff},
	color.RGBA{0xbc, 0xbd, 0x22, 0xff},
	color.RGBA{0x17, 0xbe, 0xcf, 0xff},
}

// glyphs and dashes tell apart the series of one source within a plot.
var (
	glyphs = []draw.GlyphDrawer{
		draw.CircleGlyph{}, draw.TriangleGlyph{}, draw.BoxGlyph{}, draw.RingGlyph{},
		draw.PyramidGlyph{}, draw.SquareGlyph{}, draw.CrossGlyph{}, draw.PlusGlyph{},
	}
	dashes = [][]vg.Length{
		nil,
		{vg.Points(6), vg.Points(3)},
		{vg.Points(2), vg.Points(2)},
		{vg.Points(8), vg.Points(3), vg.Points(2), vg.Points(3)},
	}
)

// newPlot returns a plot with the report's fonts and the given title.
func newPlot(title string) *plot.Plot {
	p := plot.New()
	p.Title.Text = title
	p.Title.TextStyle.Font = font.From(sans, 12)
	p.Title.Padding = vg.Points(8)
	for _, a := range []*plot.Axis{&p.X, &p.Y} {
		a.Label.TextStyle.Font = font.From(sans, 10.5)
		a.Tick.Label.Font = font.From(sans, 9)
		a.LineStyle.Width = vg.Points(0.8)
		a.Tick.LineStyle.Width = vg.Points(0.8)
	}
	p.Legend.TextStyle.Font = font.From(sans, 9)
	return p
}

// timeScale returns the factor that brings seconds into a readable unit for
// values around v, and the unit's name.
func timeScale(v float64) (float64, string) {
	switch {
	case v >= 1:
		return 1, "s"
	case v >= 1e-3:
		return 1e3, "ms"
	case v >= 1e-6:
		return 1e6, "µs"
	}
	return 1e9, "ns"
}

// errXYs are the points of a series with their confidence intervals, as
// plotter.YErrorBars reads them.
type errXYs struct {
	plotter.XYs
	lo, hi []float64
}

// YError implements plotter.YErrorer: the distances from the median down
// and up to the bounds of its confidence interval.
func (e errXYs) YError(i int) (float64, float64) { return e.lo[i], e.hi[i] }

// plotLine renders a line plot of a sweep. shortLabels names sources by
// file name alone (every file is from one machine).
func plotLine(lp *linePlot, shortLabels bool) (*figure, error) {
	sw := lp.sweep
	ss := lp.series

	fixedKV, varying := splitKeys(ss)
	sources := map[*source]bool{}
	for _, s := range ss {
		sources[s.src] = true
	}

	title := fmt.Sprintf("%s: %s against %s", lp.workload, sw.what, strings.ToLower(strings.TrimSuffix(sw.xLabel, " (tokens)")))
	if len(fixedKV) > 0 {
		title += "\n" + strings.Join(fixedKV, ", ")
	}
	p := newPlot(title)
	p.X.Label.Text = sw.xLabel

	// Units: times in a readable scale, rates as they are.
	scale := 1.0
	yMin, yMax := math.Inf(1), math.Inf(-1)
	xs := map[float64]bool{}
	for _, s := range ss {
		for _, pt := range s.pts {
			yMin, yMax = min(yMin, pt.y.Center), max(yMax, pt.y.Center)
			xs[pt.x] = true
		}
	}
	if lp.unit == unitTime {
		var u string
		scale, u = timeScale(yMin)
		p.Y.Label.Text = fmt.Sprintf("Median time per op (%s)", u)
	} else {
		p.Y.Label.Text = fmt.Sprintf("Median throughput (%s)", lp.unit)
	}

	// Axes: log where the data span a decade or more.
	xVals := make([]float64, 0, len(xs))
	for x := range xs {
		xVals = append(xVals, x)
	}
	slices.Sort(xVals)
	if xAxis(p, xVals) {
		p.X.Label.Text += " (log scale)"
	}
	if yAxis(p, yMin, yMax) {
		p.Y.Label.Text += ", log scale"
	}
	addGrid(p)

	// Series: the source picks the colour when the plot has several,
	// the other keys the glyph and dash.
	variants := map[string]int{}
	legend := plot.NewLegend()
	legend.TextStyle.Font = font.From(sans, 9)
	for _, s := range ss {
		variant := s.variant(varying)
		vi, ok := variants[variant]
		if !ok {
			vi = len(variants)
			variants[variant] = vi
		}
		ci := s.src.index
		if len(sources) == 1 {
			ci = vi
		}
		col := palette[ci%len(palette)]

		xys := make(plotter.XYs, len(s.pts))
		e := errXYs{lo: make([]float64, len(s.pts)), hi: make([]float64, len(s.pts))}
		hasErr := false
		for i, pt := range s.pts {
			xys[i] = plotter.XY{X: pt.x, Y: pt.y.Center * scale}
			if !math.IsInf(pt.y.Lo, 0) && !math.IsInf(pt.y.Hi, 0) && pt.y.Lo > 0 {
				e.lo[i] = (pt.y.Center - pt.y.Lo) * scale
				e.hi[i] = (pt.y.Hi - pt.y.Center) * scale
				hasErr = hasErr || e.lo[i] > 0 || e.hi[i] > 0
			}
		}
		e.XYs = xys
		l, sc, err := plotter.NewLinePoints(xys)
		if err != nil {
			return nil, fmt.Errorf("plot %s: %w", lp.name, err)
		}
		l.Color, l.Width, l.Dashes = col, vg.Points(1.5), dashes[vi%len(dashes)]
		sc.Color, sc.Shape, sc.Radius = col, glyphs[vi%len(glyphs)], vg.Points(3)
		p.Add(l, sc)
		if hasErr {
			eb, err := plotter.NewYErrorBars(e)
			if err != nil {
				return nil, fmt.Errorf("plot %s: %w", lp.name, err)
			}
			eb.Color, eb.Width, eb.CapWidth = col, vg.Points(0.8), vg.Points(4)
			p.Add(eb)
		}
		name := s.src.label
		if shortLabels {
			name = s.src.short
		}
		if variant != "" {
			name += "  " + variant
		}
		legend.Add(name, l, sc)
	}
	fitY(p)
	svg, png, err := render(p, &legend, lineW, lineH)
	if err != nil {
		return nil, fmt.Errorf("plot %s: %w", lp.name, err)
	}
	return &figure{name: lp.name, title: strings.ReplaceAll(title, "\n", " — "), svg: svg, png: png}, nil
}

// xAxis sets up the x axis of p for the sorted positive values xs:
// logarithmic when they span a factor of 8 or more, ticked at each value
// when there are at most 12 (valueTicks). It reports whether the axis is
// logarithmic.
func xAxis(p *plot.Plot, xs []float64) bool {
	logScale := xs[len(xs)-1]/xs[0] >= 8
	if logScale {
		p.X.Scale = plot.LogScale{}
	}
	switch {
	case len(xs) <= 12:
		p.X.Tick.Marker = plot.ConstantTicks(valueTicks(xs, logScale))
	case logScale:
		p.X.Tick.Marker = logTicks{}
	}
	return logScale
}

// valueTicks ticks each of the sorted positive values xs, labelling those
// at least a 25th of the axis (logarithmic or not) past the last one
// labelled, so that labels of close values do not run into each other.
func valueTicks(xs []float64, logScale bool) []plot.Tick {
	pos := func(x float64) float64 {
		if logScale {
			return math.Log(x)
		}
		return x
	}
	gap := (pos(xs[len(xs)-1]) - pos(xs[0])) / 25
	ticks := make([]plot.Tick, len(xs))
	last := math.Inf(-1)
	for i, x := range xs {
		ticks[i] = plot.Tick{Value: x}
		if pos(x)-last >= gap {
			ticks[i].Label, last = formatTick(x), pos(x)
		}
	}
	return ticks
}

// yAxis sets up the y axis of p for values from lo to hi: logarithmic
// when they are positive and span a factor of 10 or more, else linear
// from 0. It reports whether the axis is logarithmic.
func yAxis(p *plot.Plot, lo, hi float64) bool {
	if lo > 0 && hi/lo >= 10 {
		p.Y.Scale = plot.LogScale{}
		p.Y.Tick.Marker = logTicks{}
		return true
	}
	p.Y.Min = 0
	p.Y.Tick.Marker = niceTicks{}
	return false
}

// fitY widens the y axis of p, once every plotter is added, to the
// labelled ticks just outside its data.
func fitY(p *plot.Plot) {
	if _, ok := p.Y.Scale.(plot.LogScale); ok {
		p.Y.Min, p.Y.Max = logBounds(p.Y.Min, p.Y.Max)
	} else {
		p.Y.Max = niceCeil(p.Y.Max)
	}
}

// addGrid adds the light grid of the line plots to p.
func addGrid(p *plot.Plot) {
	grid := plotter.NewGrid()
	grid.Vertical.Color, grid.Horizontal.Color = gridColor, gridColor
	grid.Vertical.Width, grid.Horizontal.Width = vg.Points(0.5), vg.Points(0.5)
	p.Add(grid)
}

// splitKeys sorts the attribute keys of ss into those every series shares,
// for the title ("dtype=f32"), and the names of those that vary, for the
// legend.
func splitKeys(ss []*series) (fixedKV, varying []string) {
	for _, k := range attrKeys(ss) {
		if !constant(ss, k) {
			varying = append(varying, k)
		} else if v := ss[0].get(k); v != "" {
			fixedKV = append(fixedKV, titleKey(k, v))
		}
	}
	return fixedKV, varying
}

// variant is the legend's text for the keys in varying of s: "f16 seq=128".
func (s *series) variant(varying []string) string {
	var vk []string
	for _, k := range varying {
		if v := s.get(k); v != "" {
			vk = append(vk, keyString(k, v))
		}
	}
	return strings.Join(vk, " ")
}

// keyString is a name key as the legend shows it: dtype values alone
// ("f32"), others as in the name ("op=relu").
func keyString(k, v string) string {
	if k == keyDType {
		return v
	}
	return titleKey(k, v)
}

// titleKey is a name key as a title shows it: as in the name ("dtype=f32").
func titleKey(k, v string) string {
	if k == keyProcs {
		return "GOMAXPROCS=" + v
	}
	return results.Key{Name: k, Value: v}.String()
}

// plotSpeedup renders the speed-ups of one workload of a comparison as
// horizontal bars from 1×, on a log axis.
func plotSpeedup(name, workload string, rows []cmpRow, oursName, peerName string) (*figure, error) {
	bs := make([]*results.Benchmark, len(rows))
	for i, r := range rows {
		bs[i] = r.ours
	}
	_, fixed := varyingKeys(bs)
	title := fmt.Sprintf("%s: speed-up of %s over %s", workload, oursName, peerName)
	var fixedKV []string
	for _, kv := range fixed {
		fixedKV = append(fixedKV, titleKey(kv.Name, kv.Value))
	}
	if len(fixedKV) > 0 {
		title += "\n" + strings.Join(fixedKV, ", ")
	}
	p := newPlot(title)
	p.X.Label.Text = fmt.Sprintf("Speed-up = %s time / %s time (log scale; > 1×: %s is faster)", peerName, oursName, oursName)
	p.X.Scale = plot.LogScale{}
	p.X.Tick.Marker = logTicks{suffix: "×"}

	n := len(rows)
	bars := &ratioBars{vals: make([]float64, n), labels: make([]string, n), width: barRowH * 0.62}
	names := make([]string, n)
	for i, r := range rows {
		j := n - 1 - i // the first benchmark at the top
		bars.vals[j] = r.speedup
		bars.labels[j] = formatRatio(r.speedup)
		names[j] = shortName(r.ours, fixed)
	}
	bars.style = text.Style{Color: color.Black, Font: font.From(sans, 8.5), Handler: p.TextHandler, YAlign: draw.YCenter}
	grid := plotter.NewGrid()
	grid.Horizontal.Color = nil
	grid.Vertical.Color, grid.Vertical.Width = gridColor, vg.Points(0.5)
	p.Add(grid, bars)
	p.NominalY(names...)
	p.X.Min, p.X.Max = logBounds(p.X.Min, p.X.Max)
	p.Y.Tick.Label.Font = font.From(sans, 9)

	h := max(barMinH, vg.Length(n)*barRowH+1.3*vg.Inch)
	svg, png, err := render(p, nil, barW, h)
	if err != nil {
		return nil, fmt.Errorf("plot %s: %w", name, err)
	}
	return &figure{name: name, title: strings.ReplaceAll(title, "\n", " — "), svg: svg, png: png}, nil
}

// ratioBars draws ratios as horizontal bars from the reference 1× line,
// labelled with their values: green to the right (faster), red to the left.
// Bar i is at y = i.
type ratioBars struct {
	vals   []float64
	labels []string
	width  vg.Length
	style  text.Style
}

// labelGap separates a bar's end from its label.
const labelGap = vg.Length(3)

// Plot implements plot.Plotter.
func (r *ratioBars) Plot(c draw.Canvas, p *plot.Plot) {
	trX, trY := p.Transforms(&c)
	x1 := trX(1)
	for i, v := range r.vals {
		x, y := trX(v), trY(float64(i))
		col, sty, lx := fasterColor, r.style, x+labelGap
		sty.XAlign = draw.XLeft
		if v < 1 {
			col, lx = slowerColor, x-labelGap
			sty.XAlign = draw.XRight
		}
		rect := vg.Rectangle{
			Min: vg.Point{X: min(x, x1), Y: y - r.width/2},
			Max: vg.Point{X: max(x, x1), Y: y + r.width/2},
		}
		c.SetColor(col)
		c.Fill(rect.Path())
		c.FillText(sty, vg.Point{X: lx, Y: y}, r.labels[i])
	}
	ref := draw.LineStyle{Color: refColor, Width: vg.Points(1)}
	c.StrokeLine2(ref, x1, c.Min.Y, x1, c.Max.Y)
}

// DataRange implements plot.DataRanger: the ratios and 1.
func (r *ratioBars) DataRange() (xmin, xmax, ymin, ymax float64) {
	// Keep the 1× line off the edge.
	xmin, xmax = 0.8, 1.25
	for _, v := range r.vals {
		xmin, xmax = min(xmin, v), max(xmax, v)
	}
	return xmin, xmax, 0, float64(len(r.vals) - 1)
}

// GlyphBoxes implements plot.GlyphBoxer, so that the padding of the plot
// leaves room for the bars' thickness and their labels.
func (r *ratioBars) GlyphBoxes(p *plot.Plot) []plot.GlyphBox {
	var boxes []plot.GlyphBox
	for i, v := range r.vals {
		sty := r.style
		sty.XAlign = draw.XLeft
		off := labelGap
		if v < 1 {
			sty.XAlign = draw.XRight
			off = -labelGap
		}
		rect := sty.Rectangle(r.labels[i])
		rect.Min.X += off
		rect.Max.X += off
		rect.Min.Y = min(rect.Min.Y, -r.width/2)
		rect.Max.Y = max(rect.Max.Y, r.width/2)
		boxes = append(boxes, plot.GlyphBox{X: p.X.Norm(v), Y: p.Y.Norm(float64(i)), Rectangle: rect})
	}
	return boxes
}

// logTicks marks a log axis: labelled ticks at 1, 2 and 5 times powers of
// ten (every integer multiple over a short range, powers of ten alone over
// a long one) and minor ticks between them. Labels end in suffix.
type logTicks struct{ suffix string }

// Ticks implements plot.Ticker.
func (t logTicks) Ticks(lo, hi float64) []plot.Tick {
	if !(lo > 0) || !(hi >= lo) || math.IsInf(hi, 0) {
		return plot.DefaultTicks{}.Ticks(lo, hi)
	}
	major := logMajors(lo, hi)
	var ticks []plot.Tick
	labelled := 0
	for e := int(math.Floor(math.Log10(lo))); e <= int(math.Ceil(math.Log10(hi))); e++ {
		for m := 1; m <= 9; m++ {
			v := float64(m) * math.Pow10(e)
			if v < lo*(1-1e-9) || v > hi*(1+1e-9) {
				continue
			}
			tk := plot.Tick{Value: v}
			if slices.Contains(major, m) {
				tk.Label = formatTick(v) + t.suffix
				labelled++
			}
			ticks = append(ticks, tk)
		}
	}
	if labelled < 2 {
		// Too short a range for round numbers: label its ends.
		ticks = append(ticks,
			plot.Tick{Value: lo, Label: strconv.FormatFloat(lo, 'g', 2, 64) + t.suffix},
			plot.Tick{Value: hi, Label: strconv.FormatFloat(hi, 'g', 2, 64) + t.suffix})
	}
	return ticks
}

// logMajors returns the multiples of powers of ten that logTicks labels
// over [lo, hi].
func logMajors(lo, hi float64) []int {
	switch decades := math.Log10(hi / lo); {
	case decades > 3:
		return []int{1}
	case decades > 0.7:
		return []int{1, 2, 5}
	}
	return []int{1, 2, 3, 4, 5, 6, 7, 8, 9}
}

// logBounds widens [lo, hi] (0 < lo <= hi) to the labelled ticks of
// logTicks just outside it, so that both ends of a log axis are labelled.
func logBounds(lo, hi float64) (float64, float64) {
	if !(lo > 0) || !(hi >= lo) || math.IsInf(hi, 0) {
		return lo, hi
	}
	major := logMajors(lo, hi)
	newLo, newHi := lo, hi
	foundLo, foundHi := false, false
	for e := int(math.Floor(math.Log10(lo))) - 1; e <= int(math.Ceil(math.Log10(hi)))+1; e++ {
		for _, m := range major {
			v := float64(m) * math.Pow10(e)
			if v <= lo*(1+1e-9) {
				newLo, foundLo = v, true
			}
			if v >= hi*(1-1e-9) && !foundHi {
				newHi, foundHi = v, true
			}
		}
	}
	if !foundLo {
		newLo = lo
	}
	return newLo, newHi
}

// niceCeil rounds hi > 0 up to a multiple of the step niceTicks would use
// over [0, hi].
func niceCeil(hi float64) float64 {
	if !(hi > 0) || math.IsInf(hi, 0) {
		return hi
	}
	step := niceStep(hi)
	return math.Ceil(hi/step-1e-9) * step
}

// niceStep is the step of about six ticks over a range of width span.
func niceStep(span float64) float64 {
	raw := span / 6
	mag := math.Pow10(int(math.Floor(math.Log10(raw))))
	for _, m := range []float64{1, 2, 2.5, 5} {
		if m*mag >= raw*(1-1e-9) {
			return m * mag
		}
	}
	return 10 * mag
}

// formatTick formats an axis value without float noise: 0.3, 128, 1e+06.
func formatTick(v float64) string {
	return strconv.FormatFloat(v, 'g', 6, 64)
}

// margin is the blank border around a plot.
const margin = vg.Length(6)

// render draws p, with its axis labels and legend (if any) to the right of
// it, as SVG and PNG. w and h are the size of the plot without the legend.
//
// The axis labels are drawn here rather than by gonum/plot, which centres
// them (and reserves room for them) by the data value halfway along the
// axis: on a log axis that is off centre, and a long label then squeezes
// the plot. gonum/plot also panics on some degenerate input; that is
// returned as an error.
func render(p *plot.Plot, legend *plot.Legend, w, h vg.Length) (svg, png []byte, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("drawing failed: %v", r)
		}
	}()
	xLabel, yLabel := p.X.Label, p.Y.Label
	p.X.Label.Text, p.Y.Label.Text = "", ""
	var xh, yw vg.Length
	if xLabel.Text != "" {
		xh = xLabel.TextStyle.Height(xLabel.Text) + vg.Points(4)
	}
	if yLabel.Text != "" {
		yw = yLabel.TextStyle.Height(yLabel.Text) + vg.Points(4)
	}
	var lw vg.Length
	if legend != nil {
		legend.Top, legend.Left = true, true
		legend.Padding = vg.Points(2)
		r := legend.Rectangle(draw.Canvas{})
		lw = r.Max.X - r.Min.X + legendGap
	}
	paint := func(c vg.CanvasSizer) {
		full := draw.New(c)
		full.SetColor(color.White)
		full.Fill(full.Rectangle.Path())
		dc := draw.Crop(full, margin, -margin, margin, -margin)
		pc := draw.Crop(dc, yw, -lw, xh, 0)
		p.Draw(pc)
		data := p.DataCanvas(pc)
		if xLabel.Text != "" {
			sty := xLabel.TextStyle
			sty.XAlign, sty.YAlign = draw.XCenter, draw.YBottom
			// Centred under the data, but inside the canvas.
			half := sty.Width(xLabel.Text) / 2
			x := (data.Min.X + data.Max.X) / 2
			x = max(min(x, dc.Max.X-half), dc.Min.X+half)
			dc.FillText(sty, vg.Point{X: x, Y: dc.Min.Y}, xLabel.Text)
		}
		if yLabel.Text != "" {
			sty := yLabel.TextStyle
			sty.Rotation = math.Pi / 2
			sty.XAlign, sty.YAlign = draw.XCenter, draw.YTop
			dc.FillText(sty, vg.Point{X: dc.Min.X, Y: (data.Min.Y + data.Max.Y) / 2}, yLabel.Text)
		}
		if legend != nil {
			// Align the legend with the top of the data area.
			lc := draw.Crop(dc, dc.Max.X-dc.Min.X-lw+legendGap, 0, 0, 0)
			lc.Max.Y = data.Max.Y
			legend.Draw(lc)
		}
	}
	W, H := w+lw+2*margin, h+2*margin

	sc := vgsvg.New(W, H)
	paint(sc)
	var sb bytes.Buffer
	if _, err := sc.WriteTo(&sb); err != nil {
		return nil, nil, err
	}
	ic := vgimg.NewWith(vgimg.UseWH(W, H), vgimg.UseDPI(pngDPI))
	paint(ic)
	var pb bytes.Buffer
	if _, err := (vgimg.PngCanvas{Canvas: ic}).WriteTo(&pb); err != nil {
		return nil, nil, err
	}
	return fixSVG(sb.Bytes()), pb.Bytes(), nil
}

// niceTicks marks a linear axis with about six labelled ticks at round
// steps (1, 2, 2.5 or 5 times a power of ten).
type niceTicks struct{}

// Ticks implements plot.Ticker.
func (niceTicks) Ticks(lo, hi float64) []plot.Tick {
	if !(hi > lo) || math.IsInf(hi-lo, 0) {
		return plot.DefaultTicks{}.Ticks(lo, hi)
	}
	step := niceStep(hi - lo)
	var ticks []plot.Tick
	for i := math.Ceil(lo/step - 1e-9); i*step <= hi*(1+1e-9)+1e-300; i++ {
		v := i * step
		if math.Abs(v) < step*1e-9 {
			v = 0
		}
		ticks = append(ticks, plot.Tick{Value: v, Label: formatTick(v)})
	}
	return ticks
}

// fixSVG makes gonum's SVG fit to inline in HTML: without the XML
// declaration, scaling with its container, and with fallback fonts for
// viewers without the Liberation fonts (metric-compatible with Arial).
func fixSVG(b []byte) []byte {
	s := string(b)
	if strings.HasPrefix(s, "<?xml") {
		if i := strings.Index(s, "?>"); i >= 0 {
			s = strings.TrimLeft(s[i+2:], "\n")
		}
	}
	s = strings.ReplaceAll(s, "font-family:Liberation Sans;", "font-family:'Liberation Sans',Arial,Helvetica,sans-serif;")
	return []byte(s)
}
