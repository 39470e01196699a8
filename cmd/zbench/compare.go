package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
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
  invalid         rel-err past its dtype's tolerance, or a result above the
                  device's peak; its speed-up is not counted

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
	fs.Float64Var(&c.opts.Alpha, "alpha", 0.05, "significance level of the U test, after Holm-Bonferroni correction")
	fs.Var((*percent)(&c.opts.Threshold), "threshold", "smallest change of the median that counts as faster or slower (5% or 0.05)")
	fs.StringVar(&c.format, "format", "text", "output format: text, markdown, csv or json")
	fs.StringVar(&c.failOn, "fail-on", "", "comma-separated verdicts that make the command exit 1 (slower, invalid, ambiguous, faster), and hardware: fail when the files ran on different hardware (otherwise verdicts across hardware are not counted)")
	fs.StringVar(&c.tol, "tol", "", "rel-err tolerances overriding the defaults, as dtype=value,... (e.g. bf16=2e-2)")
	c.opts.Threshold = 0.05
}

// check validates the parsed flags.
func (c *compareFlags) check(cmd string) (compare.Format, error) {
	f, err := compare.ParseFormat(c.format)
	if err != nil {
		return "", usageErrorf("%s: -format: %v", cmd, err)
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
				return "", usageErrorf("%s: -fail-on: %v", cmd, err)
			}
			c.verdict = append(c.verdict, v)
		}
	}
	if c.tol != "" {
		c.opts.Tolerance = map[string]float64{}
		for _, kv := range strings.Split(c.tol, ",") {
			k, v, ok := strings.Cut(strings.TrimSpace(kv), "=")
			x, err := strconv.ParseFloat(v, 64)
			if !ok || k == "" || err != nil || !(x > 0) {
				return "", usageErrorf("%s: -tol: %q is not dtype=value with a positive value", cmd, kv)
			}
			c.opts.Tolerance[k] = x
		}
	}
	return f, nil
}

// failed returns the error -fail-on asks for, or nil.
func (c *compareFlags) failed(cmd string, r *compare.Result) error {
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
	return fmt.Errorf("%s: -fail-on %s: %s", cmd, c.failOn, strings.Join(errs, "; "))
}

func runCompare(args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("compare", "[flags] OLD NEW [more...]", compareDoc, stderr)
	var c compareFlags
	addCompareFlags(fs, &c)
	files, err := parseArgs(fs, args, stdout)
	if err != nil {
		return err
	}
	format, err := c.check("compare")
	if err != nil {
		return err
	}
	if len(files) < 2 {
		return usageErrorf("compare: need two or more files, OLD and NEW, got %d (see 'zbench compare -h')", len(files))
	}
	var read []*results.File
	for _, p := range files {
		f, err := results.Read(p)
		if err != nil {
			return fmt.Errorf("compare: %w", err)
		}
		warnSkipped(stderr, f)
		read = append(read, f)
	}
	res, err := compare.Run(read, c.opts)
	if err != nil {
		return err
	}
	if err := res.Write(stdout, format); err != nil {
		return fmt.Errorf("compare: writing the result: %w", err)
	}
	return c.failed("compare", res)
}

// warnSkipped tells about lines of f that looked like results but were not.
func warnSkipped(w io.Writer, f *results.File) {
	if n := len(f.Skipped); n > 0 {
		fmt.Fprintf(w, "zbench: warning: %d malformed benchmark lines skipped, first: %s\n", n, f.Skipped[0])
	}
}

// percent is a flag.Value of a fraction written as "5%" or "0.05".
type percent float64

func (p *percent) String() string { return strconv.FormatFloat(100*float64(*p), 'g', -1, 64) + "%" }

func (p *percent) Set(s string) error {
	t := strings.TrimSpace(s)
	scale := 1.0
	if v, ok := strings.CutSuffix(t, "%"); ok {
		t, scale = v, 0.01
	}
	x, err := strconv.ParseFloat(t, 64)
	if err != nil || !(x > 0) {
		return errors.New("want a positive fraction such as 5% or 0.05")
	}
	*p = percent(x * scale)
	return nil
}
