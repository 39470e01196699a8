package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// benchSource is a benchmark package whose BenchmarkSpin does work
// proportional to spin, so that a commit can plant a slow-down.
const benchSource = `package bench

import "testing"

var sink uint64

func work(n int) {
	x := uint64(1)
	for i := 0; i < n; i++ {
		x = x*6364136223846793005 + 1442695040888963407
	}
	sink = x
}

func BenchmarkSpin(b *testing.B) {
	for b.Loop() {
		work(spin)
	}
}

func BenchmarkSteady(b *testing.B) {
	for b.Loop() {
		work(20000)
	}
}
`

// gitRepo makes a repository with one commit per spin value and returns
// its directory.
func gitRepo(t *testing.T, spins ...string) string {
	t.Helper()
	dir := t.TempDir()
	g := func(args ...string) {
		cmd := exec.Command("git", args...)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@example.com",
			"GIT_COMMITTER_NAME=t", "GIT_COMMITTER_EMAIL=t@example.com")
		out, err := cmd.CombinedOutput()
		require.NoError(t, err, "git %v: %s", args, out)
	}
	g("init", "-q")
	pkg := filepath.Join(dir, "bench")
	require.NoError(t, os.MkdirAll(pkg, 0o755))
	writeFile(t, dir, "go.mod", []byte("module example.com/spin\n\ngo 1.24\n"))
	writeFile(t, dir, ".gitignore", []byte("/.cache/\n"))
	writeFile(t, pkg, "spin_test.go", []byte(benchSource))
	for _, s := range spins {
		writeFile(t, pkg, "spin.go", []byte("package bench\n\nconst spin = "+s+"\n"))
		g("add", "-A")
		g("commit", "-q", "-m", "spin "+s)
	}
	return dir
}

// inDir runs zbench in dir.
func inDir(t *testing.T, dir string, args ...string) (string, string, error) {
	t.Helper()
	t.Chdir(dir)
	var stdout, stderr bytes.Buffer
	err := run(args, &stdout, &stderr)
	return stdout.String(), stderr.String(), err
}

// TestDiff benchmarks two commits of a small repository, the second with
// BenchmarkSpin made sixteen times as slow: diff says Spin is slower, exits 1 with
// -fail-on slower, and caches the base. Steady's verdict is not asserted: on a
// busy machine its runs may be noisy enough for any verdict, and the verdict
// logic itself is tested on fixed samples in zbench/compare.
func TestDiff(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs two benchmark binaries")
	}
	if _, err := exec.LookPath("go"); err != nil {
		t.Skip("needs the go command")
	}
	dir := gitRepo(t, "20000", "320000")
	args := []string{"diff", "HEAD~1", "HEAD", "-pkg", "./bench", "-count", "8", "-benchtime", "20ms", "-fail-on", "slower", "-format", "csv",
		"-threshold", "50%"} // BenchmarkSpin is 16x slower: far past any noise of a loaded machine
	stdout, stderr, err := inDir(t, dir, args...)
	require.ErrorContains(t, err, "diff: -fail-on slower: ")
	assert.ErrorContains(t, err, " slower (Spin")
	assert.Equal(t, 1, exitCode(err))
	assert.Regexp(t, `(?m)^Spin,,,Spin-\d+,.*,slower,`, stdout)
	assert.Regexp(t, `(?m)^Steady,,,Steady-\d+,.*,(same|ambiguous|slower|faster),`, stdout)
	assert.Contains(t, stderr, "results cached in")
	assert.NotContains(t, stderr, "\r", "no progress bar when stderr is not a terminal")

	// The base comes from the cache now; the head runs again.
	_, stderr, err = inDir(t, dir, args...)
	require.Error(t, err)
	assert.Contains(t, stderr, "base HEAD~1")
	assert.Contains(t, stderr, "8 cached passes")
	assert.Equal(t, 1, strings.Count(stderr, "building"), "only the head is built: %s", stderr)
	assert.Contains(t, stderr, "not interleaved with this run; -fresh runs them again")

	// -fresh runs the base again, interleaved.
	_, stderr, err = inDir(t, dir, append(args, "-fresh")...)
	require.ErrorContains(t, err, " slower (Spin")
	assert.Equal(t, 2, strings.Count(stderr, "building"), "both built: %s", stderr)

	out, err := exec.Command("git", "-C", dir, "worktree", "list").Output()
	require.NoError(t, err)
	assert.Equal(t, 1, strings.Count(strings.TrimSpace(string(out)), "\n")+1, "worktrees removed: %s", out)
}

func TestDiffErrors(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("needs git")
	}
	dir := gitRepo(t, "1")
	for _, tc := range []struct {
		name  string
		dir   string
		args  []string
		want  string
		usage bool
	}{
		{name: "unknown revision", dir: dir, args: []string{"nosuchbranch", "HEAD"}, want: `diff: unknown revision "nosuchbranch": not a commit of`},
		{name: "unknown head", dir: dir, args: []string{"HEAD", "v9.9"}, want: `unknown revision "v9.9"`},
		{name: "no parent", dir: dir, args: []string{"HEAD~1"}, want: `unknown revision "HEAD~1"`},
		{name: "not a repository", dir: t.TempDir(), args: nil, want: "is not in a git repository"},
		{name: "no such package", dir: dir, args: []string{"HEAD", "-pkg", "./nope"}, want: "base HEAD has no package ./nope to benchmark"},
		{name: "three revisions", dir: dir, args: []string{"a", "b", "c"}, want: "want at most two revisions", usage: true},
		{name: "bad count", dir: dir, args: []string{"-count", "0"}, want: "-count 0: want at least 1", usage: true},
		{name: "bad -bench", dir: dir, args: []string{"HEAD", "-pkg", "./bench", "-bench", "("}, want: "diff: -bench \"(\": error parsing regexp: missing closing ): `(`", usage: true},
		{name: "bad -bench part", dir: dir, args: []string{"HEAD", "-pkg", "./bench", "-bench", "Spin/[x"}, want: "diff: -bench \"Spin/[x\": error parsing regexp: missing closing ]: `[x`", usage: true},
		{name: "bad alpha", dir: dir, args: []string{"-alpha", "2"}, want: "diff: -alpha 2: want a significance level", usage: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, stderr, err := inDir(t, tc.dir, append([]string{"diff"}, tc.args...)...)
			requireCLIError(t, err, tc.want, tc.usage)
			if tc.usage {
				assert.NotContains(t, stderr, "worktree", "a usage mistake is found before any git work")
			}
		})
	}
	out, err := exec.Command("git", "-C", dir, "worktree", "list").Output()
	require.NoError(t, err)
	assert.Equal(t, 1, strings.Count(strings.TrimSpace(string(out)), "\n")+1, "a failed diff leaves no worktree: %s", out)
}
