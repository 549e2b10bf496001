package httpdoor_test

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cluster-serving/cluster-serving/bridge/door"
	httpdoor "github.com/cluster-serving/cluster-serving/bridge/httpdoor"
	"github.com/cluster-serving/cluster-serving/infer/infertest"
)

// keptAlive is a raw client connection that sent one request and keeps
// the connection open, as the 20,000 idle connections did.
type keptAlive struct {
	net.Conn
	r *bufio.Reader
}

// liveProbe opens a connection to addr, sends GET /v2/health/live (no
// token needed) and reads the 200, leaving the connection idle.
func liveProbe(tb testing.TB, addr string) keptAlive {
	tb.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { c.Close() })
	k := keptAlive{c, bufio.NewReader(c)}
	if _, err := io.WriteString(c, "GET /v2/health/live HTTP/1.1\r\nHost: door\r\n\r\n"); err != nil {
		tb.Fatal(err)
	}
	resp, err := http.ReadResponse(k.r, nil)
	if err != nil {
		tb.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || resp.Close {
		tb.Fatalf("live: got %d (close %v), want 200 kept alive", resp.StatusCode, resp.Close)
	}
	return k
}

// closedByServer reports whether the server closed c: a read ends with
// EOF (or a reset) within wait rather than waiting it out.
func closedByServer(c keptAlive, wait time.Duration) bool {
	_ = c.SetReadDeadline(time.Now().Add(wait))
	_, err := c.r.ReadByte()
	var ne net.Error
	return err != nil && !(errors.As(err, &ne) && ne.Timeout())
}

// TestIdleConnectionsAreShed: with a cap of 50 connections, 300 clients
// that each sent one GET /v2/health/live and went quiet do not lock a
// real client out: the door closes the longest-idle connections to admit
// new ones, and an inference is served at once.
func TestIdleConnectionsAreShed(t *testing.T) {
	infertest.RequireLibrary(t)
	const max, idle = 50, 300
	e := startDoor(t, httpdoor.Config{Config: door.Config{Conns: door.Conns{MaxConnections: max}}}, served{name: "add", file: "add_f32"})
	conns := make([]keptAlive, idle)
	for i := range conns {
		conns[i] = liveProbe(t, e.addr)
	}
	client := &http.Client{Transport: &http.Transport{}, Timeout: 30 * time.Second}
	resp, err := client.Post(e.url+"/predict", "application/json", strings.NewReader(addBody))
	if err != nil {
		t.Fatalf("a new client after %d idle connections: %v", idle, err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("inference: got %d %s, want 200", resp.StatusCode, b)
	}
	// The newest connection stays open: older idle ones go first.
	if _, err := io.WriteString(conns[idle-1], "GET /v2/health/live HTTP/1.1\r\nHost: door\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	if resp, err := http.ReadResponse(conns[idle-1].r, nil); err != nil || resp.StatusCode != 200 {
		t.Fatalf("the newest idle connection: got %v %v, want it served", resp, err)
	}
	// At most max stay open: the rest were shed, the oldest among them.
	// (A connection counts as idle from when the door finished its answer,
	// which may come just after the client read it, so the order of
	// shedding can differ from the order of dialling by a place or so.)
	var shed atomic.Int64
	var wg sync.WaitGroup
	for _, c := range conns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if closedByServer(c, 2*time.Second) {
				shed.Add(1)
			}
		}()
	}
	wg.Wait()
	if got := shed.Load(); got < idle-max {
		t.Errorf("shed: got %d idle connections closed, want at least %d (at most %d open)", got, idle-max, max)
	}
	if !closedByServer(conns[0], 2*time.Second) {
		t.Error("the oldest idle connection: got open, want it shed")
	}
}

// TestReadTimeoutEndsATrickledBody: a client that sends its body a byte
// at a time loses the connection at ReadTimeout instead of holding it.
func TestReadTimeoutEndsATrickledBody(t *testing.T) {
	infertest.RequireLibrary(t)
	e := startDoor(t, httpdoor.Config{Config: door.Config{Conns: door.Conns{ReadTimeout: 300 * time.Millisecond}}}, served{name: "add", file: "add_f32"})
	c, err := net.Dial("tcp", e.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	const size = 2000 // 20s at one byte each 10ms: far past the timeout
	fmt.Fprintf(c, "POST /predict HTTP/1.1\r\nHost: door\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n", size)
	sent := make(chan int, 1)
	go func() {
		n := 0
		for ; n < size; n++ {
			if _, err := c.Write([]byte(" ")); err != nil {
				break
			}
			time.Sleep(10 * time.Millisecond)
		}
		sent <- n
	}()
	_ = c.SetReadDeadline(time.Now().Add(15 * time.Second)) // only a failing test waits it out
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err == nil {
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 400 && resp.StatusCode != 408 {
			t.Errorf("got %d %s, want 400 or 408 (or the connection closed)", resp.StatusCode, b)
		}
	} else if ne, ok := err.(net.Error); ok && ne.Timeout() {
		t.Fatal("the door still reads the trickled body: got no answer and no close")
	}
	c.Close()
	if n := <-sent; n >= size {
		t.Errorf("the whole trickled body (%d bytes) was taken, want the connection cut before", n)
	}
}

// TestIdleTimeoutClosesAKeptAliveConnection: a connection that sent one
// request and went quiet is closed at IdleTimeout.
func TestIdleTimeoutClosesAKeptAliveConnection(t *testing.T) {
	infertest.RequireLibrary(t)
	e := startDoor(t, httpdoor.Config{Config: door.Config{Conns: door.Conns{IdleTimeout: 200 * time.Millisecond}}}, served{name: "add", file: "add_f32"})
	if c := liveProbe(t, e.addr); !closedByServer(c, 10*time.Second) {
		t.Error("got the idle connection open, want it closed at IdleTimeout")
	}
}

func TestConnsConfigValidated(t *testing.T) {
	cfg := httpdoor.Config{Config: door.Config{Models: []httpdoor.Model{{Name: "m", Job: "m"}}, RequestTimeout: time.Minute,
		Conns: door.Conns{WriteTimeout: time.Minute}}}
	if err := cfg.Validate(); err == nil || !strings.Contains(err.Error(), "WriteTimeout") || !errors.Is(err, httpdoor.ErrInvalidConfig) {
		t.Errorf("WriteTimeout = RequestTimeout: got %v, want ErrInvalidConfig naming WriteTimeout", err)
	}
}
