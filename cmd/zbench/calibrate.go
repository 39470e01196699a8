package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"math"
	"strings"
	"text/tabwriter"

	"github.com/zbench/zbench/zbench/calibrate"
	"github.com/zbench/zbench/zbench/compare"
	"github.com/zbench/zbench/zbench/results"
	"github.com/zbench/zbench/zbench/runner"
)

const calibrateDoc = `
Calibrate runs A/A comparisons on this machine: the benchmarks of the
working tree (-pkg, -bench, -short) built once and run as both sides of
-rounds comparisons of -count passes each, interleaved. Since both sides
are the same code, every verdict other than same is a false one, and
calibrate reports how many there were. From the pooled samples of each
benchmark it then estimates, by resampling with a planted change, the
smallest change that a comparison of N passes per side detects with 80%
probability (the U test at -alpha, corrected for the number of benchmarks
as compare corrects it), for N from 3 to 30, and recommends the smallest
-count at which every benchmark detects a change of -threshold.

Interrupted (Ctrl-C, SIGTERM), calibrate stops the running pass, writes
the passes done so far to -keep (or to <cache>/interrupted), analyses the
rounds that were complete, marked partial, and exits with status 1.`

func runCalibrate(args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("calibrate", "[flags]", calibrateDoc, stderr)
	var c compareFlags
	addCompareFlags(fs, &c)
	count := fs.Int("count", 10, "passes per side in each A/A comparison")
	rounds := fs.Int("rounds", 3, "A/A comparisons to run")
	var rf runFlags
	rf.add(fs)
	seed := fs.Uint64("seed", 1, "seed of the resampling")
	keep := fs.String("keep", "", "also write the raw results to DIR/a.txt and DIR/b.txt")
	if err := parseFlags(fs, args, stdout); err != nil {
		return err
	}
	if _, err := c.check(); err != nil {
		return err
	}
	if err := rf.check(); err != nil {
		return err
	}
	switch {
	case *count < 2:
		return usageErrorf("-count %d: want at least 2", *count)
	case *rounds < 1:
		return usageErrorf("-rounds %d: want at least 1", *rounds)
	}
	ctx, stop := signalContext()
	defer stop()
	r, err := rf.runner("calibrate", stderr)
	if err != nil {
		return err
	}
	a, err := r.Prepare(ctx, "A", "", 0)
	if err != nil {
		return err
	}
	arms := []*runner.Arm{a, a.Twin("B")}
	var interrupted error
	if err := interleave(ctx, r, stderr, "A/A runs", *count**rounds, arms...); err != nil {
		if ctx.Err() == nil {
			return err
		}
		done, total, counts := passCounts(*count**rounds, arms)
		complete := min(len(arms[0].Runs), len(arms[1].Runs)) / *count
		what := fmt.Sprintf("interrupted (%v) after %d of %d passes (%s), %d of %d rounds complete",
			context.Cause(ctx), done, total, strings.Join(counts, ", "), complete, *rounds)
		dir, _, err := keepInterrupted(stderr, "calibrate", r, *keep, what, arms...)
		if err != nil {
			return err
		}
		interrupted = fmt.Errorf("interrupted (%w) after %d of %d passes, %d of %d rounds complete; raw results in %s",
			context.Cause(ctx), done, total, complete, *rounds, dir)
		if complete == 0 {
			return interrupted
		}
		fmt.Fprintf(stdout, "PARTIAL RESULTS: %s\n\n", what)
		*rounds = complete
	} else if *keep != "" {
		if _, err := keepOutputs(*keep, arms...); err != nil {
			return err
		}
	}
	var sides [][2]*results.File
	for i := range *rounds {
		var pair [2]*results.File
		for k, arm := range arms {
			out := bytes.Join(arm.Runs[i**count:(i+1)**count], nil)
			f, err := results.Parse(bytes.NewReader(out), fmt.Sprintf("%s round %d", arm.Label, i+1))
			if err != nil {
				return err
			}
			pair[k] = f
		}
		sides = append(sides, pair)
	}
	rep, err := calibrate.Analyze(sides, *count, calibrate.Options{Compare: c.opts, Seed: *seed})
	if err != nil {
		return err
	}
	if err := writeCalibration(stdout, rep, r.Settings); err != nil {
		return err
	}
	return interrupted
}

// writeCalibration prints the report of a calibration.
func writeCalibration(w io.Writer, rep *calibrate.Report, s runner.Settings) error {
	var b strings.Builder
	o := rep.Options
	fmt.Fprintf(&b, "zbench calibrate: %d A/A rounds of %d passes per side, %d benchmarks (-bench %q", rep.Rounds, rep.Count, len(rep.Benches), s.Bench)
	if s.Short {
		b.WriteString(" -short")
	}
	fmt.Fprintf(&b, "), %s, threshold %g%%, alpha %g\n\n", o.Compare.Metric, 100*o.Compare.Threshold, o.Compare.Alpha)
	total := 0
	var counts []string
	for _, v := range compare.Verdicts {
		if n := rep.Verdicts[v]; n > 0 {
			counts = append(counts, fmt.Sprintf("%d %s", n, v))
		}
		total += rep.Verdicts[v]
	}
	fmt.Fprintf(&b, "false verdicts: %d of %d (%.1f%%): %s\n", total-rep.Verdicts[compare.Same], total, 100*rep.FalseRate, strings.Join(counts, ", "))
	fmt.Fprintf(&b, "\nsmallest change detected with %.0f%% probability, by passes per side (U test at %g/%d):\n", 100*o.Power, o.Compare.Alpha, len(rep.Benches))
	tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
	head := []string{"benchmark", "noise", "false"}
	for _, n := range o.Counts {
		head = append(head, fmt.Sprintf("n=%d", n))
	}
	fmt.Fprintln(tw, strings.Join(head, "\t"))
	for _, bn := range rep.Benches {
		row := []string{bn.ID, fmt.Sprintf("%.1f%%", 100*bn.Noise), fmt.Sprintf("%d/%d", bn.False, rep.Rounds)}
		for _, d := range bn.Detectable {
			row = append(row, pct(d))
		}
		fmt.Fprintln(tw, strings.Join(row, "\t"))
	}
	tw.Flush()
	worst := 0.0
	if i := rep.AtCount(rep.Count); i >= 0 {
		for _, bn := range rep.Benches {
			worst = math.Max(worst, bn.Detectable[i])
		}
	}
	fmt.Fprintf(&b, "\nat -count %d the least sensitive benchmark detects %s\n", rep.Count, pct(worst))
	if rep.Recommended > 0 {
		fmt.Fprintf(&b, "recommended: -count %d (the smallest at which every benchmark detects a %g%% change)\n", rep.Recommended, 100*o.Compare.Threshold)
	} else {
		fmt.Fprintf(&b, "recommended: no count up to %d detects a %g%% change in every benchmark; too noisy: %s\n",
			o.Counts[len(o.Counts)-1], 100*o.Compare.Threshold, strings.Join(rep.Noisiest, ", "))
	}
	_, err := io.WriteString(w, b.String())
	return err
}

func pct(v float64) string {
	if math.IsInf(v, 1) {
		return "none"
	}
	return fmt.Sprintf("%.1f%%", 100*v)
}
