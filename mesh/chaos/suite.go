package chaos

import (
	"context"
	"fmt"
	"time"
)

// SuiteConfig shapes a run of scenarios. Zero values mean the defaults.
type SuiteConfig struct {
	Before time.Duration // steady load before each fault; default 5s
	After  time.Duration // steady load after the system is whole again; default 10s
	Load   LoadConfig
	Logf   func(format string, a ...any)
}

// RunSuite puts steady load on c, runs the scenarios one after the other,
// then stops the load, waits until every request is answered or past its
// deadline (and a second more for late duplicates), and accounts for each
// scenario. On a fault that cannot be injected or undone it stops early
// and returns the rows of the scenarios that ran with the error.
func RunSuite(ctx context.Context, c *Cluster, scenarios []Scenario, cfg SuiteConfig) ([]Row, []string, error) {
	cfg.Before = cmpOr(cfg.Before, 5*time.Second)
	cfg.After = cmpOr(cfg.After, 10*time.Second)
	if cfg.Logf == nil {
		cfg.Logf = func(string, ...any) {}
	}
	lctx, stopPoll := context.WithCancel(ctx)
	defer stopPoll()
	l, err := NewLoad(lctx, c, cfg.Load)
	if err != nil {
		return nil, nil, err
	}
	runCtx, stopLoad := context.WithCancel(lctx)
	l.Run(runCtx)
	type ran struct {
		name string
		w    Window
		s    Scenario
	}
	var done []ran
	var ferr error
	for _, s := range scenarios {
		var w Window
		w.Start = time.Now()
		sleep(ctx, cfg.Before)
		w.FaultStart = time.Now()
		note, err := s.Fault(ctx, c, l)
		w.FaultEnd = time.Now()
		name := s.Name
		if note != "" {
			name += " " + note
		}
		cfg.Logf("%s: fault over after %v", name, w.FaultEnd.Sub(w.FaultStart).Round(time.Millisecond))
		if err != nil {
			ferr = fmt.Errorf("%s: %w", name, err)
			break
		}
		sleep(ctx, cfg.After)
		w.End = time.Now()
		done = append(done, ran{name, w, s})
	}
	stopLoad()
	sleep(ctx, l.cfg.Deadline+time.Second)
	stopPoll()
	l.Close()
	reqs := l.Requests()
	var rows []Row
	for _, r := range done {
		row := Account(r.name, reqs, r.w, r.s.Exempt, l.cfg.Deadline)
		row.Target = r.s.GapTarget
		rows = append(rows, row)
	}
	return rows, l.notes(), ferr
}

// notes says what the table cannot: ticks skipped because too many
// requests were open, and results under uris the load never sent.
func (l *Load) notes() []string {
	var out []string
	if s := l.Skipped(); s != [numDoors]int64{} {
		out = append(out, fmt.Sprintf("requests not sent because %d were open on a door (nats, http, redis): %v", l.cfg.MaxOutstanding, s))
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.strays > 0 {
		out = append(out, fmt.Sprintf("%d Redis results under uris never sent", l.strays))
	}
	return out
}

func sleep(ctx context.Context, d time.Duration) {
	select {
	case <-ctx.Done():
	case <-time.After(d):
	}
}

func cmpOr(d, def time.Duration) time.Duration {
	if d == 0 {
		return def
	}
	return d
}
