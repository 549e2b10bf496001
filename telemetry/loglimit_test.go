package telemetry

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"
)

// clock is a hand-moved time for a LogLimit under test.
type clock struct{ t time.Time }

func (c *clock) now() time.Time        { return c.t }
func (c *clock) add(d time.Duration)   { c.t = c.t.Add(d) }
func lines(buf *bytes.Buffer) []string { return strings.Split(strings.TrimSpace(buf.String()), "\n") }
func newTestLimit() (*LogLimit, *bytes.Buffer, *clock) {
	var buf bytes.Buffer
	l := NewLogLimit(slog.New(slog.NewTextHandler(&buf, nil)), 10*time.Second)
	c := &clock{t: time.Unix(1e9, 0)}
	l.now = c.now
	return l, &buf, c
}

func TestLogLimitOncePerCause(t *testing.T) {
	l, buf, clk := newTestLimit()
	ctx := context.Background()
	refused := errors.New("dial tcp 127.0.0.1:6379: connect: connection refused")
	for i := range 1234 {
		// The same cause whatever the record and whatever numbers the error holds.
		err := fmt.Errorf("dial tcp 127.0.0.1:%d: connect: connection refused", 6000+i)
		l.Log(ctx, slog.LevelWarn, "XREADGROUP; retrying", err, "uri", fmt.Sprint("rec-", i))
	}
	l.Log(ctx, slog.LevelWarn, "other message", refused)
	if got := lines(buf); len(got) != 2 {
		t.Fatalf("got %d lines, want 2 (one per cause):\n%s", len(got), buf)
	}
	clk.add(10 * time.Second)
	l.Log(ctx, slog.LevelWarn, "XREADGROUP; retrying", refused, "uri", "rec-x")
	got := lines(buf)
	if len(got) != 3 {
		t.Fatalf("got %d lines, want 3:\n%s", len(got), buf)
	}
	for _, want := range []string{"(1,233 more since 10s)", "repeated=1233", "uri=rec-x", "connection refused"} {
		if !strings.Contains(got[2], want) {
			t.Errorf("got line %q, want it to hold %q", got[2], want)
		}
	}
	// Left-out events are reported on Flush.
	l.Log(ctx, slog.LevelWarn, "XREADGROUP; retrying", refused)
	l.Log(ctx, slog.LevelWarn, "XREADGROUP; retrying", refused)
	clk.add(time.Second)
	l.Flush(ctx)
	got = lines(buf)
	if len(got) != 4 || !strings.Contains(got[3], "(2 more since 1s)") {
		t.Errorf("after Flush: got %q, want a 4th line with (2 more since 1s)", got)
	}
}

func TestLogLimitBoundsCauses(t *testing.T) {
	l, buf, _ := newTestLimit()
	for i := range 10 * maxLogCauses {
		l.Log(context.Background(), slog.LevelWarn, "record answered NaN", errors.New(letters(i)))
	}
	if got := len(lines(buf)); got != maxLogCauses+1 {
		t.Errorf("got %d lines for %d distinct causes, want %d", got, 10*maxLogCauses, maxLogCauses+1)
	}
	if got := len(l.causes); got > maxLogCauses+1 {
		t.Errorf("got %d causes held, want at most %d", got, maxLogCauses+1)
	}
}

func TestErrorClassAndDigits(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"header size 70123 exceeds 65536", "header size # exceeds #"},
		{"12ab3", "#ab#"},
		{"", ""},
	} {
		if got := ErrorClass(errors.New(tc.in)); got != tc.want {
			t.Errorf("ErrorClass(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
	if got := ErrorClass(nil); got != "" {
		t.Errorf("ErrorClass(nil) = %q, want empty", got)
	}
	for n, want := range map[int64]string{1: "1", 999: "999", 1000: "1,000", 1234567: "1,234,567"} {
		if got := groupDigits(n); got != want {
			t.Errorf("groupDigits(%d) = %q, want %q", n, got, want)
		}
	}
}

// letters writes i with the letters a-j for its digits: distinct classes.
func letters(i int) string {
	return strings.Map(func(r rune) rune { return r - '0' + 'a' }, fmt.Sprint(i))
}
