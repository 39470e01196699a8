// Zbench is the command line of the zbench benchmark suite.
//
// Usage:
//
//	zbench <command> [flags]
//	zbench help [command]
//
// The commands are:
//
//	env        print the host and device facts results depend on
//	compare    compare benchmark results, with a verdict per benchmark
//	diff       benchmark two git revisions interleaved and compare them
//	calibrate  A/A runs: false-verdict rate and the smallest change detectable
//	report     write an HTML and markdown report with plots from benchmark files and training logs
//	infer      run a model on inputs from a safetensors file, write its outputs
//	quantize   quantize a model to int8 by calibration, write its checkpoint and a per-layer report
//	generate   generate text with a Llama-family model, with its speed figures
//	finetune   train a LoRA adapter on a Llama-family model from Alpaca or tokenized data
//	merge      fold a LoRA adapter into its base checkpoint
//	tokenize   encode text to token ids or decode ids with a Llama-family tokenizer
//	serve      serve a Llama-family model over the OpenAI API with continuous batching on a paged KV cache
//	load       send requests to an OpenAI-API server in MLPerf's scenarios: throughput, TTFT/TPOT percentiles, verdict
//
// Each command's flags and documentation are in 'zbench help <command>'
// (or 'zbench <command> -h'), written once, in the command's file. The
// models that infer, quantize, generate and finetune run are registered
// once, with what each supports, by the file of each (bert.go, llama.go,
// resnet.go; models.go holds the registry).
//
// # Offline commands
//
// compare, diff, calibrate and report read and write files (diff and
// calibrate run benchmarks in processes of their own) and open no backend.
// The default binary links only the C library, and the CPU backend loads
// its engine's library (ZBENCH_CPU_ENGINE: oneDNN or OpenBLAS) when it is
// opened, by env, infer and the other commands that compute, so these four
// load no BLAS and no CUDA library, under any ZBENCH_CPU_ENGINE
// (TestOfflineLoadsNoLibrary checks it with LD_DEBUG=libs).
//
// A binary built with -tags cuda links libcuda.so.1 (package kernels/cuda
// and the driver bindings it uses are linked with -lcuda), so the dynamic
// loader maps the driver's library when any of its commands starts,
// offline ones included, and the binary does not start where no driver is
// installed; no CUDA call is made until the cuda backend is opened. That
// build is for GPU hosts, where the driver is always present; for analysis
// anywhere else use the default binary (go run ./cmd/zbench compare ...).
// The commands stay in one binary so that their command lines are the same
// on every host.
//
// # Errors
//
// An error is printed as one line, "zbench: <command>: <message>", naming
// the flag, file or tensor at fault. The exit status is 1 for a failed run and 2 for
// a usage error (an unknown command, flag or flag value, a missing flag).
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
)

// A command is one subcommand of zbench.
type command struct {
	name    string
	summary string // one line for the command list
	// run parses the command's flags from args and runs it.
	run func(args []string, stdout, stderr io.Writer) error
}

// commands are zbench's subcommands, in the order help lists them.
var commands = []command{
	{"env", "print the host and device facts results depend on", runEnv},
	{"compare", "compare benchmark results, with a verdict per benchmark", runCompare},
	{"diff", "benchmark two git revisions interleaved and compare them", runDiff},
	{"calibrate", "A/A runs: false-verdict rate and the smallest change detectable", runCalibrate},
	{"report", "write an HTML and markdown report with plots from benchmark files and training logs", runReport},
	{"infer", "run a model on inputs from a safetensors file, write its outputs", runInfer},
	{"quantize", "quantize a model to int8 by calibration, write its checkpoint and a per-layer report", runQuantize},
	{"generate", "generate text with a Llama-family model, with its speed figures", runGenerate},
	{"finetune", "train a LoRA adapter on a Llama-family model from Alpaca or tokenized data", runFinetune},
	{"merge", "fold a LoRA adapter into its base checkpoint", runMerge},
	{"tokenize", "encode text to token ids or decode ids with a Llama-family tokenizer", runTokenize},
	{"serve", "serve a Llama-family model over the OpenAI API with continuous batching on a paged KV cache", runServe},
	{"load", "send requests to an OpenAI-API server in MLPerf's scenarios: throughput, TTFT/TPOT percentiles, verdict", runLoad},
}

func main() {
	err := run(os.Args[1:], os.Stdout, os.Stderr)
	if err == nil {
		return
	}
	fmt.Fprintf(os.Stderr, "zbench: %s\n", oneLine(err))
	os.Exit(exitCode(err))
}

// run runs the zbench command line args (without the program name).
func run(args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		printCommands(stderr)
		return usageErrorf("no command given")
	}
	name, rest := args[0], args[1:]
	switch name {
	case "help", "-h", "-help", "--help":
		if name != "help" || len(rest) == 0 {
			printCommands(stdout)
			return nil
		}
		if len(rest) > 1 {
			return usageErrorf("help takes at most one command, got %q", rest)
		}
		// "help CMD" is "CMD -h", its usage on stdout.
		name, rest, stderr = rest[0], []string{"-h"}, stdout
	}
	c, err := lookup(name)
	if err != nil {
		return err
	}
	if err := c.run(rest, stdout, stderr); err != nil && !errors.Is(err, errHelp) {
		// The one place that names the command: commands and the
		// packages under them leave it out of their messages.
		return fmt.Errorf("%s: %w", c.name, err)
	}
	return nil
}

// lookup finds the named command.
func lookup(name string) (command, error) {
	for _, c := range commands {
		if c.name == name {
			return c, nil
		}
	}
	return command{}, usageErrorf("unknown command %q (want %s; see 'zbench help')", name, strings.Join(commandNames(), ", "))
}

func commandNames() []string {
	names := make([]string, len(commands))
	for i, c := range commands {
		names[i] = c.name
	}
	return names
}

// printCommands writes the usage line and the list of commands.
func printCommands(w io.Writer) {
	fmt.Fprintf(w, "usage: zbench <command> [flags]\n\nThe commands are:\n\n")
	width := 0
	for _, c := range commands {
		width = max(width, len(c.name))
	}
	for _, c := range commands {
		fmt.Fprintf(w, "\t%-*s  %s\n", width, c.name, c.summary)
	}
	fmt.Fprintf(w, "\nRun 'zbench help <command>' or 'zbench <command> -h' for a command's flags.\n")
}

// A usageError is a mistake in the command line: main exits with status 2.
type usageError struct{ err error }

func (e usageError) Error() string { return e.err.Error() }
func (e usageError) Unwrap() error { return e.err }

func usageErrorf(format string, args ...any) error {
	return usageError{fmt.Errorf(format, args...)}
}

// exitCode is the exit status for err: 0 for nil, 2 for a usage error, 1
// otherwise.
func exitCode(err error) int {
	var u usageError
	switch {
	case err == nil:
		return 0
	case errors.As(err, &u):
		return 2
	}
	return 1
}

// oneLine joins the lines of a message (as errors.Join makes them) with
// "; ", so that every error is one line.
func oneLine(err error) string {
	return strings.ReplaceAll(err.Error(), "\n", "; ")
}

// newFlagSet returns the FlagSet of a subcommand. Its Usage prints synopsis
// (the command line after "zbench <name> "), doc (one paragraph or more)
// and the flags.
func newFlagSet(name, synopsis, doc string, stderr io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		w := fs.Output()
		fmt.Fprintf(w, "usage: zbench %s %s\n\n%s\n\nFlags:\n", name, synopsis, strings.TrimSpace(doc))
		fs.PrintDefaults()
	}
	return fs
}

// errHelp is returned by parseFlags when -h was given and the usage printed.
var errHelp = errors.New("help requested")

// parseFlags parses args into fs. Help (-h) prints the usage to stdout and
// returns errHelp; any other mistake, including a positional argument,
// returns a one-line usageError and leaves the full usage to -h.
func parseFlags(fs *flag.FlagSet, args []string, stdout io.Writer) error {
	pos, err := parseArgs(fs, args, stdout)
	if err == nil && len(pos) > 0 {
		return usageErrorf("unexpected argument %q: all inputs are given by flags (see 'zbench %s -h')", pos[0], fs.Name())
	}
	return err
}

// parseArgs parses args into fs like parseFlags, but allows positional
// arguments, before or after the flags ("a.txt b.txt -fail-on slower"),
// and returns them. A "--" ends the flags.
func parseArgs(fs *flag.FlagSet, args []string, stdout io.Writer) ([]string, error) {
	var pos []string
	for {
		out := fs.Output()
		fs.SetOutput(io.Discard)
		err := fs.Parse(args)
		fs.SetOutput(out)
		switch {
		case errors.Is(err, flag.ErrHelp):
			fs.SetOutput(stdout)
			fs.Usage()
			fs.SetOutput(out)
			return nil, errHelp
		case err != nil:
			return nil, usageErrorf("%v (see 'zbench %s -h')", err, fs.Name())
		}
		rest := fs.Args()
		if len(rest) == 0 {
			return pos, nil
		}
		if len(rest) < len(args) && args[len(args)-len(rest)-1] == "--" {
			return append(pos, rest...), nil
		}
		pos = append(pos, rest[0])
		args = rest[1:]
	}
}
