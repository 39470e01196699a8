package main

import (
	"fmt"
	"io"

	"github.com/zbench/zbench/zbench/report"
	"github.com/zbench/zbench/zbench/results"
)

const reportDoc = `
Report reads files of benchmark output (zbench's baselines, a fresh run of
go test -bench, a peer's output such as baselines/*/torch-*.txt) and writes
a report into DIR: index.html, a self-contained page with every plot inline
as SVG, and report.md, which links the plots' PNG files; each plot is also
written as NAME.svg and NAME.png.

The report plots throughput against batch size (benchmarks with batch=),
latency against sequence length (seq=), matmul throughput against size,
and the speed-up of each of our files over each peer file of the same
machine (peer median time / ours, benchmarks matched by name); its tables
give each speed figure beside its accuracy (rel-err). A file is a peer's
when its config has an impl: line not starting with zbench. Files are
labelled by their last two path elements: cpu-intel-xeon-f6-2core-amx/zbench.

It prints the paths it wrote, one a line.
`

// runReport runs zbench report.
func runReport(args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("report", "[-o DIR] [-title TEXT] FILE...", reportDoc, stderr)
	dir := fs.String("o", "zbench-report", "write the report into `DIR`")
	title := fs.String("title", report.DefaultTitle, "the report's `title`")

	args, err := parseArgs(fs, args, stdout)
	switch {
	case err != nil:
		return err
	case len(args) == 0:
		return usageErrorf("no benchmark files given (see 'zbench report -h')")
	case *dir == "":
		return usageErrorf("-o: empty directory name")
	}

	files := make([]*results.File, 0, len(args))
	for _, path := range args {
		f, err := results.Read(path)
		if err != nil {
			return err
		}
		warnSkipped(stderr, f)
		files = append(files, f)
	}
	paths, err := report.Write(*dir, files, report.Options{Title: *title})
	if err != nil {
		return err
	}
	for _, p := range paths {
		if _, err := fmt.Fprintln(stdout, p); err != nil {
			return err
		}
	}
	return nil
}
