package main

import (
	"os/exec"
	"testing"

	"github.com/stretchr/testify/assert"
)

// TestCalibrateErrors checks that bad flags are usage errors found before
// anything is built.
func TestCalibrateErrors(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("needs git")
	}
	dir := gitRepo(t, "1")
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{name: "bad -bench", args: []string{"-bench", "["}, want: "calibrate: -bench \"[\": error parsing regexp: missing closing ]: `[`"},
		{name: "bad -bench part", args: []string{"-bench", "Spin/x("}, want: "calibrate: -bench \"Spin/x(\": error parsing regexp: missing closing ): `x(`"},
		{name: "empty -bench", args: []string{"-bench", ""}, want: `calibrate: -bench "": empty pattern: no benchmark would run`},
		{name: "bad count", args: []string{"-count", "1"}, want: "calibrate: -count 1: want at least 2"},
		{name: "bad rounds", args: []string{"-rounds", "0"}, want: "calibrate: -rounds 0: want at least 1"},
		{name: "bad alpha", args: []string{"-alpha", "0"}, want: "calibrate: -alpha 0: want a significance level between 0 and 1, exclusive"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, stderr, err := inDir(t, dir, append([]string{"calibrate", "-pkg", "./bench"}, tc.args...)...)
			requireCLIError(t, err, tc.want, true)
			assert.NotContains(t, stderr, "building", "nothing is built")
		})
	}
}

func TestCheckBench(t *testing.T) {
	for _, tc := range []struct {
		pattern string
		parts   []string
		ok      bool
	}{
		{".", []string{"."}, true},
		{"MatMul/dev=cpu", []string{"MatMul", "dev=cpu"}, true},
		{"BERT/(batch=1|seq=8)/x", []string{"BERT", "(batch=1|seq=8)", "x"}, true},
		{"A[/]B/C", []string{"A[/]B", "C"}, true},
		{`A\/B/C`, []string{`A\/B`, "C"}, true},
		{"A(x/y)", []string{"A(x/y)"}, true},
		{"(", []string{"("}, false},
		{"[", []string{"["}, false},
		{"ok/(", []string{"ok", "("}, false},
		{"a/", []string{"a", ""}, true},
		{"", []string{""}, false},
	} {
		t.Run(tc.pattern, func(t *testing.T) {
			assert.Equal(t, tc.parts, splitBench(tc.pattern))
			assert.Equal(t, tc.ok, checkBench(tc.pattern) == nil)
		})
	}
}

func FuzzCheckBench(f *testing.F) {
	for _, s := range []string{".", "A/B", "A[/]B/(x|y)", "(", `\`, "]/)"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, pattern string) {
		parts := splitBench(pattern)
		assert.NotEmpty(t, parts)
		joined := parts[0]
		for _, p := range parts[1:] {
			joined += "/" + p
		}
		assert.Equal(t, pattern, joined, "the parts are the pattern, split at slashes")
		_ = checkBench(pattern)
	})
}
