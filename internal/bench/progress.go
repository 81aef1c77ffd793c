package bench

import (
	"fmt"
	"io"
	"time"
)

// progress writes one self-overwriting status line while a run goes, at
// most four times a second so that the terminal is not the bottleneck.
type progress struct {
	w     io.Writer
	tty   bool // overwrite one line; else print a line every few seconds
	label string
	total int
	what  string
	last  time.Time
	lastN int
	wrote bool
}

func newProgress(w io.Writer, tty bool, label string, total int) *progress {
	return &progress{w: w, tty: tty, label: label, total: total}
}

func (p *progress) phase(what string) {
	if p.w == nil {
		return
	}
	p.what = what
	p.print(0, true)
}

func (p *progress) update(n int) {
	every := 250 * time.Millisecond
	if !p.tty {
		every = 2 * time.Second
	}
	if p.w == nil || time.Since(p.last) < every {
		return
	}
	p.print(n, false)
}

func (p *progress) print(n int, force bool) {
	now := time.Now()
	rate := 0.0
	if !force && now.After(p.last) && !p.last.IsZero() {
		rate = float64(n-p.lastN) / now.Sub(p.last).Seconds()
	}
	if p.tty {
		fmt.Fprint(p.w, "\r\033[K")
	}
	if p.what == "running" {
		fmt.Fprintf(p.w, "%s: %s %d/%d outcomes", p.label, p.what, n, p.total)
	} else {
		fmt.Fprintf(p.w, "%s: %s %d tasks", p.label, p.what, p.total)
	}
	if rate > 0 {
		fmt.Fprintf(p.w, ", %.0f/s", rate)
	}
	if !p.tty {
		fmt.Fprintln(p.w)
	}
	p.last, p.lastN, p.wrote = now, n, true
}

// done ends the line so that whatever is printed next starts clean.
func (p *progress) done() {
	if p.w != nil && p.tty && p.wrote {
		fmt.Fprint(p.w, "\r\033[K")
	}
}
