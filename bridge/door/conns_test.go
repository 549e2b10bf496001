package door_test

import (
	"errors"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/cluster-serving/cluster-serving/bridge/door"
)

// accepted dials l and returns the client's end and the server's end of
// one connection.
func accepted(t *testing.T, l *door.Listener) (client, server net.Conn) {
	t.Helper()
	type res struct {
		c   net.Conn
		err error
	}
	got := make(chan res, 1)
	go func() { c, err := l.Accept(); got <- res{c, err} }()
	client, err := net.Dial("tcp", l.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { client.Close() })
	r := <-got
	if r.err != nil {
		t.Fatal(r.err)
	}
	t.Cleanup(func() { r.c.Close() })
	return client, r.c
}

// closed reports whether the server closed c: a read ends at once with
// EOF (or a reset) instead of waiting out the deadline.
func closed(c net.Conn) bool {
	_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
	_, err := c.Read(make([]byte, 1))
	var ne net.Error
	return err != nil && !(errors.As(err, &ne) && ne.Timeout())
}

func listen(t *testing.T, max int) *door.Listener {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	l := door.NewListener(ln, max)
	t.Cleanup(func() { l.Close() })
	return l
}

// TestListenerShedsTheLongestIdle: at the cap, a new connection closes
// the one idle the longest, never one with a request in flight.
func TestListenerShedsTheLongestIdle(t *testing.T) {
	l := listen(t, 3)
	c1, s1 := accepted(t, l)
	c2, s2 := accepted(t, l)
	c3, _ := accepted(t, l)
	l.Begin(s1) // busy: never shed
	l.Begin(s2)
	l.End(s2) // idle again, after c3 was: c3 is now the longest idle
	c4, _ := accepted(t, l)
	if !closed(c3) {
		t.Fatal("c3, idle the longest: got open, want closed")
	}
	if got := l.Open(); got != 3 {
		t.Errorf("open: got %d, want 3", got)
	}
	c5, _ := accepted(t, l) // sheds c2, idle since before c4 was accepted
	if !closed(c2) {
		t.Fatal("c2: got open, want closed")
	}
	for name, c := range map[string]net.Conn{"c1 (busy)": c1, "c4": c4, "c5": c5} {
		if _, err := c.Write([]byte("x")); err != nil {
			t.Errorf("%s: got %v, want it open", name, err)
		}
	}
	if l.Shed() != 2 || l.Refused() != 0 {
		t.Errorf("got shed %d refused %d, want 2 and 0", l.Shed(), l.Refused())
	}
}

// TestListenerRefusesWhenNoneIsIdle: at the cap with every connection
// busy, the new connection is closed and the old ones stay.
func TestListenerRefusesWhenNoneIsIdle(t *testing.T) {
	l := listen(t, 1)
	c1, s1 := accepted(t, l)
	l.Begin(s1)
	next := make(chan net.Conn, 1)
	go func() { c, _ := l.Accept(); next <- c }() // refuses c2, then accepts c3
	c2, err := net.Dial("tcp", l.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c2.Close()
	if !closed(c2) {
		t.Fatal("c2 over the cap: got open, want closed")
	}
	if _, err := c1.Write([]byte("x")); err != nil {
		t.Errorf("c1: got %v, want it open", err)
	}
	if got := l.Refused(); got != 1 {
		t.Errorf("refused: got %d, want 1", got)
	}
	// A closed connection leaves room: nothing is shed for the next one.
	s1.Close()
	c3, err := net.Dial("tcp", l.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c3.Close()
	s3 := <-next
	defer s3.Close()
	if _, err := c3.Write([]byte("x")); err != nil || l.Shed() != 0 || l.Open() != 1 {
		t.Errorf("after a close: got %v, shed %d, open %d, want room, no shedding and 1 open", err, l.Shed(), l.Open())
	}
}

func TestConnsValidate(t *testing.T) {
	invalid := errors.New("invalid")
	for _, tc := range []struct {
		c    door.Conns
		want string
	}{
		{door.Conns{}, ""},
		{door.Conns{IdleTimeout: -1}, "IdleTimeout"},
		{door.Conns{MaxConnections: -1}, "MaxConnections"},
		{door.Conns{WriteTimeout: 30 * time.Second}, "WriteTimeout 30s must be longer than RequestTimeout 30s"},
		{door.Conns{WriteTimeout: 31 * time.Second}, ""},
	} {
		err := tc.c.Validate(invalid, 30*time.Second)
		if (tc.want == "") != (err == nil) || err != nil && (!strings.Contains(err.Error(), tc.want) || !errors.Is(err, invalid)) {
			t.Errorf("%+v: got %v, want %q", tc.c, err, tc.want)
		}
	}
	got := door.Conns{ReadTimeout: time.Second}.WithDefaults(30*time.Second, 100*time.Millisecond)
	if got.WriteTimeout != 41100*time.Millisecond || got.IdleTimeout != door.DefaultIdleTimeout || got.MaxConnections < 16 {
		t.Errorf("defaults: got %+v, want WriteTimeout 41.1s (read + acquire + request + 10s)", got)
	}
}
