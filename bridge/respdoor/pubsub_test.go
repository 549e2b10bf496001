package respdoor_test

import (
	"bufio"
	"fmt"
	"io"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cluster-serving/cluster-serving/bridge/redisdoor/redistest"
	"github.com/cluster-serving/cluster-serving/bridge/respdoor"
)

// step is one command and how many replies it gets.
type step struct {
	args    []string
	replies int
}

// script sends the steps one by one over a new connection to addr, each
// once the replies of the one before came, and returns the raw replies
// of each step.
func script(tb testing.TB, addr string, steps []step) []string {
	tb.Helper()
	c := dial(tb, addr)
	_ = c.SetDeadline(time.Now().Add(30 * time.Second))
	r := bufio.NewReader(c)
	var out []string
	for _, st := range steps {
		cmd := "*" + strconv.Itoa(len(st.args)) + "\r\n"
		for _, a := range st.args {
			cmd += "$" + strconv.Itoa(len(a)) + "\r\n" + a + "\r\n"
		}
		if _, err := io.WriteString(c, cmd); err != nil {
			tb.Fatal(err)
		}
		var got strings.Builder
		for range st.replies {
			if err := readReply(r, &got); err != nil {
				tb.Fatalf("%q: reading its replies after %q: %v", st.args, got.String(), err)
			}
		}
		out = append(out, got.String())
	}
	return out
}

// readReply copies one RESP2 reply from r to w, as it came.
func readReply(r *bufio.Reader, w *strings.Builder) error {
	line, err := r.ReadString('\n')
	if err != nil {
		return err
	}
	w.WriteString(line)
	n, _ := strconv.Atoi(strings.TrimSpace(line[1:]))
	switch line[0] {
	case '*':
		for range n {
			if err := readReply(r, w); err != nil {
				return err
			}
		}
	case '$':
		if n >= 0 {
			b := make([]byte, n+2)
			if _, err := io.ReadFull(r, b); err != nil {
				return err
			}
			w.Write(b)
		}
	}
	return nil
}

// TestPubSubRepliesAsRedis sends the same commands, one at a time, to a
// real redis-server and to the door and compares the bytes of every
// reply: subscription counts (channels and patterns together), a
// channel subscribed twice, unsubscribing what is not subscribed, PING in
// and out of subscribed mode, CONFIG SET and GET of
// notify-keyspace-events and their errors. (UNSUBSCRIBE of all leaves
// one channel here: Redis answers several in its hash table's order.)
func TestPubSubRepliesAsRedis(t *testing.T) {
	redisAddr, _ := redistest.Start(t)
	s := startDoor(t, respdoor.Config{}, nil, add)
	scripts := map[string][]step{
		"subscribed mode": {
			{[]string{"UNSUBSCRIBE"}, 1}, {[]string{"PUNSUBSCRIBE"}, 1}, {[]string{"UNSUBSCRIBE", "a"}, 1}, {[]string{"PING"}, 1},
			{[]string{"SUBSCRIBE", "a", "b", "a"}, 3}, {[]string{"PSUBSCRIBE", "x*", "x*"}, 2}, {[]string{"PING"}, 1},
			{[]string{"PING", "hi"}, 1}, {[]string{"PING", "a", "b"}, 1}, {[]string{"SUBSCRIBE"}, 1},
			{[]string{"UNSUBSCRIBE", "zz"}, 1}, {[]string{"UNSUBSCRIBE", "a"}, 1}, {[]string{"UNSUBSCRIBE"}, 1}, {[]string{"PUNSUBSCRIBE", "x*", "y*"}, 2},
			{[]string{"PING"}, 1}, {[]string{"ECHO", "back to normal"}, 1}, {[]string{"PSUBSCRIBE", "p"}, 1}, {[]string{"QUIT"}, 1},
		},
		"config": {
			{[]string{"CONFIG", "GET", "notify-keyspace-events"}, 1},
			{[]string{"CONFIG", "SET", "notify-keyspace-events", "Q"}, 1},
			{[]string{"CONFIG", "SET", "notify-keyspace-events", "gKhxnm"}, 1}, {[]string{"CONFIG", "GET", "notify*"}, 1},
			{[]string{"CONFIG", "SET", "notify-keyspace-events", "KEA"}, 1}, {[]string{"CONFIG", "GET", "notify-keyspace-events"}, 1},
			{[]string{"CONFIG", "SET", "NOTIFY-keyspace-events", "An"}, 1}, {[]string{"CONFIG", "GET", "notify-keyspace-events"}, 1},
			{[]string{"CONFIG", "SET", "notify-keyspace-events", "Kh", "notify-keyspace-events", "E"}, 1},
			{[]string{"CONFIG", "SET", "notify-keyspace-events"}, 1},
			{[]string{"CONFIG", "SET", "notify-keyspace-events", ""}, 1}, {[]string{"CONFIG", "GET", "notify-keyspace-events"}, 1},
		},
	}
	for name, steps := range scripts {
		t.Run(name, func(t *testing.T) {
			want, got := script(t, redisAddr, steps), script(t, s.addr, steps)
			for i, st := range steps {
				if got[i] != want[i] {
					t.Errorf("%q: got %q, want %q (redis-server)", st.args, got[i], want[i])
				}
			}
		})
	}
}

// TestSubscribedModeRefuses: in subscribed mode any command but
// (P)SUBSCRIBE, (P)UNSUBSCRIBE, PING and QUIT is refused as Redis refuses
// it, pipelined behind the SUBSCRIBE or sent later; CONFIG SET of another
// parameter keeps its answer.
func TestSubscribedModeRefuses(t *testing.T) {
	s := startDoor(t, respdoor.Config{}, nil, add)
	refused := func(cmd string) string {
		return "-ERR Can't execute '" + cmd + "': only (P)SUBSCRIBE / (P)UNSUBSCRIBE / PING / QUIT are allowed in this context\r\n"
	}
	got := script(t, s.addr, []step{
		{[]string{"CONFIG", "SET", "maxmemory", "1"}, 1},
		{[]string{"SUBSCRIBE", "a"}, 1}, {[]string{"HGETALL", "cluster-serving_add:x"}, 1}, {[]string{"AUTH", "pw"}, 1},
		{[]string{"XADD", "add", "*", "uri", "u", "data", "x"}, 1}, {[]string{"NOSUCH"}, 1},
	})
	want := []string{
		"-ERR unknown subcommand 'SET' (cluster-serving RESP door: CONFIG SET notify-keyspace-events only; set 'maxmemory' in config.yaml)\r\n",
		"*3\r\n$9\r\nsubscribe\r\n$1\r\na\r\n:1\r\n", refused("hgetall"), refused("auth"), refused("xadd"),
		"-ERR unknown command 'NOSUCH'",
	}
	for i := range want {
		if !strings.HasPrefix(got[i], want[i]) {
			t.Errorf("reply %d: got %q, want %q", i, got[i], want[i])
		}
	}
	c := dial(t, s.addr)
	pipelined := c.send(t, "SUBSCRIBE b\r\nKEYS *\r\nPING\r\n")
	for !strings.Contains(pipelined, "pong") {
		pipelined += c.send(t, "")
	}
	if want := fmt.Sprint("*3\r\n$9\r\nsubscribe\r\n$1\r\nb\r\n:1\r\n", refused("keys"), "*2\r\n$4\r\npong\r\n$0\r\n\r\n"); pipelined != want {
		t.Errorf("pipelined: got %q, want %q", pipelined, want)
	}
}
