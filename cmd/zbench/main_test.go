package main

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestRunCommands(t *testing.T) {
	for _, tc := range []struct {
		name       string
		args       []string
		wantErr    string // "" for success
		wantStdout []string
		wantStderr []string
	}{
		{name: "help", args: []string{"help"}, wantStdout: []string{"usage: zbench <command>", "infer", "run a model"}},
		{name: "-h", args: []string{"-h"}, wantStdout: []string{"usage: zbench <command>", "infer"}},
		{name: "--help", args: []string{"--help"}, wantStdout: []string{"infer"}},
		{name: "help infer", args: []string{"help", "infer"}, wantStdout: []string{"usage: zbench infer --model", "-weights path", "last_hidden_state"}},
		{name: "infer -h", args: []string{"infer", "-h"}, wantStdout: []string{"usage: zbench infer", "-dtype"}},
		{name: "no command", args: nil, wantErr: "no command given", wantStderr: []string{"usage: zbench <command>", "infer"}},
		{name: "unknown command", args: []string{"frobnicate"}, wantErr: `unknown command "frobnicate" (want env, compare, diff, calibrate, report, infer`},
		{name: "help unknown", args: []string{"help", "frobnicate"}, wantErr: `unknown command "frobnicate"`},
		{name: "help two", args: []string{"help", "infer", "env"}, wantErr: "help takes at most one command"},
		{name: "unknown flag", args: []string{"infer", "--frob"}, wantErr: "infer: flag provided but not defined: -frob (see 'zbench infer -h')"},
		{name: "flag without value", args: []string{"infer", "--model"}, wantErr: "infer: flag needs an argument: -model"},
		{name: "positional", args: []string{"infer", "--model", "bert", "extra"}, wantErr: `infer: unexpected argument "extra"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			err := run(tc.args, &stdout, &stderr)
			if tc.wantErr == "" {
				require.NoError(t, err)
				assert.Empty(t, stderr.String())
			} else {
				require.Error(t, err)
				assert.Contains(t, err.Error(), tc.wantErr)
				assert.NotContains(t, err.Error(), "\n")
				assert.Equal(t, 2, exitCode(err), "a command-line mistake exits 2")
				assert.Empty(t, stdout.String())
			}
			for _, s := range tc.wantStdout {
				assert.Contains(t, stdout.String(), s)
			}
			for _, s := range tc.wantStderr {
				assert.Contains(t, stderr.String(), s)
			}
		})
	}
}

func TestExitCode(t *testing.T) {
	assert.Equal(t, 0, exitCode(nil))
	assert.Equal(t, 1, exitCode(errors.New("boom")))
	assert.Equal(t, 2, exitCode(usageErrorf("bad flag")))
	assert.Equal(t, 2, exitCode(fmt.Errorf("wrapped: %w", usageErrorf("bad flag"))))
}

func TestOneLine(t *testing.T) {
	err := errors.Join(errors.New("load failed"), errors.New("free failed"))
	assert.Equal(t, "load failed; free failed", oneLine(err))
	assert.Equal(t, "plain", oneLine(errors.New("plain")))
}

func TestCommandsHaveHelp(t *testing.T) {
	seen := map[string]bool{}
	for _, c := range commands {
		assert.False(t, seen[c.name], "command %s listed twice", c.name)
		seen[c.name] = true
		assert.NotEmpty(t, c.summary, c.name)
		assert.NotContains(t, c.summary, "\n", c.name)
		var stdout, stderr bytes.Buffer
		require.NoError(t, run([]string{c.name, "-h"}, &stdout, &stderr), c.name)
		assert.Contains(t, stdout.String(), "usage: zbench "+c.name, c.name)
		stdout.Reset()
		require.NoError(t, run([]string{"help", c.name}, &stdout, &stderr), "help "+c.name)
		assert.Contains(t, stdout.String(), "usage: zbench "+c.name, "help "+c.name)
		assert.Empty(t, stderr.String(), c.name)
	}
}

// requireCLIError requires err to be one line containing want, with the
// exit status of a usage mistake (2) or of a failed run (1).
func requireCLIError(t *testing.T, err error, want string, usage bool) {
	t.Helper()
	require.ErrorContains(t, err, want)
	assert.NotContains(t, err.Error(), "\n")
	status := 1
	if usage {
		status = 2
	}
	assert.Equal(t, status, exitCode(err))
}

// writeFile writes data to dir/name and returns the path.
func writeFile(t *testing.T, dir, name string, data []byte) string {
	t.Helper()
	p := filepath.Join(dir, name)
	require.NoError(t, os.WriteFile(p, data, 0o644))
	return p
}

// TestErrorPrefixes checks that every command's errors, its own and those
// of the packages under it, read "<command>: <what>" with the command
// named once and no package's name in front of what.
func TestErrorPrefixes(t *testing.T) {
	dir := t.TempDir()
	empty := writeFile(t, dir, "empty.txt", nil)
	missing := filepath.Join(dir, "missing.txt")
	notRepo := t.TempDir()
	for _, tc := range []struct {
		args []string
		dir  string // the working directory; "" for this one
		want string // the whole message, or its start when it ends in "…"
	}{
		{args: []string{"env", "-frob"}, want: "env: flag provided but not defined: -frob (see 'zbench env -h')"},
		{args: []string{"compare", "-format", "xml", aa1, aa2}, want: `compare: -format: unknown format "xml" (want text, markdown, csv or json)`},
		{args: []string{"compare", "-fail-on", "slow", aa1, aa2}, want: `compare: -fail-on: unknown verdict "slow" (want one of slower, invalid, ambiguous, faster, same)`},
		{args: []string{"compare", aa1, empty}, want: "compare: " + empty + ": empty file: no benchmark results"},
		{args: []string{"compare", aa1, missing}, want: "compare: open " + missing + ": no such file or directory"},
		{args: []string{"compare", "-metric", "peak-B/x", aa1, aa2}, want: "compare: " + aa1 + ": no Unit line says…"},
		{args: []string{"report", "-o", filepath.Join(dir, "out"), empty}, want: "report: " + empty + ": empty file: no benchmark results"},
		{args: []string{"report", "-o", filepath.Join(empty, "sub"), aa1}, want: "report: mkdir " + empty + ": not a directory"},
		{args: []string{"diff", "-bench", "("}, want: "diff: -bench \"(\": error parsing regexp: missing closing ): `(`"},
		{args: []string{"diff"}, dir: notRepo, want: "diff: " + notRepo + " is not in a git repository: …"},
		{args: []string{"calibrate", "-alpha", "1"}, want: "calibrate: -alpha 1: want a significance level…"},
		{args: []string{"infer", "--model", "bert", "--weights", missing, "--input", aa1, "--output", filepath.Join(dir, "o")}, want: "infer: weights " + missing + ": no such file or directory"},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			if tc.dir != "" {
				t.Chdir(tc.dir)
			}
			err := run(tc.args, &bytes.Buffer{}, &bytes.Buffer{})
			require.Error(t, err)
			if prefix, ok := strings.CutSuffix(tc.want, "…"); ok {
				assert.True(t, strings.HasPrefix(err.Error(), prefix), "%q does not start with %q", err, prefix)
			} else {
				assert.Equal(t, tc.want, err.Error())
			}
			assert.NotRegexp(t, `(?:^|[ :])(?:results|runner|compare|calibrate|report|zbench): .*\b(?:results|runner|compare|calibrate|report|diff|infer|env): `, err.Error(), "a repeated prefix")
		})
	}
}

// TestPackageDocListsCommands checks that the package documentation lists
// every command with its summary, so that it cannot drift from the
// command table.
func TestPackageDocListsCommands(t *testing.T) {
	src, err := os.ReadFile("main.go")
	require.NoError(t, err)
	doc := string(src[:strings.Index(string(src), "package main")])
	for _, c := range commands {
		assert.Regexp(t, `(?m)^//\t`+regexp.QuoteMeta(c.name)+` +`+regexp.QuoteMeta(c.summary)+`$`, doc, "the doc's line for %s", c.name)
	}
	assert.Equal(t, len(commands), strings.Count(doc, "\n//\t")-strings.Count(doc, "\n//\tzbench "), "one line per command")
}

// TestModelRegistry checks that every command finds its models through
// the registry and that a model it lacks is one error listing those it has.
func TestModelRegistry(t *testing.T) {
	for _, c := range []capability{canInfer, canQuantize, canGenerate} {
		names := modelNames(c)
		require.NotEmpty(t, names, c)
		for _, n := range names {
			m, err := modelFor(c, n)
			require.NoError(t, err)
			assert.Equal(t, n, m.name)
		}
		_, err := modelFor(c, "vit")
		require.Error(t, err)
		assert.Equal(t, 2, exitCode(err), "a usage error")
		assert.ErrorContains(t, err, fmt.Sprintf(`unknown --model "vit" (want %s)`, strings.Join(names, ", ")))
	}
	_, err := modelFor(canGenerate, "bert")
	assert.ErrorContains(t, err, "want llama", "bert does not generate")
	for _, m := range registry {
		for _, f := range m.quantizeFlags {
			assert.Contains(t, quantizeModelFlags, f, "%s reads a quantize flag the command does not know", m.name)
		}
	}
}

// TestCheckGenerates checks that generate and finetune refuse a checkpoint
// of a family not registered for them, by its config's model_type.
func TestCheckGenerates(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		config, err string
	}{
		{`{"model_type": "llama"}`, ""},
		{`{"model_type": "bert"}`, `model_type "bert": generate and finetune run llama`},
		{`{}`, ""},
		{`not json`, ""},
	} {
		path := filepath.Join(dir, "config.json")
		require.NoError(t, os.WriteFile(path, []byte(tc.config), 0o644))
		err := checkGenerates(path)
		if tc.err == "" {
			assert.NoError(t, err, tc.config)
		} else {
			assert.ErrorContains(t, err, tc.err)
		}
	}
}
