package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"

	"github.com/zbench/zbench/zbench/runner"
)

// runFlags are the flags of the commands that build and run benchmark
// binaries (diff, calibrate).
type runFlags struct {
	settings runner.Settings
	cache    string
}

// add defines the flags on fs.
func (f *runFlags) add(fs *flag.FlagSet) {
	fs.StringVar(&f.settings.Bench, "bench", ".", "benchmarks to run (a go test -bench regular expression)")
	fs.BoolVar(&f.settings.Short, "short", false, "run the -short set of sizes")
	fs.StringVar(&f.settings.Benchtime, "benchtime", "", "go test -benchtime of each pass (default 1s)")
	fs.StringVar(&f.settings.Package, "pkg", "./bench_test", "the package holding the benchmarks, relative to the repository root")
	fs.StringVar(&f.settings.Tags, "tags", "", "build tags (cuda)")
	fs.StringVar(&f.cache, "cache", "", "directory for worktrees, binaries and cached results (default <repo>/.cache/zbench)")
}

// check validates the flags before any git or build work: a bad -bench
// pattern is a usage error, not a failure after two builds.
func (f *runFlags) check() error {
	if err := checkBench(f.settings.Bench); err != nil {
		return usageErrorf("-bench %q: %w", f.settings.Bench, err)
	}
	return nil
}

// checkBench checks a go test -bench pattern: regular expressions, one per
// level of sub-benchmark, separated by slashes that are outside brackets
// and parentheses (as package testing splits them). Each must compile.
func checkBench(pattern string) error {
	if pattern == "" {
		return errors.New("empty pattern: no benchmark would run")
	}
	for _, part := range splitBench(pattern) {
		if _, err := regexp.Compile(part); err != nil {
			return err
		}
	}
	return nil
}

// splitBench splits a -bench pattern at the slashes outside brackets and
// parentheses; a backslash escapes the next byte.
func splitBench(pattern string) []string {
	var parts []string
	brackets, parens, start := 0, 0, 0
	for i := 0; i < len(pattern); i++ {
		switch pattern[i] {
		case '\\':
			i++
		case '[':
			brackets++
		case ']':
			brackets = max(brackets-1, 0) // an unmatched ']' is a literal
		case '(':
			if brackets == 0 {
				parens++
			}
		case ')':
			if brackets == 0 {
				parens--
			}
		case '/':
			if brackets == 0 && parens == 0 {
				parts = append(parts, pattern[start:i])
				start = i + 1
			}
		}
	}
	return append(parts, pattern[start:])
}

// runner returns the runner of the repository holding the working
// directory, logging each step to stderr as "zbench: cmd: ...".
func (f *runFlags) runner(cmd string, stderr io.Writer) (*runner.Runner, error) {
	wd, err := os.Getwd()
	if err != nil {
		return nil, err
	}
	repo, err := runner.Open(wd)
	if err != nil {
		return nil, err
	}
	cache := f.cache
	if cache == "" {
		cache = filepath.Join(repo.Root, ".cache", "zbench")
	}
	return &runner.Runner{
		Repo:     repo,
		CacheDir: cache,
		Settings: f.settings,
		Log:      func(format string, args ...any) { fmt.Fprintf(stderr, "zbench: "+cmd+": "+format+"\n", args...) },
	}, nil
}

// keepOutputs writes the raw results of each arm to DIR/<label>.txt (the
// label in lower case) for -keep, and returns the paths.
func keepOutputs(dir string, arms ...*runner.Arm) ([]string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("-keep: %w", err)
	}
	paths := make([]string, len(arms))
	for i, a := range arms {
		paths[i] = filepath.Join(dir, strings.ToLower(a.Label)+".txt")
		if err := os.WriteFile(paths[i], a.Output.Bytes(), 0o644); err != nil {
			return nil, fmt.Errorf("-keep: %w", err)
		}
	}
	return paths, nil
}

// keepInterrupted writes the raw output of the passes an interrupted run
// did to keep, or to the cache's interrupted directory, and tells stderr
// what was done and where. It returns the directory and the files.
func keepInterrupted(stderr io.Writer, cmd string, r *runner.Runner, keep, what string, arms ...*runner.Arm) (dir string, paths []string, err error) {
	dir = keep
	if dir == "" {
		dir = filepath.Join(r.CacheDir, "interrupted")
	}
	if paths, err = keepOutputs(dir, arms...); err != nil {
		return dir, nil, err
	}
	fmt.Fprintf(stderr, "zbench: %s: %s; raw results in %s\n", cmd, what, strings.Join(paths, ", "))
	return dir, paths, nil
}
