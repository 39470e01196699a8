package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/zbench/zbench/zbench/compare"
	"github.com/zbench/zbench/zbench/results"
)

const compareDoc = `
Compare compares the benchmark results in NEW (and any more files) with
those in OLD, benchstat-style: per benchmark, grouped by workload, /dev and
/dtype, the median of the metric with its 95% confidence interval, the
change of the median and the p-value of the Mann-Whitney U test. Each
benchmark gets a verdict:

  faster, slower  a change of at least -threshold that is significant at
                  -alpha after Holm-Bonferroni correction over every
                  benchmark compared
  same            a change smaller than -threshold
  ambiguous       a change of at least -threshold the runs cannot confirm
                  (too noisy, or too few: run more)
  invalid         rel-err past the bound its benchmark reports
                  (rel-err-bound: the newer file's, else the base's; -tol
                  overrides it by dtype), or a result above the device's
                  peak; its speed-up is not counted

A benchmark whose files report no rel-err-bound (files written before
benchmarks reported their bounds) is not gated on accuracy; the output
counts such benchmarks.

%peak comes from the benchmark or, marked *, from its GFLOP/s and GB/s and
the device peak in the file's config lines. Benchmarks missing from a file
are listed, and left out of the geomean. With -fail-on, compare exits with
status 1 when any benchmark gets one of the listed verdicts.

The files' configuration lines are compared first, and differences are
listed above the tables. When the hardware differs (cpu or gpu model, core
count, GOMAXPROCS, clocks), every verdict is marked (cross-hw): it compares
machines, not code. -fail-on does not count such verdicts (invalid ones
excepted) unless it lists hardware, which also fails on the difference
itself.`

// compareFlags are the flags compare and diff share.
type compareFlags struct {
	opts    compare.Options
	format  string
	failOn  string
	tol     string
	verdict []compare.Verdict
	// hardware is set by -fail-on hardware: fail when the files ran on
	// different hardware, and count cross-hardware verdicts.
	hardware bool
}

// addCompareFlags defines the comparison flags on fs.
func addCompareFlags(fs *flag.FlagSet, c *compareFlags) {
	fs.StringVar(&c.opts.Metric, "metric", "sec/op", "the metric compared (a unit of the results: sec/op, gpu-sec/op, tok/s, ...)")
	fs.Float64Var(&c.opts.Alpha, "alpha", 0.05, "significance level of the U test, after Holm-Bonferroni correction (0 < alpha < 1)")
	fs.Var((*percent)(&c.opts.Threshold), "threshold", "smallest change of the median that counts as faster or slower (5% or 0.05)")
	fs.StringVar(&c.format, "format", "text", "output format: text, markdown, csv or json")
	fs.StringVar(&c.failOn, "fail-on", "", "comma-separated verdicts that make the command exit 1 (slower, invalid, ambiguous, faster), and hardware: fail when the files ran on different hardware (otherwise verdicts across hardware are not counted)")
	fs.StringVar(&c.tol, "tol", "", "rel-err tolerances overriding the bounds the benchmarks report (rel-err-bound), as dtype=value,... (e.g. bf16=2e-2; dtypes: "+strings.Join(compare.DTypes, ", ")+")")
	c.opts.Threshold = 0.05
}

// check validates the parsed flags; a bad value is a usage error naming
// its flag.
func (c *compareFlags) check() (compare.Format, error) {
	if !(c.opts.Alpha > 0 && c.opts.Alpha < 1) {
		return "", usageErrorf("-alpha %v: want a significance level between 0 and 1, exclusive (such as 0.05)", c.opts.Alpha)
	}
	f, err := compare.ParseFormat(c.format)
	if err != nil {
		return "", usageErrorf("-format: %w", err)
	}
	c.verdict, c.hardware = nil, false
	if c.failOn != "" {
		for _, s := range strings.Split(c.failOn, ",") {
			if strings.TrimSpace(s) == "hardware" {
				c.hardware = true
				continue
			}
			v, err := compare.ParseVerdict(strings.TrimSpace(s))
			if err != nil {
				return "", usageErrorf("-fail-on: %w", err)
			}
			c.verdict = append(c.verdict, v)
		}
	}
	if c.tol != "" {
		c.opts.Tolerance = map[string]float64{}
		for _, kv := range strings.Split(c.tol, ",") {
			k, v, ok := strings.Cut(strings.TrimSpace(kv), "=")
			x, err := strconv.ParseFloat(v, 64)
			if !ok || k == "" || err != nil || !(x > 0) || math.IsInf(x, 0) {
				return "", usageErrorf("-tol: %q is not dtype=value with a positive value", kv)
			}
			if !slices.Contains(compare.DTypes, k) {
				return "", usageErrorf("-tol: unknown dtype %q (known: %s)", k, strings.Join(compare.DTypes, ", "))
			}
			c.opts.Tolerance[k] = x
		}
	}
	return f, nil
}

// failed returns the error -fail-on asks for, or nil.
func (c *compareFlags) failed(r *compare.Result) error {
	var errs []string
	if c.hardware && r.CrossHardware() {
		errs = append(errs, "the files ran on different hardware")
	}
	for _, v := range c.verdict {
		if ids := r.With(v, c.hardware); len(ids) > 0 {
			const show = 3
			n, more := len(ids), ""
			if n > show {
				more = fmt.Sprintf(" and %d more", n-show)
				ids = ids[:show]
			}
			errs = append(errs, fmt.Sprintf("%d %s (%s%s)", n, v, strings.Join(ids, ", "), more))
		}
	}
	if len(errs) == 0 {
		return nil
	}
	return fmt.Errorf("-fail-on %s: %s", c.failOn, strings.Join(errs, "; "))
}

func runCompare(args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("compare", "[flags] OLD NEW [more...]", compareDoc, stderr)
	var c compareFlags
	addCompareFlags(fs, &c)
	files, err := parseArgs(fs, args, stdout)
	if err != nil {
		return err
	}
	format, err := c.check()
	if err != nil {
		return err
	}
	if len(files) < 2 {
		return usageErrorf("need two or more files, OLD and NEW, got %d (see 'zbench compare -h')", len(files))
	}
	var read []*results.File
	for _, p := range files {
		f, err := results.Read(p)
		if err != nil {
			return err
		}
		warnSkipped(stderr, f)
		read = append(read, f)
	}
	res, err := compare.Run(read, c.opts)
	if err != nil {
		return err
	}
	if err := res.Write(stdout, format); err != nil {
		return fmt.Errorf("writing the result: %w", err)
	}
	return c.failed(res)
}

// warnSkipped tells about lines of f that looked like results but were not.
func warnSkipped(w io.Writer, f *results.File) {
	if n := len(f.Skipped); n > 0 {
		fmt.Fprintf(w, "zbench: warning: %d malformed benchmark lines skipped, first: %s\n", n, f.Skipped[0])
	}
}

// percent is a flag.Value of a fraction written as a percentage ("5%") or
// as a fraction below 1 ("0.05"). A bare number of 1 or more is refused:
// "5" could mean 5% or 500%.
type percent float64

// maxPercent bounds a percent, as compare bounds its threshold.
const maxPercent = 10

func (p *percent) String() string { return strconv.FormatFloat(100*float64(*p), 'g', -1, 64) + "%" }

// Set parses s as "5%" or "0.05".
func (p *percent) Set(s string) error {
	t := strings.TrimSpace(s)
	v, pct := strings.CutSuffix(t, "%")
	x, err := strconv.ParseFloat(v, 64)
	switch {
	case err != nil || !(x > 0):
		return errors.New("want a positive change such as 5% or 0.05")
	case pct:
		x /= 100
	case x >= 1:
		return fmt.Errorf("a bare %s is ambiguous: write %s%% or %s", t, t, strconv.FormatFloat(x/100, 'g', -1, 64))
	}
	if !(x < maxPercent) {
		return fmt.Errorf("want a change below %d%%", 100*maxPercent)
	}
	*p = percent(x)
	return nil
}
