package main

import (
	"fmt"
	"io"
	"path/filepath"
	"strings"

	"github.com/zbench/zbench/zbench/report"
	"github.com/zbench/zbench/zbench/results"
	"github.com/zbench/zbench/zbench/trainlog"
)

const reportSynopsis = "[-o DIR] [-title TEXT] FILE|LOG.jsonl..."

const reportDoc = `
Report reads files of benchmark output (zbench's baselines, a fresh run of
go test -bench, a peer's output such as baselines/*/torch-*.txt) and
training logs (LOG.jsonl), either or both, and writes a report into DIR:
index.html, a self-contained page with every plot inline as SVG, and
report.md, which links the plots' PNG files; each plot is also written as
NAME.svg and NAME.png.

The report plots throughput against batch size (benchmarks with batch=),
latency against sequence length (seq=), matmul throughput against size,
and the speed-up of each of our files over each peer file of the same
machine (peer median time / ours, benchmarks matched by name); its tables
give each speed figure beside its accuracy (rel-err). A file is a peer's
when its config has an impl: line not starting with zbench. Files are
labelled by their last two path elements: cpu-intel-xeon-f6-2core-amx/zbench.

For results of the load generator (zbench load), the report plots the
server-scenario runs (benchmarks with rate=) against request rate, a
line per file and percentile in order of rate: TTFT p50, p90 and p99
(ttft-rate-load) and TPOT p50, p90 and p99 (tpot-rate-load), each with
the files' bound (loadgen-ttft-bound, loadgen-tpot-bound) as a horizontal
line; output tok/s (throughput-rate-load); and goodput req/s beside
req/s and the offered rate (goodput-rate-load). A filled marker is a run
that passed its bounds, an open one a run that failed. Files go on the
same plots, so that
  zbench report -o out serve-zbench-q8-sweep.txt serve-llamacpp-q8-sweep.txt
compares two servers. A table per file lists its runs of every scenario
(offline and singlestream runs have no rate and are in the tables only):
rate, req/s, out-tok/s, goodput, TTFT and TPOT p50 and p99, errors and
PASS or FAIL, with the highest rate that passed.

A file whose name ends in .jsonl is a training log: a JSON object a line,
each with an integer "step" (0 or more, increasing strictly down the file)
and a finite number "loss", as zbench finetune --log and the BERT training
test write them ({"step":0,"loss":8.31}); other fields are ignored. The
report plots loss against step, one line per log (loss-step), and tables
each log's number of steps, first and last loss and mean loss over its
last 10 steps; given two logs or more, it also gives each log's last-10
mean relative to the first log's ("+0.4%"), so that
  zbench report -o out bert-train-curve/bf16.jsonl bert-train-curve/fp8.jsonl
shows how far the fp8 run ends from the bf16 one. Logs are labelled like
benchmark files (bert-train-curve/fp8). A malformed line, a missing or
non-finite loss, or a step that is negative or not above the one before
is an error naming the file and line.

It prints the paths it wrote, one a line.
`

// runReport runs zbench report.
func runReport(args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("report", reportSynopsis, reportDoc, stderr)
	dir := fs.String("o", "zbench-report", "write the report into `DIR`")
	title := fs.String("title", report.DefaultTitle, "the report's `title`")

	args, err := parseArgs(fs, args, stdout)
	switch {
	case err != nil:
		return err
	case len(args) == 0:
		return usageErrorf("no benchmark files or training logs given (see 'zbench report -h')")
	case *dir == "":
		return usageErrorf("-o: empty directory name")
	}

	var (
		files []*results.File
		logs  []*trainlog.Log
	)
	for _, path := range args {
		if isTrainingLog(path) {
			l, err := trainlog.Read(path)
			if err != nil {
				return err
			}
			logs = append(logs, l)
			continue
		}
		f, err := results.Read(path)
		if err != nil {
			return err
		}
		warnSkipped(stderr, f)
		files = append(files, f)
	}
	paths, err := report.Write(*dir, files, logs, report.Options{Title: *title})
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

// isTrainingLog reports whether report reads path as a training log
// rather than as benchmark output: by its .jsonl extension.
func isTrainingLog(path string) bool {
	return strings.EqualFold(filepath.Ext(path), ".jsonl")
}
