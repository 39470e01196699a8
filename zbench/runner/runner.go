// Package runner builds the benchmark binary of a git revision of the
// repository (in a worktree of its own) or of the working tree, and runs
// the binaries of several such arms interleaved, one benchmark pass at a
// time, so that drift in the machine's speed (thermal state, other load,
// frequency scaling) falls on every arm alike instead of on whichever ran
// last. Results of a clean commit are cached by commit and run settings, so
// a pull-request check runs its base once.
package runner

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
)

// ErrRevision is wrapped by the error for a revision git cannot resolve.
var ErrRevision = errors.New("unknown revision")

// Repo is a git repository.
type Repo struct {
	// Root is the top of the working tree.
	Root string
}

// Open returns the repository holding dir.
func Open(dir string) (*Repo, error) {
	out, err := git(dir, "rev-parse", "--show-toplevel")
	if err != nil {
		return nil, fmt.Errorf("%s is not in a git repository: %w", dir, err)
	}
	return &Repo{Root: out}, nil
}

// Resolve returns the full commit hash of rev.
func (r *Repo) Resolve(rev string) (string, error) {
	if rev == "" || strings.HasPrefix(rev, "-") {
		return "", fmt.Errorf("%w %q", ErrRevision, rev)
	}
	out, err := git(r.Root, "rev-parse", "--verify", "--quiet", "--end-of-options", rev+"^{commit}")
	if err != nil || out == "" {
		return "", fmt.Errorf("%w %q: not a commit of %s", ErrRevision, rev, r.Root)
	}
	return out, nil
}

// Dirty reports whether the working tree has uncommitted changes to
// tracked files.
func (r *Repo) Dirty() (bool, error) {
	out, err := git(r.Root, "status", "--porcelain", "--untracked-files=no")
	if err != nil {
		return false, err
	}
	return out != "", nil
}

// git runs git in dir and returns its trimmed stdout; the error carries
// git's own message.
func git(dir string, args ...string) (string, error) {
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		msg := strings.TrimSpace(stderr.String())
		if msg == "" {
			msg = err.Error()
		}
		return "", fmt.Errorf("git %s: %s", strings.Join(args, " "), firstLine(msg))
	}
	return strings.TrimSpace(string(out)), nil
}

func firstLine(s string) string {
	line, _, _ := strings.Cut(s, "\n")
	return line
}

// An Arm is one side of a comparison: the benchmark binary of a commit or
// of the working tree, and the results it has produced.
type Arm struct {
	// Label names the arm in messages ("base", "head").
	Label string
	// Rev is the revision as the user gave it, Commit its hash; Commit
	// is empty for the working tree.
	Rev, Commit string
	// Dir is the package directory the binary runs in (its testdata
	// relative paths resolve from there).
	Dir string
	// Binary is the built test binary.
	Binary string
	// Output is every benchmark line and config line the runs printed.
	Output bytes.Buffer
	// Runs is the output of each pass this process ran, in order.
	Runs [][]byte
	// Cached is true when Output came from the cache and the arm is not
	// run again.
	Cached bool

	worktree string
	// code is what the binary reports as zbench-commit: the short
	// commit, or for the working tree its HEAD, with "-dirty" when it has
	// uncommitted changes.
	code string
}

// Twin returns an arm that runs the same binary as a, with results of its
// own: the other side of an A/A comparison.
func (a *Arm) Twin(label string) *Arm {
	return &Arm{Label: label, Rev: a.Rev, Commit: a.Commit, Dir: a.Dir, Binary: a.Binary, code: a.code}
}

// ID is what the results are labelled with: the short commit, or
// "worktree" for the working tree.
func (a *Arm) ID() string {
	if a.Commit != "" {
		return a.Commit[:12]
	}
	return "worktree"
}

// Settings are what a benchmark run depends on besides the code, and
// what a cached result must match.
type Settings struct {
	// Package is the package holding the benchmarks, relative to the
	// repository root: "./bench_test".
	Package string
	// Bench is the -test.bench regular expression.
	Bench string
	// Short adds -test.short.
	Short bool
	// Benchtime is -test.benchtime ("" for the default 1s).
	Benchtime string
	// Tags are build tags ("cuda"), comma-separated.
	Tags string
}

// args are the test binary's arguments for one pass of every benchmark.
func (s Settings) args() []string {
	a := []string{"-test.run=^$", "-test.bench=" + s.Bench, "-test.count=1"}
	if s.Short {
		a = append(a, "-test.short")
	}
	if s.Benchtime != "" {
		a = append(a, "-test.benchtime="+s.Benchtime)
	}
	return a
}

// key identifies the settings, this machine and Go in the cache.
func (s Settings) key() string {
	host, _ := os.Hostname()
	h := sha256.New()
	fmt.Fprintf(h, "%q %q %v %q %q %s %s %s/%s %d", s.Package, s.Bench, s.Short, s.Benchtime, s.Tags,
		host, runtime.Version(), runtime.GOOS, runtime.GOARCH, runtime.NumCPU())
	return hex.EncodeToString(h.Sum(nil))[:16]
}

// A Runner builds and runs arms.
type Runner struct {
	Repo *Repo
	// Go is the go command ("go" by default).
	Go string
	// CacheDir holds worktrees, binaries and cached results.
	CacheDir string
	Settings Settings
	// Fresh ignores cached results (they are still written).
	Fresh bool
	// Log receives one line per step (building, caching); nil for none.
	Log func(format string, args ...any)
}

func (r *Runner) logf(format string, args ...any) {
	if r.Log != nil {
		r.Log(format, args...)
	}
}

// Prepare builds the arm for rev: a commit checked out in a worktree of
// its own, or the working tree itself when rev is "" (uncommitted changes
// included). A clean commit whose results are in the cache with at least
// count passes is not built: its Output is filled from the cache.
// Cancelling ctx stops the build; the arm's worktree is removed then, as
// on any other error.
func (r *Runner) Prepare(ctx context.Context, label, rev string, count int) (*Arm, error) {
	arm := &Arm{Label: label, Rev: rev}
	src := r.Repo.Root
	if rev != "" {
		c, err := r.Repo.Resolve(rev)
		if err != nil {
			return nil, err
		}
		arm.Commit = c
		if !r.Fresh {
			p := r.cachePath(c)
			if out, err := os.ReadFile(p); err == nil {
				if n := countPasses(out); n >= count {
					arm.Output.Write(out)
					arm.Cached = true
					r.logf("%s %s (%s): %d cached passes in %s (measured earlier, not interleaved with this run; -fresh runs them again)",
						label, rev, c[:12], n, p)
					return arm, nil
				}
			}
		}
		wt := filepath.Join(r.CacheDir, "worktrees", c[:12])
		if _, err := os.Stat(wt); err != nil {
			// A stale registration (the directory was deleted) would
			// make worktree add fail.
			_, _ = git(r.Repo.Root, "worktree", "prune")
			r.logf("%s %s (%s): checking out a worktree in %s", label, rev, c[:12], wt)
			if _, err := git(r.Repo.Root, "worktree", "add", "--detach", "--force", wt, c); err != nil {
				return nil, fmt.Errorf("%s %s: %w", label, rev, err)
			}
		}
		arm.worktree, src = wt, wt
	}
	if err := r.build(ctx, arm, src); err != nil {
		_ = r.Close(arm)
		return nil, err
	}
	return arm, nil
}

// build builds the benchmark binary of arm from the tree at src.
func (r *Runner) build(ctx context.Context, arm *Arm, src string) error {
	label, rev := arm.Label, arm.Rev
	arm.code = arm.ID()
	if arm.Commit == "" {
		if c, err := r.Repo.Resolve("HEAD"); err == nil {
			arm.code = c[:12]
		}
		if dirty, _ := r.Repo.Dirty(); dirty {
			arm.code += "-dirty"
		}
	}
	arm.Dir = filepath.Join(src, filepath.FromSlash(r.Settings.Package))
	if _, err := os.Stat(arm.Dir); err != nil {
		return fmt.Errorf("%s %s has no package %s to benchmark", label, orWorkingTree(rev), r.Settings.Package)
	}
	if err := os.MkdirAll(filepath.Join(r.CacheDir, "bin"), 0o755); err != nil {
		return err
	}
	arm.Binary = filepath.Join(r.CacheDir, "bin", label+"-"+arm.ID()+".test")
	r.logf("%s %s: building %s", label, orWorkingTree(rev), r.Settings.Package)
	args := []string{"test", "-c", "-o", arm.Binary}
	if r.Settings.Tags != "" {
		args = append(args, "-tags", r.Settings.Tags)
	}
	cmd := exec.CommandContext(ctx, r.goCmd(), append(args, ".")...)
	cmd.Dir = arm.Dir
	if out, err := cmd.CombinedOutput(); err != nil {
		if ctx.Err() != nil {
			return fmt.Errorf("building the benchmarks of %s %s: %w", label, orWorkingTree(rev), context.Cause(ctx))
		}
		return fmt.Errorf("building the benchmarks of %s %s: %v: %s", label, orWorkingTree(rev), err, firstLine(strings.TrimSpace(string(out))))
	}
	return nil
}

func orWorkingTree(rev string) string {
	if rev == "" {
		return "(the working tree)"
	}
	return rev
}

func (r *Runner) goCmd() string {
	if r.Go != "" {
		return r.Go
	}
	return "go"
}

func (r *Runner) cachePath(commit string) string {
	return filepath.Join(r.CacheDir, "results", commit[:12]+"-"+r.Settings.key()+".txt")
}

// countPasses is the number of benchmark passes in out: one per "PASS"
// line the test binary prints at the end of a run.
func countPasses(out []byte) int {
	n := 0
	for line := range bytes.Lines(out) {
		if string(bytes.TrimSpace(line)) == "PASS" {
			n++
		}
	}
	return n
}

// Pass runs one pass of every benchmark of arm and appends its output.
// ZBENCH_COMMIT tells the binary which code it is (the worktree's git state
// is not the caller's); it was found once, when the arm was built.
// Cancelling ctx kills the binary; the pass is dropped and the error wraps
// context.Cause(ctx).
func (r *Runner) Pass(ctx context.Context, arm *Arm) error {
	if err := context.Cause(ctx); err != nil {
		return err
	}
	cmd := exec.CommandContext(ctx, arm.Binary, r.Settings.args()...)
	cmd.Dir = arm.Dir
	cmd.Env = append(os.Environ(), "ZBENCH_COMMIT="+arm.code)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil && ctx.Err() != nil {
		return fmt.Errorf("%s %s: pass interrupted: %w", arm.Label, orWorkingTree(arm.Rev), context.Cause(ctx))
	}
	if err != nil {
		// A failing benchmark prints its reason on stdout, with --- FAIL.
		msg := failure(out)
		if msg == "" {
			msg = firstLine(strings.TrimSpace(stderr.String()))
		}
		return fmt.Errorf("%s %s: benchmark run failed: %v: %s", arm.Label, orWorkingTree(arm.Rev), err, msg)
	}
	if !bytes.Contains(out, []byte("\nBenchmark")) && !bytes.HasPrefix(out, []byte("Benchmark")) {
		return fmt.Errorf("%s %s: no benchmark matches -bench %q in %s", arm.Label, orWorkingTree(arm.Rev), r.Settings.Bench, r.Settings.Package)
	}
	arm.Output.Write(out)
	arm.Runs = append(arm.Runs, out)
	return nil
}

// failure picks the first "--- FAIL" line and the line after it.
func failure(out []byte) string {
	lines := strings.Split(string(out), "\n")
	for i, l := range lines {
		if strings.HasPrefix(strings.TrimSpace(l), "--- FAIL") {
			msg := strings.TrimSpace(l)
			if i+1 < len(lines) {
				msg += " " + strings.TrimSpace(lines[i+1])
			}
			return msg
		}
	}
	return ""
}

// Save stores the results of a commit arm in the cache; the working tree
// and cached arms are not stored.
func (r *Runner) Save(arm *Arm) error {
	if arm.Commit == "" || arm.Cached {
		return nil
	}
	p := r.cachePath(arm.Commit)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		return err
	}
	tmp := p + ".tmp"
	if err := os.WriteFile(tmp, arm.Output.Bytes(), 0o644); err != nil {
		return err
	}
	if err := os.Rename(tmp, p); err != nil {
		return err
	}
	r.logf("%s %s (%s): results cached in %s", arm.Label, arm.Rev, arm.Commit[:12], p)
	return nil
}

// Close removes the worktrees of arms and prunes git's records of any
// worktree whose directory is gone (one a killed run left half made).
func (r *Runner) Close(arms ...*Arm) error {
	var errs []error
	removed := false
	for _, a := range arms {
		if a != nil && a.worktree != "" {
			if _, err := git(r.Repo.Root, "worktree", "remove", "--force", a.worktree); err != nil {
				errs = append(errs, err)
			}
			a.worktree, removed = "", true
		}
	}
	if removed {
		if _, err := git(r.Repo.Root, "worktree", "prune"); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// Interleave runs count passes of every arm that is not cached, in
// alternating order (A B, B A, A B, ...) so that neither arm always runs
// first; step is called after each pass with the number done and the
// total. Cancelling ctx stops the run at once: the passes done so far stay
// in the arms' Output and Runs, and the error wraps context.Cause(ctx).
func (r *Runner) Interleave(ctx context.Context, arms []*Arm, count int, step func(done, total int, arm *Arm)) error {
	var live []*Arm
	for _, a := range arms {
		if !a.Cached {
			live = append(live, a)
		}
	}
	total, done := count*len(live), 0
	for i := range count {
		for k := range live {
			a := live[k]
			if i%2 == 1 {
				a = live[len(live)-1-k]
			}
			if err := r.Pass(ctx, a); err != nil {
				return err
			}
			done++
			if step != nil {
				step(done, total, a)
			}
		}
	}
	return nil
}
