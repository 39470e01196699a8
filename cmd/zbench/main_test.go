package main

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
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
		{name: "help infer", args: []string{"help", "infer"}, wantStdout: []string{"usage: zbench infer --model", "-weights file", "last_hidden_state"}},
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
