package main

import (
	"bytes"
	"errors"
	"fmt"
	"io"

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
-fail-on decides the exit status.`

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
	format, err := c.check("diff")
	if err != nil {
		return err
	}
	switch {
	case len(revs) > 2:
		return usageErrorf("diff: want at most two revisions, BASE and HEAD, got %d (see 'zbench diff -h')", len(revs))
	case *count < 1:
		return usageErrorf("diff: -count %d: want at least 1", *count)
	}
	baseRev, headRev := "HEAD", ""
	if len(revs) > 0 {
		baseRev = revs[0]
	}
	if len(revs) > 1 {
		headRev = revs[1]
	}

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
				return fmt.Errorf("diff: %w", err)
			}
		}
	}
	base, err := r.Prepare("base", baseRev, *count)
	if err != nil {
		return fmt.Errorf("diff: %w", err)
	}
	defer r.Close(base)
	head, err := r.Prepare("head", headRev, *count)
	if err != nil {
		return fmt.Errorf("diff: %w", err)
	}
	defer r.Close(head)

	arms := []*runner.Arm{base, head}
	if err := interleave(r, stderr, "benchmarking", *count, arms...); err != nil {
		return fmt.Errorf("diff: %w", err)
	}
	if err := r.Save(base); err != nil {
		return fmt.Errorf("diff: %w", err)
	}
	names := []string{base.ID(), head.ID()}
	if *keep != "" {
		if names, err = keepOutputs("diff", *keep, arms...); err != nil {
			return err
		}
	}
	var files []*results.File
	for i, a := range arms {
		f, err := results.Parse(bytes.NewReader(a.Output.Bytes()), names[i])
		if err != nil {
			if errors.Is(err, results.ErrNoResults) {
				return fmt.Errorf("diff: %s %s printed no benchmark results for -bench %q", a.Label, a.ID(), rf.settings.Bench)
			}
			return fmt.Errorf("diff: %w", err)
		}
		files = append(files, f)
	}
	res, err := compare.Run(files, c.opts)
	if err != nil {
		return fmt.Errorf("diff: %w", err)
	}
	if err := res.Write(stdout, format); err != nil {
		return fmt.Errorf("diff: writing the result: %w", err)
	}
	return c.failed("diff", res)
}
