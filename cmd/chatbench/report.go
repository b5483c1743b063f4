package main

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"strings"
	"sync"
	"time"
)

// Row is one measured figure: its value per repeat, optionally the anchor it
// is compared with (measured in the same, interleaved repeats) and the goal.
type Row struct {
	Scenario string    `json:"scenario"`
	Metric   string    `json:"metric"`
	Unit     string    `json:"unit"`
	Values   []float64 `json:"values"`
	Median   float64   `json:"median"`
	Min      float64   `json:"min"`
	Max      float64   `json:"max"`

	Anchor       string    `json:"anchor,omitempty"`
	AnchorValues []float64 `json:"anchor_values,omitempty"`
	AnchorMedian float64   `json:"anchor_median,omitempty"`
	Ratios       []float64 `json:"ratios,omitempty"`
	RatioMedian  float64   `json:"ratio_median,omitempty"`
	RatioMin     float64   `json:"ratio_min,omitempty"`
	RatioMax     float64   `json:"ratio_max,omitempty"`

	// Spread is (max-min)/median of the ratios, or of the values when
	// there is no anchor; Noisy flags a spread over 20%.
	Spread float64 `json:"spread"`
	Noisy  bool    `json:"noisy"`

	Goal string `json:"goal,omitempty"`
	OK   *bool  `json:"ok,omitempty"`
	Note string `json:"note,omitempty"`
}

// newRow summarises values (and anchor values, paired by repeat).
func newRow(scenario, metric, unit string, values []float64) *Row {
	r := &Row{Scenario: scenario, Metric: metric, Unit: unit, Values: values}
	r.Median = median(values)
	r.Min, r.Max = minMax(values)
	r.Spread = spread(values)
	r.Noisy = r.Spread > 0.2
	return r
}

// vs sets the anchor the row is compared with; ratio = value / anchor per
// repeat.
func (r *Row) vs(anchor string, values []float64) *Row {
	r.Anchor = anchor
	r.AnchorValues = values
	r.AnchorMedian = median(values)
	r.Ratios = ratios(r.Values, values)
	r.RatioMedian = median(r.Ratios)
	r.RatioMin, r.RatioMax = minMax(r.Ratios)
	r.Spread = spread(r.Ratios)
	r.Noisy = r.Spread > 0.2
	return r
}

// goalRatio records a goal on the median ratio: at least x (atLeast) or at
// most x.
func (r *Row) goalRatio(atLeast bool, x float64) *Row {
	return r.goal(atLeast, x, r.RatioMedian, "ratio")
}

// goalValue records a goal on the median value.
func (r *Row) goalValue(atLeast bool, x float64) *Row {
	return r.goal(atLeast, x, r.Median, r.Unit)
}

func (r *Row) goal(atLeast bool, x, got float64, what string) *Row {
	op := "≤"
	ok := got <= x
	if atLeast {
		op, ok = "≥", got >= x
	}
	if math.IsNaN(got) {
		ok = false
	}
	r.Goal = fmt.Sprintf("%s %s %s", what, op, fmtNum(x))
	r.OK = &ok
	return r
}

func (r *Row) note(format string, a ...any) *Row {
	if r.Note != "" {
		r.Note += "; "
	}
	r.Note += fmt.Sprintf(format, a...)
	return r
}

// Report is everything one run measured.
type Report struct {
	Machine  map[string]string `json:"machine"`
	Command  string            `json:"command"`
	Started  time.Time         `json:"started"`
	Duration string            `json:"duration"`
	Rows     []*Row            `json:"rows"`
	Checks   []Check           `json:"checks"`
	Errors   []string          `json:"errors,omitempty"`
	Goals    []Goal            `json:"goals"`

	mu sync.Mutex
}

// Check is a correctness check made during a run (zero loss, room counts…).
type Check struct {
	Scenario string `json:"scenario"`
	What     string `json:"what"`
	OK       bool   `json:"ok"`
	Detail   string `json:"detail,omitempty"`
}

func (rp *Report) add(r *Row) *Row {
	rp.mu.Lock()
	rp.Rows = append(rp.Rows, r)
	rp.mu.Unlock()
	return r
}

func (rp *Report) check(scenario, what string, ok bool, format string, a ...any) {
	rp.mu.Lock()
	rp.Checks = append(rp.Checks, Check{scenario, what, ok, fmt.Sprintf(format, a...)})
	rp.mu.Unlock()
}

func (rp *Report) fail(scenario string, err error) {
	rp.mu.Lock()
	rp.Errors = append(rp.Errors, scenario+": "+err.Error())
	rp.mu.Unlock()
}

// Goal is one line of the closing summary: a row with a goal, a check, or
// an error (always missed).
type Goal struct {
	What string `json:"what"`
	Want string `json:"want,omitempty"`
	Got  string `json:"got,omitempty"`
	Met  bool   `json:"met"`
}

// summarize fills Goals from the rows with a goal, the checks and the
// errors, in report order.
func (rp *Report) summarize() {
	rp.mu.Lock()
	defer rp.mu.Unlock()
	rp.Goals = rp.Goals[:0]
	for _, r := range rp.Rows {
		if r.OK == nil {
			continue
		}
		got := fmtNum(r.Median) + " " + r.Unit
		if r.Anchor != "" {
			got = fmt.Sprintf("ratio %s (%s vs %s %s)", fmtNum(r.RatioMedian), fmtNum(r.Median), fmtNum(r.AnchorMedian), r.Unit)
		}
		rp.Goals = append(rp.Goals, Goal{What: r.Scenario + ": " + r.Metric, Want: r.Goal, Got: got, Met: *r.OK})
	}
	for _, c := range rp.Checks {
		rp.Goals = append(rp.Goals, Goal{What: c.Scenario + ": " + c.What, Met: c.OK})
	}
	for _, e := range rp.Errors {
		rp.Goals = append(rp.Goals, Goal{What: "error: " + e})
	}
}

// Missed counts the goals missed (after summarize).
func (rp *Report) Missed() int {
	n := 0
	for _, g := range rp.Goals {
		if !g.Met {
			n++
		}
	}
	return n
}

// WriteGoals writes the closing summary: the goals missed, then those met.
func (rp *Report) WriteGoals(w io.Writer) {
	fmt.Fprintf(w, "\n## Goals: %d met, %d missed\n", len(rp.Goals)-rp.Missed(), rp.Missed())
	for _, met := range []bool{false, true} {
		for _, g := range rp.Goals {
			if g.Met != met {
				continue
			}
			line := map[bool]string{true: "- met:    ", false: "- MISSED: "}[met] + g.What
			if g.Want != "" {
				line += " — want " + g.Want + ", got " + g.Got
			}
			fmt.Fprintln(w, line)
		}
	}
}

// WriteJSON writes the report as indented JSON.
func (rp *Report) WriteJSON(w io.Writer) error {
	rp.summarize()
	e := json.NewEncoder(w)
	e.SetIndent("", "  ")
	return e.Encode(sanitize(rp))
}

// sanitize replaces NaN and Inf, which JSON cannot carry, by 0.
func sanitize(rp *Report) *Report {
	fix := func(p *float64) {
		if math.IsNaN(*p) || math.IsInf(*p, 0) {
			*p = 0
		}
	}
	for _, r := range rp.Rows {
		for _, p := range []*float64{&r.Median, &r.Min, &r.Max, &r.AnchorMedian, &r.RatioMedian, &r.RatioMin, &r.RatioMax, &r.Spread} {
			fix(p)
		}
	}
	return rp
}

// WriteTable writes the report as markdown: machine, one table, checks.
func (rp *Report) WriteTable(w io.Writer) {
	rp.summarize()
	fmt.Fprintf(w, "## chatbench %s\n\n", rp.Started.Format(time.RFC3339))
	for _, k := range []string{"cpu", "nproc", "go", "redis", "nodes", "mode"} {
		if v, ok := rp.Machine[k]; ok {
			fmt.Fprintf(w, "- %s: %s\n", k, v)
		}
	}
	fmt.Fprintf(w, "- command: `%s`\n- duration: %s\n\n", rp.Command, rp.Duration)
	fmt.Fprintln(w, "| scenario | metric | median | min–max | anchor | anchor median | ratio median (min–max) | goal | ok |")
	fmt.Fprintln(w, "|---|---|---:|---|---|---:|---|---|---|")
	for _, r := range rp.Rows {
		rng := ""
		if len(r.Values) > 1 {
			rng = fmtNum(r.Min) + "–" + fmtNum(r.Max)
		}
		anchor, am, ratio := "", "", ""
		if r.Anchor != "" {
			anchor, am = r.Anchor, fmtNum(r.AnchorMedian)
			ratio = fmtNum(r.RatioMedian)
			if len(r.Ratios) > 1 {
				ratio += " (" + fmtNum(r.RatioMin) + "–" + fmtNum(r.RatioMax) + ")"
			}
		}
		if r.Noisy {
			ratio += " ⚠ spread " + fmt.Sprintf("%.0f%%", 100*r.Spread)
		}
		ok := ""
		if r.OK != nil {
			ok = map[bool]string{true: "yes", false: "**no**"}[*r.OK]
		}
		metric := r.Metric
		if r.Unit != "" {
			metric += " (" + r.Unit + ")"
		}
		if r.Note != "" {
			metric += " — " + r.Note
		}
		fmt.Fprintf(w, "| %s | %s | %s | %s | %s | %s | %s | %s | %s |\n",
			r.Scenario, metric, fmtNum(r.Median), rng, anchor, am, strings.TrimSpace(ratio), r.Goal, ok)
	}
	if len(rp.Checks) > 0 {
		fmt.Fprintln(w, "\n| scenario | check | ok | detail |\n|---|---|---|---|")
		for _, c := range rp.Checks {
			fmt.Fprintf(w, "| %s | %s | %s | %s |\n", c.Scenario, c.What, map[bool]string{true: "yes", false: "**no**"}[c.OK], c.Detail)
		}
	}
	for _, e := range rp.Errors {
		fmt.Fprintf(w, "\nerror: %s\n", e)
	}
	rp.WriteGoals(w)
}

// fmtNum prints a figure with a precision fit for a table: thousands
// without decimals, small numbers with three significant digits.
func fmtNum(x float64) string {
	switch {
	case math.IsNaN(x) || math.IsInf(x, 0):
		return "–"
	case math.Abs(x) >= 1000:
		s := fmt.Sprintf("%.0f", x)
		neg := strings.HasPrefix(s, "-")
		s = strings.TrimPrefix(s, "-")
		var b strings.Builder
		for i, c := range s {
			if i > 0 && (len(s)-i)%3 == 0 {
				b.WriteByte(',')
			}
			b.WriteRune(c)
		}
		if neg {
			return "-" + b.String()
		}
		return b.String()
	case math.Abs(x) >= 100:
		return fmt.Sprintf("%.0f", x)
	case math.Abs(x) >= 10:
		return fmt.Sprintf("%.1f", x)
	case x == 0:
		return "0"
	default:
		return fmt.Sprintf("%.3g", x)
	}
}

// Progress prints what is running: one rewritten line on a terminal, plain
// lines otherwise.
type Progress struct {
	mu    sync.Mutex
	w     io.Writer
	tty   bool
	start time.Time
	step  int
	total int
	quiet bool
}

func newProgress(w *os.File, total int, quiet bool) *Progress {
	fi, err := w.Stat()
	tty := err == nil && fi.Mode()&os.ModeCharDevice != 0
	return &Progress{w: w, tty: tty, start: time.Now(), total: total, quiet: quiet}
}

// Step starts the next step of the run.
func (p *Progress) Step(format string, a ...any) {
	p.mu.Lock()
	p.step++
	p.mu.Unlock()
	p.Say(format, a...)
}

// Say updates the current line.
func (p *Progress) Say(format string, a ...any) {
	if p.quiet {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	msg := fmt.Sprintf(format, a...)
	el := time.Since(p.start).Truncate(time.Second)
	bar := ""
	if p.total > 0 {
		const width = 20
		n := min(width, p.step*width/p.total)
		bar = "[" + strings.Repeat("#", n) + strings.Repeat(".", width-n) + "] "
	}
	line := fmt.Sprintf("%s%5s %s", bar, el, msg)
	if p.tty {
		if len(line) > 110 {
			line = line[:110]
		}
		fmt.Fprintf(p.w, "\r\033[K%s", line)
	} else {
		fmt.Fprintln(p.w, line)
	}
}

// Done ends the progress line.
func (p *Progress) Done() {
	if p.tty && !p.quiet {
		fmt.Fprintln(p.w)
	}
}
