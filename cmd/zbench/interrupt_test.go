//go:build unix

package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// signalAfter makes the running command receive sig, a real signal sent
// to this process, once pass n is done.
func signalAfter(t *testing.T, n int, sig syscall.Signal) {
	t.Helper()
	t.Cleanup(func() { afterPass = nil })
	afterPass = func(done int) {
		if done == n {
			require.NoError(t, syscall.Kill(os.Getpid(), sig))
		}
	}
}

// worktrees lists git's worktrees of the repository in dir.
func worktrees(t *testing.T, dir string) []string {
	t.Helper()
	out, err := exec.Command("git", "-C", dir, "worktree", "list").Output()
	require.NoError(t, err)
	return strings.Split(strings.TrimSpace(string(out)), "\n")
}

// TestDiffInterrupted interrupts a diff with SIGINT after four passes: it
// exits 1, prints the comparison of what it measured marked partial, keeps
// the raw results, caches nothing and leaves no worktree behind.
func TestDiffInterrupted(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs two benchmark binaries")
	}
	if _, err := exec.LookPath("go"); err != nil {
		t.Skip("needs the go command")
	}
	dir := gitRepo(t, "20000", "320000")
	signalAfter(t, 4, syscall.SIGINT)
	stdout, stderr, err := inDir(t, dir, "diff", "HEAD~1", "HEAD", "-pkg", "./bench", "-count", "8", "-benchtime", "20ms")
	require.Error(t, err)
	assert.Regexp(t, `^diff: interrupted \(interrupt signal received\) after [45] of 16 passes: the partial comparison is above; raw results in `, err.Error())
	assert.Equal(t, 1, exitCode(err))
	assert.Regexp(t, `^PARTIAL RESULTS: interrupted \(interrupt signal received\) after [45] of 16 passes \(base [23], head [23]\)\n`, stdout)
	assert.Contains(t, stdout, "Spin")
	raw := filepath.Join(dir, ".cache", "zbench", "interrupted")
	assert.Contains(t, stderr, "raw results in "+filepath.Join(raw, "base.txt")+", "+filepath.Join(raw, "head.txt"))
	for _, name := range []string{"base.txt", "head.txt"} {
		assert.Contains(t, readString(t, filepath.Join(raw, name)), "BenchmarkSpin")
	}
	assert.NotContains(t, stderr, "results cached in", "an interrupted run is not cached")
	assert.Len(t, worktrees(t, dir), 1, "only the main tree is left")
	es, err := os.ReadDir(filepath.Join(dir, ".cache", "zbench", "worktrees"))
	require.NoError(t, err)
	assert.Empty(t, es, "worktree directories removed")
}

// TestCalibrateInterrupted interrupts calibrate with SIGTERM in its second
// round: it exits 1 and analyses the one round that was complete, marked
// partial.
func TestCalibrateInterrupted(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs a benchmark binary")
	}
	if _, err := exec.LookPath("go"); err != nil {
		t.Skip("needs the go command")
	}
	dir := gitRepo(t, "20000")
	signalAfter(t, 5, syscall.SIGTERM)
	keep := t.TempDir()
	stdout, stderr, err := inDir(t, dir, "calibrate", "-pkg", "./bench", "-count", "2", "-rounds", "4", "-benchtime", "10ms", "-keep", keep)
	require.Error(t, err)
	assert.Regexp(t, `^calibrate: interrupted \(terminated signal received\) after [56] of 16 passes, 1 of 4 rounds complete; raw results in `+keep+`$`, err.Error())
	assert.Equal(t, 1, exitCode(err))
	assert.Regexp(t, `^PARTIAL RESULTS: interrupted \(terminated signal received\) after [56] of 16 passes \(A 3, B [23]\), 1 of 4 rounds complete\n\nzbench calibrate: 1 A/A rounds of 2 passes per side`, stdout)
	assert.Contains(t, stderr, "raw results in "+filepath.Join(keep, "a.txt")+", "+filepath.Join(keep, "b.txt"))
	assert.Len(t, worktrees(t, dir), 1)
}
