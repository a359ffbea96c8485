package trainer

import (
	"fmt"
	"io"
	"os"
	"time"

	"github.com/schollz/progressbar/v3"
)

// Progress shows the progress of a long job (a run, a study).
type Progress interface {
	// Add records n more units done.
	Add(n int64)
	// Describe sets the text shown with the progress.
	Describe(desc string)
	// Clear erases the bar so a message can be printed (a no-op for plain
	// lines).
	Clear()
	// Finish shows the completed progress and ends the line.
	Finish()
	// Exit stops showing progress where it is, ending the line.
	Exit()
}

// PlainInterval is the time between two lines of a plain progress
// (a writer that is not a terminal).
var PlainInterval = 10 * time.Second

// NewProgress returns a progress over total units for w: a redrawn bar
// (with `\r`) if w is a terminal, otherwise plain lines, one every
// PlainInterval and one at the end, so that a log file gets readable lines
// rather than frames. w nil gives a progress that shows nothing.
func NewProgress(w io.Writer, total int64, desc string) Progress {
	switch {
	case w == nil:
		return nopProgress{}
	case isTerminal(w):
		return &barProgress{w: w, b: progressbar.NewOptions64(total,
			progressbar.OptionSetWriter(w),
			progressbar.OptionSetDescription(desc),
			progressbar.OptionSetPredictTime(true),
			progressbar.OptionSetElapsedTime(true),
			progressbar.OptionThrottle(200*time.Millisecond),
			progressbar.OptionSetWidth(20),
			progressbar.OptionShowDescriptionAtLineEnd(),
			progressbar.OptionOnCompletion(func() { fmt.Fprintln(w) }),
		)}
	}
	now := time.Now()
	return &plainProgress{w: w, total: total, desc: desc, start: now, last: now}
}

// isTerminal reports whether w is a character device (a terminal).
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}

type nopProgress struct{}

func (nopProgress) Add(int64)       {}
func (nopProgress) Describe(string) {}
func (nopProgress) Clear()          {}
func (nopProgress) Finish()         {}
func (nopProgress) Exit()           {}

type barProgress struct {
	w io.Writer
	b *progressbar.ProgressBar
}

func (p *barProgress) Add(n int64)          { p.b.Add64(n) }
func (p *barProgress) Describe(desc string) { p.b.Describe(desc) }
func (p *barProgress) Clear()               { p.b.Clear() }
func (p *barProgress) Finish()              { p.b.Finish() }
func (p *barProgress) Exit()                { p.b.Exit(); fmt.Fprintln(p.w) }

// plainProgress prints "desc | 37% (370/1000) | 1m2s elapsed, ~1m45s left"
// lines.
type plainProgress struct {
	w           io.Writer
	total, done int64
	desc        string
	start, last time.Time
	ended       bool
}

func (p *plainProgress) Add(n int64) {
	p.done += n
	if time.Since(p.last) >= PlainInterval {
		p.line()
	}
}

func (p *plainProgress) Describe(desc string) { p.desc = desc }
func (p *plainProgress) Clear()               {}
func (p *plainProgress) Finish() {
	if !p.ended {
		p.done = p.total
		p.line()
		p.ended = true
	}
}
func (p *plainProgress) Exit() {
	if !p.ended {
		p.line()
		p.ended = true
	}
}

func (p *plainProgress) line() {
	p.last = time.Now()
	el := time.Since(p.start)
	pct := 100.0
	if p.total > 0 {
		pct = 100 * float64(p.done) / float64(p.total)
	}
	left := ""
	if p.done > 0 && p.done < p.total {
		rest := time.Duration(float64(el) * float64(p.total-p.done) / float64(p.done))
		left = fmt.Sprintf(", ~%s left", rest.Round(time.Second))
	}
	fmt.Fprintf(p.w, "%s | %.0f%% (%d/%d) | %s elapsed%s\n", p.desc, pct, p.done, p.total, el.Round(time.Second), left)
}
