package compare

import (
	"encoding/csv"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"

	"golang.org/x/perf/benchunit"

	"github.com/zbench/zbench/zbench/results"
)

// A Format is a way of writing a Result.
type Format string

// The formats: aligned text for a terminal, a GitHub-flavoured markdown
// table for a pull request, one CSV record per comparison, and JSON of the
// same records with the totals.
const (
	Text     Format = "text"
	Markdown Format = "markdown"
	CSV      Format = "csv"
	JSON     Format = "json"
)

// ParseFormat returns the format named s.
func ParseFormat(s string) (Format, error) {
	switch f := Format(s); f {
	case Text, Markdown, CSV, JSON:
		return f, nil
	}
	return "", fmt.Errorf("unknown format %q (want text, markdown, csv or json)", s)
}

// Write writes r to w in format f.
func (r *Result) Write(w io.Writer, f Format) error {
	switch f {
	case Text:
		return r.writeTable(w, false)
	case Markdown:
		return r.writeTable(w, true)
	case CSV:
		return r.writeCSV(w)
	case JSON:
		return r.writeJSON(w)
	}
	return fmt.Errorf("unknown format %q", f)
}

// Labels returns short names for paths: the shortest trailing path
// elements that tell them apart ("zbench.txt", "a/zbench.txt").
func Labels(paths []string) []string {
	labels := make([]string, len(paths))
	for depth := 1; ; depth++ {
		seen := map[string]int{}
		longest := true
		for i, p := range paths {
			parts := strings.Split(filepath.ToSlash(filepath.Clean(p)), "/")
			k := max(0, len(parts)-depth)
			if k > 0 {
				longest = false
			}
			labels[i] = strings.Join(parts[k:], "/")
			seen[labels[i]]++
		}
		unique := true
		for _, n := range seen {
			if n > 1 {
				unique = false
			}
		}
		if unique || longest {
			return labels
		}
	}
}

// value formats a metric value: SI-scaled like benchstat ("173.2µ") for
// time and counts, four significant digits otherwise.
func (r *Result) value(v float64) string {
	if strings.HasPrefix(r.Options.Metric, "sec/") || strings.HasPrefix(r.Options.Metric, "B/") {
		return benchunit.Scale(v, benchunit.ClassOf(r.Options.Metric))
	}
	return strconv.FormatFloat(v, 'g', 4, 64)
}

func (r *Result) median(c *Cell) string {
	return r.value(c.Summary.Center) + " ± " + c.Summary.PctRangeString()
}

func relErr(v float64) string {
	if math.IsNaN(v) {
		return ""
	}
	return strconv.FormatFloat(v, 'g', 3, 64)
}

func pctPeak(c *Cell) string {
	if math.IsNaN(c.PctPeak) {
		return ""
	}
	s := strconv.FormatFloat(c.PctPeak, 'f', 1, 64)
	if c.PeakDerived {
		s += "*"
	}
	if c.AbovePeak != "" {
		s += " ABOVE PEAK"
	}
	return s
}

func pValue(d *Delta) string {
	if d.PHolm < 0.001 {
		return fmt.Sprintf("p=%.1e n=%d", d.PHolm, d.N)
	}
	return fmt.Sprintf("p=%.3f n=%d", d.PHolm, d.N)
}

func change(d *Delta) string {
	if math.Abs(d.Change) < 5e-5 {
		return "~0%"
	}
	return fmt.Sprintf("%+.2f%%", 100*d.Change)
}

// writeTable writes the text or markdown form.
func (r *Result) writeTable(w io.Writer, md bool) error {
	labels := Labels(r.Files)
	var b strings.Builder
	alpha := fmt.Sprintf("α = %g", r.Options.Alpha)
	if md {
		fmt.Fprintf(&b, "### zbench compare: %s\n\n", r.headline(labels))
		fmt.Fprintf(&b, "Base `%s`. %s: median ± %g%% CI; Δ of the median; p of the Mann–Whitney U test, Holm–Bonferroni-adjusted over %d comparisons; "+
			"faster/slower needs p < %g and |Δ| ≥ %g%%; rel-err past its benchmark's bound (rel-err-bound) or a result above the device's peak is **invalid**. %%peak marked * is derived from GFLOP/s and GB/s.\n\n",
			labels[0], r.Options.Metric, 100*r.Options.Confidence, r.Comparisons, r.Options.Alpha, 100*r.Options.Threshold)
	} else {
		fmt.Fprintf(&b, "%s\n", r.headline(labels))
		fmt.Fprintf(&b, "base = %s; %s median ± %g%% CI; p: Mann–Whitney U, Holm–Bonferroni over %d comparisons; verdict needs p < %s and |Δ| ≥ %g%%\n",
			labels[0], r.Options.Metric, 100*r.Options.Confidence, r.Comparisons, alpha, 100*r.Options.Threshold)
	}
	r.writeEnvironment(&b, labels, md)
	for _, t := range r.Tables {
		header := []string{"benchmark", labels[0], "rel-err", "%peak"}
		for _, l := range labels[1:] {
			header = append(header, l, "Δ", "p", "verdict", "rel-err", "%peak")
		}
		var rows [][]string
		for _, row := range t.Rows {
			cells := []string{row.Name, r.median(&row.Base), relErr(row.Base.RelErr), pctPeak(&row.Base)}
			for _, d := range row.Deltas {
				if d == nil {
					cells = append(cells, "missing", "", "", "", "", "")
					continue
				}
				v := string(d.Verdict)
				if md && d.Verdict != Same {
					v = "**" + v + "**"
				}
				if d.CrossHardware {
					v += " " + crossMark
				}
				cells = append(cells, r.median(&d.Cell), change(d), pValue(d), v, relErr(d.RelErr), pctPeak(&d.Cell))
			}
			rows = append(rows, cells)
		}
		if md {
			fmt.Fprintf(&b, "\n#### %s\n\n", t.Title())
			writeMarkdownRows(&b, header, rows)
		} else {
			fmt.Fprintf(&b, "\n%s\n", t.Title())
			writeTextRows(&b, "", header, rows)
		}
	}
	r.writeNotes(&b, labels, md)
	_, err := io.WriteString(w, b.String())
	return err
}

// crossMark follows a verdict between files from different hardware.
const crossMark = "(cross-hw)"

// writeEnvironment says, before the tables, how each newer file's
// environment differs from the base's: a warning for different hardware,
// a list for the rest (BLAS or engine, Go, driver).
func (r *Result) writeEnvironment(b *strings.Builder, labels []string, md bool) {
	for j, s := range r.Summaries {
		if len(s.Environment) == 0 {
			continue
		}
		newer, base := labels[j+1], labels[0]
		if md {
			newer, base = "`"+newer+"`", "`"+base+"`"
		}
		switch {
		case s.CrossHardware() && md:
			fmt.Fprintf(b, "> [!WARNING]\n> **Different hardware:** %s ran on other hardware than %s. Its verdicts, marked %s, compare machines, not code; `-fail-on` ignores them unless it lists `hardware`.\n\n", newer, base, crossMark)
		case s.CrossHardware():
			fmt.Fprintf(b, "\nWARNING: DIFFERENT HARDWARE: %s ran on other hardware than %s.\nIts verdicts, marked %s, compare machines, not code; -fail-on ignores them unless it lists hardware.\n", newer, base, crossMark)
		case md:
			fmt.Fprintf(b, "Environment: %s differs from %s in software only.\n\n", newer, base)
		default:
			fmt.Fprintf(b, "\nEnvironment: %s differs from %s in software only.\n", newer, base)
		}
		header := []string{"setting", labels[0], labels[j+1], "kind"}
		var rows [][]string
		for _, e := range s.Environment {
			kind := "software"
			if e.Hardware {
				kind = "HARDWARE"
			}
			rows = append(rows, []string{e.Key, e.Base, e.Other, kind})
		}
		if md {
			writeMarkdownRows(b, header, rows)
			b.WriteString("\n")
			continue
		}
		writeTextRows(b, "  ", header, rows)
	}
}

// headline is the one-line verdict of every newer file.
func (r *Result) headline(labels []string) string {
	var parts []string
	for j, s := range r.Summaries {
		var counts []string
		for _, v := range Verdicts {
			if n := s.Counts[v]; n > 0 {
				counts = append(counts, fmt.Sprintf("%d %s", n, v))
			}
		}
		gm := "no geomean"
		if s.N > 0 {
			gm = fmt.Sprintf("geomean %+.2f%% over %d", 100*(s.Geomean-1), s.N)
		}
		hw := ""
		if s.CrossHardware() {
			hw = ", DIFFERENT HARDWARE"
		}
		parts = append(parts, fmt.Sprintf("%s vs %s: %s (%s%s)", labels[j+1], labels[0], strings.Join(counts, ", "), gm, hw))
	}
	return strings.Join(parts, "; ")
}

// writeTextRows writes header and rows as aligned columns, each line
// starting with indent.
func writeTextRows(b *strings.Builder, indent string, header []string, rows [][]string) {
	tw := tabwriter.NewWriter(b, 0, 0, 2, ' ', 0)
	for _, cells := range append([][]string{header}, rows...) {
		fmt.Fprintln(tw, indent+strings.Join(cells, "\t"))
	}
	tw.Flush()
}

func writeMarkdownRows(b *strings.Builder, header []string, rows [][]string) {
	esc := func(s string) string { return strings.ReplaceAll(s, "|", `\|`) }
	line := func(cells []string) {
		for i := range cells {
			cells[i] = esc(cells[i])
		}
		fmt.Fprintf(b, "| %s |\n", strings.Join(cells, " | "))
	}
	line(header)
	sep := make([]string, len(header))
	for i, h := range header {
		sep[i] = "--:" // numbers right-aligned
		if i == 0 || h == "verdict" {
			sep[i] = "---"
		}
	}
	fmt.Fprintf(b, "|%s|\n", strings.Join(sep, "|"))
	for _, r := range rows {
		line(r)
	}
}

// writeNotes lists the invalid results with their reasons and the
// unmatched benchmarks.
func (r *Result) writeNotes(b *strings.Builder, labels []string, md bool) {
	item := "  "
	if md {
		item = "- "
	}
	var invalid []string
	for _, t := range r.Tables {
		for _, row := range t.Rows {
			for j, d := range row.Deltas {
				if d != nil && d.Verdict == Invalid {
					invalid = append(invalid, fmt.Sprintf("%s%s in %s: %s", item, row.ID, labels[j+1], strings.Join(d.Reasons, "; ")))
				}
			}
		}
	}
	if len(invalid) > 0 {
		fmt.Fprintf(b, "\nInvalid (not counted as faster or slower, left out of the geomean):\n%s\n", strings.Join(invalid, "\n"))
	}
	if n := r.ungated(); n > 0 {
		fmt.Fprintf(b, "\nNot gated on accuracy (%s): a rel-err without a rel-err-bound in either file (files written before benchmarks reported their bounds); -tol gives a bound by dtype.\n", plural(n, "benchmark"))
	}
	if n := r.Count(Ambiguous); n > 0 {
		fmt.Fprintf(b, "\nAmbiguous (%d): the median moved by %g%% or more, but the runs cannot confirm it at α = %g: ", n, 100*r.Options.Threshold, r.Options.Alpha)
		if n1, n2, p := r.fewestAmbiguous(); p*float64(r.Comparisons) >= r.Options.Alpha {
			fmt.Fprintf(b, "with %d and %d runs no change can be significant (the U test's smallest p, %.2g, times %d comparisons is not below α).", n1, n2, p, r.Comparisons)
		} else {
			b.WriteString("too few runs for this machine's noise.")
		}
		b.WriteString(" Run more (-count 10 or more), or let zbench calibrate find the count this machine needs.\n")
	}
	if len(r.Unmatched) > 0 {
		index := map[string]string{}
		for i, f := range r.Files {
			index[f] = labels[i]
		}
		short := func(paths []string) string {
			var s []string
			for _, p := range paths {
				s = append(s, index[p])
			}
			return strings.Join(s, ", ")
		}
		fmt.Fprintf(b, "\nUnmatched (left out of the geomean): %s\n", plural(len(r.Unmatched), "benchmark"))
		for _, u := range r.Unmatched {
			fmt.Fprintf(b, "%s%s: in %s, missing from %s\n", item, u.ID, orNone(short(u.In)), short(u.MissingFrom))
		}
	}
}

// ungated returns the number of benchmarks that report a rel-err to
// which no bound applied.
func (r *Result) ungated() int {
	n := 0
	for _, t := range r.Tables {
		for _, row := range t.Rows {
			if slices.ContainsFunc(row.Deltas, func(d *Delta) bool {
				return d != nil && math.IsNaN(d.GateBound) && !(math.IsNaN(d.RelErr) && math.IsNaN(row.Base.RelErr))
			}) {
				n++
			}
		}
	}
	return n
}

// fewestAmbiguous returns the sample sizes of the ambiguous comparison
// with the fewest runs, and the smallest p-value the two-sided U test can
// give them, 2/C(n1+n2, n1), reached when the samples do not overlap.
func (r *Result) fewestAmbiguous() (n1, n2 int, p float64) {
	for _, t := range r.Tables {
		for _, row := range t.Rows {
			for _, d := range row.Deltas {
				if d == nil || d.Verdict != Ambiguous {
					continue
				}
				lc, _ := math.Lgamma(float64(row.Base.N + d.N + 1))
				l1, _ := math.Lgamma(float64(row.Base.N + 1))
				l2, _ := math.Lgamma(float64(d.N + 1))
				if q := math.Min(1, 2*math.Exp(l1+l2-lc)); q > p {
					n1, n2, p = row.Base.N, d.N, q
				}
			}
		}
	}
	return n1, n2, p
}

func orNone(s string) string {
	if s == "" {
		return "none"
	}
	return s
}

// A Record is one comparison in the CSV and JSON forms. Fields without a
// value (a rel-err not reported) are empty in CSV and null in JSON.
type Record struct {
	Workload  string   `json:"workload"`
	Dev       string   `json:"dev"`
	DType     string   `json:"dtype"`
	Benchmark string   `json:"benchmark"`
	Base      string   `json:"base"`
	File      string   `json:"file"`
	Metric    string   `json:"metric"`
	BaseN     int      `json:"base_n"`
	BaseMed   float64  `json:"base_median"`
	BaseLo    *float64 `json:"base_lo"`
	BaseHi    *float64 `json:"base_hi"`
	N         int      `json:"n"`
	Median    float64  `json:"median"`
	Lo        *float64 `json:"lo"`
	Hi        *float64 `json:"hi"`
	Change    float64  `json:"change"`
	P         float64  `json:"p"`
	PHolm     float64  `json:"p_holm"`
	Verdict   Verdict  `json:"verdict"`
	BaseErr   *float64 `json:"base_rel_err"`
	RelErr    *float64 `json:"rel_err"`
	// Bound is the rel-err bound the accuracy gate applied.
	Bound     *float64 `json:"rel_err_bound"`
	PctPeak   *float64 `json:"pct_peak"`
	AbovePeak bool     `json:"above_peak"`
	// CrossHardware is true when File ran on other hardware than Base.
	CrossHardware bool     `json:"cross_hardware"`
	Reasons       []string `json:"reasons,omitempty"`
}

// Records flattens r into one Record per benchmark and newer file.
func (r *Result) Records() []Record {
	var recs []Record
	for _, t := range r.Tables {
		for _, row := range t.Rows {
			for _, d := range row.Deltas {
				if d == nil {
					continue
				}
				recs = append(recs, Record{
					Workload: t.Workload, Dev: t.Dev, DType: t.DType, Benchmark: row.ID,
					Base: row.Base.File, File: d.File, Metric: r.Options.Metric,
					BaseN: row.Base.N, BaseMed: row.Base.Summary.Center, BaseLo: finite(row.Base.Summary.Lo), BaseHi: finite(row.Base.Summary.Hi),
					N: d.N, Median: d.Summary.Center, Lo: finite(d.Summary.Lo), Hi: finite(d.Summary.Hi),
					Change: d.Change, P: d.P, PHolm: d.PHolm, Verdict: d.Verdict,
					BaseErr: finite(row.Base.RelErr), RelErr: finite(d.RelErr), Bound: finite(d.GateBound), PctPeak: finite(d.PctPeak),
					AbovePeak: d.AbovePeak != "", CrossHardware: d.CrossHardware, Reasons: d.Reasons,
				})
			}
		}
	}
	return recs
}

func finite(v float64) *float64 {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return nil
	}
	return &v
}

// writeCSV writes one row per Record, with Record's JSON names as the
// header, so that the CSV and JSON forms cannot drift apart.
func (r *Result) writeCSV(w io.Writer) error {
	cw := csv.NewWriter(w)
	rt := reflect.TypeFor[Record]()
	header := make([]string, rt.NumField())
	for i := range header {
		header[i], _, _ = strings.Cut(rt.Field(i).Tag.Get("json"), ",")
	}
	if err := cw.Write(header); err != nil {
		return err
	}
	for _, rec := range r.Records() {
		v := reflect.ValueOf(rec)
		row := make([]string, len(header))
		for i := range row {
			row[i] = csvField(v.Field(i).Interface())
		}
		if err := cw.Write(row); err != nil {
			return err
		}
	}
	cw.Flush()
	return cw.Error()
}

// csvField formats one Record field: a missing value (nil) is empty.
func csvField(x any) string {
	switch x := x.(type) {
	case float64:
		return strconv.FormatFloat(x, 'g', -1, 64)
	case *float64:
		if x == nil {
			return ""
		}
		return strconv.FormatFloat(*x, 'g', -1, 64)
	case []string:
		return strings.Join(x, "; ")
	}
	return fmt.Sprint(x)
}

func (r *Result) writeJSON(w io.Writer) error {
	type summary struct {
		File          string            `json:"file"`
		Counts        map[Verdict]int   `json:"counts"`
		Geomean       *float64          `json:"geomean"`
		N             int               `json:"n"`
		CrossHardware bool              `json:"cross_hardware"`
		Environment   []results.Setting `json:"environment"`
	}
	out := struct {
		Files       []string    `json:"files"`
		Metric      string      `json:"metric"`
		Alpha       float64     `json:"alpha"`
		Threshold   float64     `json:"threshold"`
		Comparisons int         `json:"comparisons"`
		Summaries   []summary   `json:"summaries"`
		Records     []Record    `json:"records"`
		Unmatched   []Unmatched `json:"unmatched"`
	}{Files: r.Files, Metric: r.Options.Metric, Alpha: r.Options.Alpha, Threshold: r.Options.Threshold,
		Comparisons: r.Comparisons, Records: r.Records(), Unmatched: r.Unmatched}
	for _, s := range r.Summaries {
		env := s.Environment
		if env == nil {
			env = []results.Setting{}
		}
		out.Summaries = append(out.Summaries, summary{s.File, s.Counts, finite(s.Geomean), s.N, s.CrossHardware(), env})
	}
	if out.Unmatched == nil {
		out.Unmatched = []Unmatched{}
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(out)
}

func plural(n int, what string) string {
	if n == 1 {
		return "1 " + what
	}
	return fmt.Sprintf("%d %ss", n, what)
}
