package main

import (
	"fmt"
	"io"
	"os"
	"strings"
	"time"
)

// progress draws a one-line progress bar when w is a terminal, and nothing
// otherwise (logs and CI stay clean).
type progress struct {
	w     io.Writer
	label string
	on    bool
	last  time.Time
	shown bool
}

func newProgress(w io.Writer, label string, quiet bool) *progress {
	on := false
	if f, ok := w.(*os.File); ok && !quiet {
		if st, err := f.Stat(); err == nil && st.Mode()&os.ModeCharDevice != 0 {
			on = true
		}
	}
	return &progress{w: w, label: label, on: on}
}

func (p *progress) update(done, total int) {
	if !p.on || total <= 0 {
		return
	}
	if done < total && time.Since(p.last) < 100*time.Millisecond {
		return
	}
	p.last = time.Now()
	const width = 30
	n := done * width / total
	fmt.Fprintf(p.w, "\r%-12s [%s%s] %d/%d", p.label, strings.Repeat("=", n), strings.Repeat(" ", width-n), done, total)
	p.shown = true
}

// done ends the bar's line; calling it again does nothing.
func (p *progress) done() {
	if p.shown {
		fmt.Fprintln(p.w)
		p.shown = false
	}
}

// updateThenDone is update that ends the line when the step completes, for
// a step followed by another on the same stream.
func (p *progress) updateThenDone(done, total int) {
	p.update(done, total)
	if done >= total {
		p.done()
	}
}
