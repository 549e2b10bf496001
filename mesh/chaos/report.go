package chaos

import (
	"fmt"
	"io"
	"slices"
	"strings"
	"time"
)

// Targets of every scenario (issue 10).
const (
	// GapTarget bounds the longest time between consecutive answers of a
	// door whose own path the fault leaves alone.
	GapTarget = 2 * time.Second
)

// Window is when a scenario ran: requests sent in [Start, End) are its
// own; the fault lasted [FaultStart, FaultEnd].
type Window struct{ Start, FaultStart, FaultEnd, End time.Time }

// Row is one line of the table.
type Row struct {
	Scenario                       string
	Sent, Answered, Lost, Dup, Err int
	// Late counts requests answered right, once, but after the deadline
	// their sender waited (a caller that gave up; a Redis or RESP result
	// the poller still found before the run ended): not lost, and shown.
	Late   int
	Busy   int // 503 answers (retried; not errors)
	Unsure int // Redis or RESP XADDs whose fate is unknown and that got no answer
	// RESP counts the RESP door's good requests: sent, lost, duplicated
	// (its own column: the Redis clients' door with no redis-server).
	RESP                    struct{ Sent, Lost, Dup int }
	Gap                     time.Duration
	GapDoor                 Door
	GapExempt               bool // every door the fault stopped: no target
	P99                     time.Duration
	P99Door                 Door
	GarbageSent, GarbageBad int
	Samples                 []string      // a few error messages
	Target                  time.Duration // the gap target; 0 GapTarget
}

// Pass says whether the row meets the targets: nothing lost, no duplicate
// visible, no error, garbage answered as bad input, and every door the
// fault leaves alone answering with gaps under the row's Target
// (GapTarget when 0).
func (r Row) Pass() bool {
	return r.Lost == 0 && r.Dup == 0 && r.Err == 0 && r.GarbageBad == 0 && (r.GapExempt || r.Gap < cmpOr(r.Target, GapTarget))
}

// Account makes the row of a scenario from every request of the run.
func Account(name string, reqs []Request, w Window, exempt []Door, deadline time.Duration) Row {
	row := Row{Scenario: name}
	var answers [numDoors][]time.Time
	var lat [numDoors][]time.Duration
	faultEnd := w.FaultEnd
	if faultEnd.Sub(w.FaultStart) < time.Second {
		faultEnd = w.FaultStart.Add(time.Second) // a kill is instant; its effect is not
	}
	for _, r := range reqs {
		if r.Status == 200 && !r.Garbage && !r.Answered.Before(w.Start) && r.Answered.Before(w.End) {
			answers[r.Door] = append(answers[r.Door], r.Answered)
		}
		if r.Sent.Before(w.Start) || !r.Sent.Before(w.End) {
			continue
		}
		if r.Garbage {
			row.GarbageSent++
			if r.Status != 400 {
				row.GarbageBad++
				row.sample(r)
			}
			continue
		}
		row.count(r, deadline)
		if !r.Unsure && !r.Sent.Before(w.FaultStart) && !r.Sent.After(faultEnd) {
			l := deadline
			if r.Status == 200 {
				l = min(r.Answered.Sub(r.Sent), deadline)
			}
			lat[r.Door] = append(lat[r.Door], l)
		}
	}
	row.gaps(answers, w, exempt)
	for d := range numDoors {
		if p := p99(lat[d]); p >= row.P99 {
			row.P99, row.P99Door = p, d
		}
	}
	return row
}

// count files one good request under answered, lost, duplicate or error.
func (row *Row) count(r Request, deadline time.Duration) {
	lost, dup := row.Lost, row.Dup
	defer func() {
		if r.Door == DoorRESP {
			row.RESP.Sent++
			row.RESP.Lost += row.Lost - lost
			row.RESP.Dup += row.Dup - dup
		}
	}()
	row.Sent++
	row.Busy += r.Busy
	if r.Answers > 1+r.Resent {
		row.Dup++
		r.Err = fmt.Sprintf("%d right answers to %d sends", r.Answers, 1+r.Resent)
		row.sample(r)
	}
	switch {
	case r.Status == 200 && r.Answered.Sub(r.Sent) <= deadline:
		row.Answered++
	case r.Status == 200 || (r.Status == 0 && r.Answers > 0):
		row.Late++
	case r.Status == 0 && !r.Unsure:
		row.Lost++
		r.Err = fmt.Sprintf("never answered (%d sends)", 1+r.Resent)
		row.sample(r)
	case r.Status == 0:
		row.Unsure++
	default:
		row.Err++
		row.sample(r)
	}
}

func (row *Row) sample(r Request) {
	if len(row.Samples) < 3 {
		row.Samples = append(row.Samples, fmt.Sprintf("%s #%d: %d %.160s", r.Door, r.ID, r.Status, r.Err))
	}
}

// gaps finds the longest time without an answer on each door within the
// window (its edges count as answers), and keeps the worst door that has a
// target, or the worst of all when every door is exempt.
func (row *Row) gaps(answers [numDoors][]time.Time, w Window, exempt []Door) {
	row.GapExempt = len(exempt) == int(numDoors)
	for d := range numDoors {
		if slices.Contains(exempt, d) && !row.GapExempt {
			continue
		}
		ts := append([]time.Time{w.Start, w.End}, answers[d]...)
		slices.SortFunc(ts, func(a, b time.Time) int { return a.Compare(b) })
		var g time.Duration
		for i := 1; i < len(ts); i++ {
			g = max(g, ts[i].Sub(ts[i-1]))
		}
		if g >= row.Gap {
			row.Gap, row.GapDoor = g, d
		}
	}
}

func p99(ls []time.Duration) time.Duration {
	if len(ls) == 0 {
		return 0
	}
	slices.Sort(ls)
	return ls[(len(ls)*99+99)/100-1]
}

// WriteTable prints the rows as one fixed-width table, then the notes.
func WriteTable(w io.Writer, rows []Row, notes []string) {
	fmt.Fprintf(w, "%-44s %6s %8s %5s %5s %4s %6s %5s %17s %15s %18s  %s\n",
		"scenario", "sent", "answered", "late", "lost", "dup", "errors", "503s", "longest gap", "p99 in fault", "resp sent/lost/dup", "targets")
	for _, r := range rows {
		gap := fmt.Sprintf("%.2fs %s", r.Gap.Seconds(), r.GapDoor)
		if r.Target != 0 {
			gap += fmt.Sprintf("<%gs", r.Target.Seconds())
		}
		if r.GapExempt {
			gap += "*"
		}
		verdict := "met"
		if !r.Pass() {
			verdict = "MISSED"
		}
		fmt.Fprintf(w, "%-44s %6d %8d %5d %5d %4d %6d %5d %17s %15s %18s  %s\n", trunc(r.Scenario, 44), r.Sent, r.Answered,
			r.Late, r.Lost, r.Dup, r.Err, r.Busy, gap, fmt.Sprintf("%.2fs %s", r.P99.Seconds(), r.P99Door),
			fmt.Sprintf("%d/%d/%d", r.RESP.Sent, r.RESP.Lost, r.RESP.Dup), verdict)
	}
	fmt.Fprintln(w, "longest gap: the door with the longest gap among those the fault leaves alone; * every door is")
	fmt.Fprintln(w, "  stopped by the fault itself (no target). Targets: 0 lost, 0 dup, 0 errors, gap < 2s (or the <target shown),")
	fmt.Fprintln(w, "  garbage answered 400/NaN. late: answered once, right, after its sender's 15 s deadline (not lost; the gap shows it).")
	for _, r := range rows {
		var parts []string
		if r.GarbageSent > 0 {
			parts = append(parts, fmt.Sprintf("garbage sent %d, not answered as bad input %d", r.GarbageSent, r.GarbageBad))
		}
		if r.Unsure > 0 {
			parts = append(parts, fmt.Sprintf("%d Redis or RESP XADDs cut by the fault, fate unknown, unanswered (not counted lost)", r.Unsure))
		}
		parts = append(parts, r.Samples...)
		if len(parts) > 0 {
			fmt.Fprintf(w, "- %s: %s\n", r.Scenario, strings.Join(parts, "; "))
		}
	}
	for _, n := range notes {
		fmt.Fprintln(w, "- "+n)
	}
}

func trunc(s string, n int) string {
	if len(s) > n {
		return s[:n]
	}
	return s
}
