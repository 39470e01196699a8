package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/zbench/zbench/zbench/compare"
	"github.com/zbench/zbench/zbench/results"
	"github.com/zbench/zbench/zbench/runner"
)

const diffDoc = `
Diff benchmarks two revisions of the repository in the current directory
and compares them as compare does: the pull-request check.

BASE and HEAD are git revisions (commits, branches, tags, HEAD~1). Without
HEAD, the working tree is benchmarked, uncommitted changes included;
without either, BASE is HEAD: "zbench diff" asks whether the changes not
yet committed are slower. Each commit is checked out in a worktree under
-cache, its benchmark package (-pkg) built with go test -c, and the two
binaries run -count passes each, interleaved (base, head, head, base, ...)
so that drift in the machine's speed falls on both alike. BASE's results
are cached by commit and settings, so the next diff against the same base
runs only HEAD (those passes were measured at another time, not interleaved:
-fresh runs BASE again). The raw results are kept beside the cache (-keep writes
them to a directory of your choice) and the verdict is printed in -format;
-fail-on decides the exit status.

Interrupted (Ctrl-C, SIGTERM), diff stops the running pass, removes its
worktrees, writes the passes done so far to -keep (or to
<cache>/interrupted), prints compare's table of them marked partial, and
exits with status 1. Nothing of an interrupted run is cached.`

func runDiff(args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("diff", "[flags] [BASE [HEAD]]", diffDoc, stderr)
	var c compareFlags
	addCompareFlags(fs, &c)
	var rf runFlags
	rf.add(fs)
	count := fs.Int("count", 10, "passes of every benchmark per revision")
	keep := fs.String("keep", "", "also write the raw results to DIR/base.txt and DIR/head.txt")
	fresh := fs.Bool("fresh", false, "run BASE again, interleaved with HEAD, instead of using its cached results")
	revs, err := parseArgs(fs, args, stdout)
	if err != nil {
		return err
	}
	format, err := c.check()
	if err != nil {
		return err
	}
	if err := rf.check(); err != nil {
		return err
	}
	switch {
	case len(revs) > 2:
		return usageErrorf("want at most two revisions, BASE and HEAD, got %d (see 'zbench diff -h')", len(revs))
	case *count < 1:
		return usageErrorf("-count %d: want at least 1", *count)
	}
	baseRev, headRev := "HEAD", ""
	if len(revs) > 0 {
		baseRev = revs[0]
	}
	if len(revs) > 1 {
		headRev = revs[1]
	}

	ctx, stop := signalContext()
	defer stop()
	r, err := rf.runner("diff", stderr)
	if err != nil {
		return err
	}
	r.Fresh = *fresh
	repo := r.Repo
	// Resolve both first, so that a mistyped HEAD fails before BASE builds.
	for _, rev := range []string{baseRev, headRev} {
		if rev != "" {
			if _, err := repo.Resolve(rev); err != nil {
				return err
			}
		}
	}
	base, err := r.Prepare(ctx, "base", baseRev, *count)
	if err != nil {
		return err
	}
	defer r.Close(base)
	head, err := r.Prepare(ctx, "head", headRev, *count)
	if err != nil {
		return err
	}
	defer r.Close(head)

	arms := []*runner.Arm{base, head}
	if err := interleave(ctx, r, stderr, "benchmarking", *count, arms...); err != nil {
		if ctx.Err() == nil {
			return err
		}
		// Interrupted: show what was measured; the deferred Close
		// removes the worktrees.
		return diffInterrupted(ctx, stdout, stderr, r, &c, format, *keep, *count, arms)
	}
	if err := r.Save(base); err != nil {
		return err
	}
	names := []string{base.ID(), head.ID()}
	if *keep != "" {
		if names, err = keepOutputs(*keep, arms...); err != nil {
			return err
		}
	}
	res, err := compareArms(arms, names, c.opts, rf.settings.Bench)
	if err != nil {
		return err
	}
	if err := res.Write(stdout, format); err != nil {
		return fmt.Errorf("writing the result: %w", err)
	}
	return c.failed(res)
}

// compareArms compares the results of arms, labelled names.
func compareArms(arms []*runner.Arm, names []string, opts compare.Options, bench string) (*compare.Result, error) {
	var files []*results.File
	for i, a := range arms {
		f, err := results.Parse(bytes.NewReader(a.Output.Bytes()), names[i])
		if err != nil {
			if errors.Is(err, results.ErrNoResults) {
				return nil, fmt.Errorf("%s %s printed no benchmark results for -bench %q", a.Label, a.ID(), bench)
			}
			return nil, err
		}
		files = append(files, f)
	}
	return compare.Run(files, opts)
}

// diffInterrupted reports an interrupted diff: the passes done, their raw
// results (written to keep, or to the cache's interrupted directory) and,
// when every arm has some, compare's table of them marked partial. It
// returns the error diff exits with.
func diffInterrupted(ctx context.Context, stdout, stderr io.Writer, r *runner.Runner, c *compareFlags, format compare.Format, keep string, count int, arms []*runner.Arm) error {
	done, total, counts := passCounts(count, arms)
	what := fmt.Sprintf("interrupted (%v) after %d of %d passes (%s)", context.Cause(ctx), done, total, strings.Join(counts, ", "))
	dir, paths, err := keepInterrupted(stderr, "diff", r, keep, what, arms...)
	if err != nil {
		return errors.Join(fmt.Errorf("interrupted (%w) after %d of %d passes", context.Cause(ctx), done, total), err)
	}
	shown := "no comparison: an arm has no pass"
	if res, err := compareArms(arms, paths, c.opts, r.Settings.Bench); err == nil {
		if format == compare.Text || format == compare.Markdown {
			fmt.Fprintf(stdout, "PARTIAL RESULTS: %s\n\n", what)
		}
		if err := res.Write(stdout, format); err != nil {
			return fmt.Errorf("writing the result: %w", err)
		}
		shown = "the partial comparison is above"
	}
	return fmt.Errorf("interrupted (%w) after %d of %d passes: %s; raw results in %s", context.Cause(ctx), done, total, shown, dir)
}

// passCounts counts the passes the arms that are not cached ran, out of
// count each, and describes each arm's ("base 3", "head cached").
func passCounts(count int, arms []*runner.Arm) (done, total int, counts []string) {
	for _, a := range arms {
		if a.Cached {
			counts = append(counts, a.Label+" cached")
			continue
		}
		done += len(a.Runs)
		total += count
		counts = append(counts, fmt.Sprintf("%s %d", a.Label, len(a.Runs)))
	}
	return done, total, counts
}
