package telemetry

import (
	"context"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"time"
)

// DefaultLogEvery is how often a LogLimit logs one cause at most, by default.
const DefaultLogEvery = 10 * time.Second

// maxLogCauses bounds the causes a LogLimit tracks, so that errors whose
// messages vary without end cannot grow it; past it, new causes of a
// message share one entry.
const maxLogCauses = 256

// LogLimit logs a repeated event once per cause: the first time, then at
// most once per period, each line saying how many were left out since the
// last ("... (1,234 more since 10s)"). A cause is a message and the class
// of its error (ErrorClass), never a record's id: a poison storm or an
// hour-long outage writes a few lines, not one per record or retry. A
// LogLimit is safe for concurrent use.
type LogLimit struct {
	log   *slog.Logger
	every time.Duration
	now   func() time.Time

	mu     sync.Mutex
	causes map[string]*logCause
}

// logCause is what a LogLimit remembers of one cause.
type logCause struct {
	level slog.Level
	msg   string
	last  time.Time // when its last line was written
	count int64     // events left out since
}

// NewLogLimit returns a LogLimit writing to logger (none when nil), at
// most once per every (DefaultLogEvery when 0) per cause.
func NewLogLimit(logger *slog.Logger, every time.Duration) *LogLimit {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	if every <= 0 {
		every = DefaultLogEvery
	}
	return &LogLimit{log: logger, every: every, now: time.Now, causes: map[string]*logCause{}}
}

// Log logs msg at level with args, and err under "err" when it is not nil,
// if its cause (msg and ErrorClass(err)) was not logged within the period;
// otherwise it only counts the event. A line after left-out events carries
// their count in the message and under "repeated".
func (l *LogLimit) Log(ctx context.Context, level slog.Level, msg string, err error, args ...any) {
	if !l.log.Enabled(ctx, level) {
		return
	}
	key := msg + "\x00" + ErrorClass(err)
	now := l.now()
	l.mu.Lock()
	c, ok := l.causes[key]
	if !ok && len(l.causes) >= maxLogCauses {
		l.prune(now)
		if len(l.causes) >= maxLogCauses {
			key = msg + "\x00(other)"
			c, ok = l.causes[key]
		}
	}
	if !ok {
		c = &logCause{level: level, msg: msg}
		l.causes[key] = c
	} else if now.Sub(c.last) < l.every {
		c.count++
		l.mu.Unlock()
		return
	}
	n, since := c.count, now.Sub(c.last)
	c.count, c.last = 0, now
	l.mu.Unlock()
	if err != nil {
		args = append(args, "err", err)
	}
	if n > 0 {
		msg = repeatedMsg(msg, n, since)
		args = append(args, "repeated", n)
	}
	l.log.Log(ctx, level, msg, args...)
}

// Flush logs the count of each cause's events left out since its last
// line and forgets every cause; call it when the owner stops.
func (l *LogLimit) Flush(ctx context.Context) {
	now := l.now()
	l.mu.Lock()
	causes := l.causes
	l.causes = map[string]*logCause{}
	l.mu.Unlock()
	for _, c := range causes {
		if c.count > 0 {
			l.log.Log(ctx, c.level, repeatedMsg(c.msg, c.count, now.Sub(c.last)), "repeated", c.count)
		}
	}
}

// prune forgets the causes with nothing left out whose period is over;
// l.mu is held.
func (l *LogLimit) prune(now time.Time) {
	for k, c := range l.causes {
		if c.count == 0 && now.Sub(c.last) >= l.every {
			delete(l.causes, k)
		}
	}
}

// repeatedMsg is msg with the count left out since: "msg (1,234 more since 10s)".
func repeatedMsg(msg string, n int64, since time.Duration) string {
	if since >= time.Second {
		since = since.Round(time.Second)
	} else {
		since = since.Round(time.Millisecond)
	}
	return fmt.Sprintf("%s (%s more since %s)", msg, groupDigits(n), since)
}

// groupDigits writes n with a comma every three digits: 1,234,567.
func groupDigits(n int64) string {
	s := strconv.FormatInt(n, 10)
	start := len(s) % 3
	if start == 0 {
		start = 3
	}
	out := s[:start]
	for i := start; i < len(s); i += 3 {
		out += "," + s[i:i+3]
	}
	return out
}

// maxErrorClass bounds the part of an error message that makes its class.
const maxErrorClass = 160

// ErrorClass is the class of err for LogLimit: its message with every run
// of digits written as '#' and cut to 160 bytes, so that errors differing
// only in numbers (ports, sizes, ids, offsets) share a class. It is "" for
// a nil err.
func ErrorClass(err error) string {
	if err == nil {
		return ""
	}
	msg := err.Error()
	b := make([]byte, 0, min(len(msg), maxErrorClass))
	for i := 0; i < len(msg) && len(b) < maxErrorClass; i++ {
		if c := msg[i]; c < '0' || c > '9' {
			b = append(b, c)
		} else if len(b) == 0 || b[len(b)-1] != '#' {
			b = append(b, '#')
		}
	}
	return string(b)
}
