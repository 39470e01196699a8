package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/schollz/progressbar/v3"
	"golang.org/x/term"

	"github.com/zbench/zbench/zbench/runner"
)

// A progress shows how far a long run (diff, calibrate) has got, on a
// terminal only: when stderr is a pipe or a file nothing is drawn, so logs
// and CI output stay clean. The zero value draws nothing.
type progress struct {
	bar  *progressbar.ProgressBar
	w    io.Writer
	desc string
}

// newProgress returns a progress drawn on w if w is a terminal.
func newProgress(w io.Writer, desc string) *progress {
	f, ok := w.(*os.File)
	if !ok || !term.IsTerminal(int(f.Fd())) {
		return &progress{}
	}
	return &progress{w: w, desc: desc}
}

// step records done of total steps; what names the current one.
func (p *progress) step(done, total int, what string) {
	if p.w == nil {
		return
	}
	if p.bar == nil {
		p.bar = progressbar.NewOptions(total,
			progressbar.OptionSetWriter(p.w),
			progressbar.OptionSetDescription(p.desc),
			progressbar.OptionShowCount(),
			progressbar.OptionSetPredictTime(true),
			progressbar.OptionSetElapsedTime(true),
			progressbar.OptionClearOnFinish(),
			progressbar.OptionSetWidth(30))
	}
	p.bar.Describe(fmt.Sprintf("%s (%s)", p.desc, what))
	_ = p.bar.Set(done)
}

// finish removes the bar from the terminal.
func (p *progress) finish() {
	if p.bar != nil {
		_ = p.bar.Finish()
		_ = p.bar.Clear()
	}
}

// interleave runs count interleaved passes of arms with r, showing the
// progress on stderr as desc, until ctx is cancelled.
func interleave(ctx context.Context, r *runner.Runner, stderr io.Writer, desc string, count int, arms ...*runner.Arm) error {
	bar := newProgress(stderr, desc)
	defer bar.finish()
	return r.Interleave(ctx, arms, count, func(done, total int, arm *runner.Arm) {
		bar.step(done, total, arm.Label)
		if afterPass != nil {
			afterPass(done)
		}
	})
}

// afterPass, when not nil, is called after each pass with the number of
// passes done: tests interrupt a run there.
var afterPass func(done int)

// signalContext returns a context cancelled by SIGINT or SIGTERM, so that
// diff and calibrate stop their runs, clean up and report what they
// measured instead of dying; stop restores the default handling.
func signalContext() (ctx context.Context, stop context.CancelFunc) {
	return signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
}
