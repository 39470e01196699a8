package report

import (
	"fmt"
	"math"
	"strconv"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/font"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"

	"github.com/zbench/zbench/zbench/trainlog"
)

// tailSteps is the number of last steps whose mean loss the training
// table gives: one step's loss is noisy, the mean of the last few says
// where a run ended.
const tailSteps = 10

// maxCurvePoints is the most points a loss curve is drawn with; a longer
// log is thinned to the lowest and highest loss of each of
// maxCurvePoints/2 runs of steps, which keeps its envelope and spikes.
const maxCurvePoints = 2000

// maxGlyphPoints is the most points of a curve drawn with a marker at
// each: a short log shows where its steps are, a long one a clean line.
const maxGlyphPoints = 60

// lossPlotName is the file name of the loss plot, without extension.
const lossPlotName = "loss-step"

// A run is one training log with its label.
type run struct {
	log *trainlog.Log
	// label is the last two elements of the path without extension:
	// "bert-train-curve/fp8".
	label string
	// index numbers the logs in input order; it picks the colour.
	index int
}

// newRuns labels logs as newSources labels benchmark files.
func newRuns(logs []*trainlog.Log) []*run {
	runs := make([]*run, len(logs))
	seen := labeler{}
	for i, l := range logs {
		label, _, _ := seen.label(l.Path)
		runs[i] = &run{log: l, label: label, index: i}
	}
	return runs
}

// training adds the section on training logs: the loss plot and the table
// of each log's first, last and last-10 mean losses.
func (b *builder) training(logs []*trainlog.Log) error {
	runs := newRuns(logs)
	s := b.section(2, "Training loss")
	s.para("Training loss against step, one line per log.")
	f, thinned, err := plotLoss(lossPlotName, runs)
	if err != nil {
		return err
	}
	b.figure(s, f)
	if thinned {
		s.para("Logs of more than %d steps are drawn with the lowest and highest loss of each of %d runs of steps, which keeps the curve's envelope and spikes; the table uses every step.", maxCurvePoints, maxCurvePoints/2)
	}
	s.table(lossTable(runs))
	text := fmt.Sprintf("Steps is the number of steps logged, last step the number of the last; the mean is over the last %d steps logged (over all of them, marked \"of n\", in a shorter log).", tailSteps)
	if len(runs) > 1 {
		text += fmt.Sprintf(" The last column is each log's mean relative to that of %s, the first log given: (mean − its mean) / |its mean|; above 0, the log ends at a higher loss.", runs[0].label)
	}
	s.para("%s", text)
	return nil
}

// lossTable tables each run's steps and losses and, given two runs or
// more, its last-10 mean relative to the first run's.
func lossTable(runs []*run) *table {
	t := &table{
		head:  []string{"Log", "Steps", "Last step", "First loss", "Last loss", "Mean of last " + strconv.Itoa(tailSteps)},
		right: []bool{false, true, true, true, true, true},
	}
	compare := len(runs) > 1
	if compare {
		t.head = append(t.head, "vs "+runs[0].label)
		t.right = append(t.right, true)
	}
	t.head = append(t.head, "Path")
	t.right = append(t.right, false)
	ref, _ := runs[0].log.TailMean(tailSteps)
	for i, r := range runs {
		l := r.log
		mean, n := l.TailMean(tailSteps)
		tail := sig4(mean)
		if n < tailSteps {
			tail += " (of " + strconv.Itoa(n) + ")"
		}
		row := []string{r.label, strconv.Itoa(len(l.Points)), strconv.Itoa(l.Last().Step), sig4(l.First().Loss), sig4(l.Last().Loss), tail}
		if compare {
			rel := "reference"
			if i > 0 {
				rel = formatPercent(relative(mean, ref))
			}
			row = append(row, rel)
		}
		t.rows = append(t.rows, append(row, l.Path))
	}
	return t
}

// relative returns (v − ref) / |ref|, NaN when ref is 0.
func relative(v, ref float64) float64 {
	if ref == 0 {
		return math.NaN()
	}
	return (v - ref) / math.Abs(ref)
}

// formatPercent formats a fraction as a signed percentage: "+0.4%",
// "-12.3%", "+0.04%" (two decimals below 0.1%), "—" for NaN or ±Inf.
func formatPercent(v float64) string {
	pct := v * 100
	switch {
	case math.IsNaN(pct) || math.IsInf(pct, 0):
		return "—"
	case pct == 0:
		return "+0.00%" // not "-0.00%" for -0
	case math.Abs(pct) < 0.1:
		return fmt.Sprintf("%+.2f%%", pct)
	}
	return fmt.Sprintf("%+.1f%%", pct)
}

// curve returns the points of a log to draw, thinned to at most limit (an
// even number ≥ 2) by keeping the lowest and highest loss of each of
// limit/2 runs of consecutive steps, in step order. thinned reports
// whether it left points out.
func curve(pts []trainlog.Point, limit int) (xys plotter.XYs, thinned bool) {
	if len(pts) <= limit {
		xys = make(plotter.XYs, len(pts))
		for i, p := range pts {
			xys[i] = plotter.XY{X: float64(p.Step), Y: p.Loss}
		}
		return xys, false
	}
	buckets := limit / 2
	xys = make(plotter.XYs, 0, limit)
	for i := range buckets {
		part := pts[i*len(pts)/buckets : (i+1)*len(pts)/buckets]
		lo, hi := 0, 0
		for j, p := range part {
			if p.Loss < part[lo].Loss {
				lo = j
			}
			if p.Loss > part[hi].Loss {
				hi = j
			}
		}
		xys = append(xys, plotter.XY{X: float64(part[min(lo, hi)].Step), Y: part[min(lo, hi)].Loss})
		if lo != hi {
			xys = append(xys, plotter.XY{X: float64(part[max(lo, hi)].Step), Y: part[max(lo, hi)].Loss})
		}
	}
	return xys, true
}

// plotLoss renders the loss curves of runs, one line per run, on a linear
// step axis and a loss axis that is logarithmic when the losses are
// positive and span a factor of 10 or more. thinned reports whether a
// curve was drawn with fewer points than its log has (curve).
func plotLoss(name string, runs []*run) (fig *figure, thinned bool, err error) {
	const title = "Training loss against step"
	p := newPlot(title)
	p.X.Label.Text = "Step"
	p.Y.Label.Text = "Loss"

	xMin, xMax := math.Inf(1), math.Inf(-1)
	yMin, yMax := math.Inf(1), math.Inf(-1)
	for _, r := range runs {
		xMin, xMax = min(xMin, float64(r.log.First().Step)), max(xMax, float64(r.log.Last().Step))
		for _, pt := range r.log.Points {
			yMin, yMax = min(yMin, pt.Loss), max(yMax, pt.Loss)
		}
	}
	p.X.Min, p.X.Max = niceBounds(xMin, xMax)
	p.X.Tick.Marker = niceTicks{}
	logY := yMin > 0 && yMax/yMin >= 10
	if logY {
		p.Y.Scale = plot.LogScale{}
		p.Y.Tick.Marker = logTicks{}
		p.Y.Label.Text += " (log scale)"
		p.Y.Min, p.Y.Max = logBounds(yMin, yMax)
	} else {
		p.Y.Min, p.Y.Max = niceBounds(yMin, yMax)
		p.Y.Tick.Marker = niceTicks{}
	}
	addGrid(p)

	legend := plot.NewLegend()
	legend.TextStyle.Font = font.From(sans, 9)
	for _, r := range runs {
		xys, thin := curve(r.log.Points, maxCurvePoints)
		thinned = thinned || thin
		col := palette[r.index%len(palette)]
		l, err := plotter.NewLine(xys)
		if err != nil {
			return nil, false, fmt.Errorf("plot %s: %s: %w", name, r.label, err)
		}
		l.Color, l.Width = col, vg.Points(1.5)
		l.Dashes = dashes[(r.index/len(palette))%len(dashes)]
		p.Add(l)
		if len(xys) > maxGlyphPoints {
			legend.Add(r.label, l)
			continue
		}
		sc, err := plotter.NewScatter(xys)
		if err != nil {
			return nil, false, fmt.Errorf("plot %s: %s: %w", name, r.label, err)
		}
		sc.Color, sc.Shape, sc.Radius = col, glyphs[r.index%len(glyphs)], vg.Points(2.5)
		p.Add(sc)
		legend.Add(r.label, l, sc)
	}
	svg, png, err := render(p, &legend, lineW, lineH)
	if err != nil {
		return nil, false, fmt.Errorf("plot %s: %w", name, err)
	}
	return &figure{name: name, title: title, svg: svg, png: png}, thinned, nil
}

// niceBounds widens [lo, hi] to multiples of the step niceTicks would use,
// so that both ends of a linear axis are labelled; a range of one value
// becomes one around it.
func niceBounds(lo, hi float64) (float64, float64) {
	if lo == hi {
		d := math.Abs(lo) / 10
		if d == 0 {
			d = 1
		}
		lo, hi = lo-d, hi+d
	}
	if !(hi > lo) || math.IsInf(hi-lo, 0) {
		return lo, hi
	}
	step := niceStep(hi - lo)
	return math.Floor(lo/step+1e-9) * step, math.Ceil(hi/step-1e-9) * step
}
