package main

import (
	"fmt"
	"io"
	"strings"

	"github.com/zbench/zbench/kernels"
	"github.com/zbench/zbench/zbench"
)

const envDoc = `
Env prints the facts about this host and its devices that a benchmark
result depends on: the same configuration lines the benchmarks print
before their results (commit, Go, GOMAXPROCS, BLAS and CPU peak; per GPU
its name, driver, compute capability, SMs, memory, clock and L2), found by
opening every device zbench can use. By default they are printed as a
readable list; with -config, as the "key: value" and Unit lines of the
benchmark format, ready to prepend to a file of results.`

func runEnv(args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("env", "[-config]", envDoc, stderr)
	config := fs.Bool("config", false, "print benchfmt configuration and Unit lines instead of the readable list")
	if err := parseFlags(fs, args, stdout); err != nil {
		return err
	}
	devs, err := zbench.Devices()
	if err != nil {
		return fmt.Errorf("env: %w", err)
	}
	defer func() {
		for _, d := range devs {
			d.Close()
		}
	}()
	if *config {
		if err := zbench.PrintEnv(stdout, devs); err != nil {
			return fmt.Errorf("env: %w", err)
		}
		return nil
	}
	lines, err := zbench.Config(devs)
	if err != nil {
		return fmt.Errorf("env: %w", err)
	}
	width := 0
	for _, l := range lines {
		k, _, _ := strings.Cut(l, ":")
		width = max(width, len(k))
	}
	var b strings.Builder
	for _, l := range lines {
		k, v, _ := strings.Cut(l, ":")
		fmt.Fprintf(&b, "%-*s  %s\n", width+1, k+":", strings.TrimSpace(v))
	}
	fmt.Fprintf(&b, "devices:")
	for _, d := range devs {
		kind := "cpu"
		if d.Info().Kind == kernels.GPU {
			kind = "gpu"
		}
		fmt.Fprintf(&b, " %s (%s, %s)", d.Name(), kind, d.Info().Name)
	}
	fmt.Fprintln(&b)
	_, err = io.WriteString(stdout, b.String())
	return err
}
