package respdoor_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/cluster-serving/cluster-serving/bridge/respdoor"
)

// TestCommands sends every command the door serves, and the mistakes a
// client can make, through go-redis, and checks each answer.
func TestCommands(t *testing.T) {
	s := startDoor(t, respdoor.Config{}, nil, add)
	ctx := context.Background()
	tests := []struct {
		args []any
		want string // fmt.Sprint of the answer, or the start of its error
	}{
		{[]any{"PING"}, "PONG"},
		{[]any{"ping", "hi"}, "hi"},
		{[]any{"ECHO", "x y"}, "x y"},
		{[]any{"HELLO", "2"}, "[server redis version 7.2.0 proto 2 id "},
		{[]any{"HELLO", "3"}, "error NOPROTO sorry, this protocol version is not supported"},
		{[]any{"CLIENT", "SETNAME", "me"}, "OK"},
		{[]any{"CLIENT", "GETNAME"}, "me"},
		{[]any{"CLIENT", "SETINFO", "LIB-NAME", "x"}, "OK"},
		{[]any{"CLIENT", "KILL", "x"}, "error ERR unknown subcommand 'KILL'"},
		{[]any{"SELECT", "0"}, "OK"},
		{[]any{"SELECT", "1"}, "error ERR DB index is out of range"},
		{[]any{"CONFIG", "GET", "maxmemory"}, "[maxmemory 1073741824]"},
		{[]any{"CONFIG", "GET", "databases"}, "[databases 1]"},
		{[]any{"CONFIG", "SET", "maxmemory", "1"}, "error ERR unknown subcommand 'SET'"},
		{[]any{"FLUSHALL"}, "error ERR unknown command 'FLUSHALL' (cluster-serving RESP door: supported: AUTH CLIENT CONFIG DEL ECHO EXISTS HELLO HGET HGETALL HMGET INFO KEYS PING PSUBSCRIBE PUNSUBSCRIBE QUIT SCAN SELECT SUBSCRIBE UNSUBSCRIBE XADD XGROUP)"},
		{[]any{"GET", "a\r\nb"}, "error ERR unknown command 'GET'"},
		{[]any{"HGETALL"}, "error ERR wrong number of arguments for 'hgetall' command"},
		{[]any{"XADD", "add", "*", "uri"}, "error ERR wrong number of arguments for 'xadd' command"},
		{[]any{"XADD", "add", "*", "uri", "a", "data"}, "error ERR wrong number of arguments for 'xadd' command"},
		{[]any{"XADD", "other", "*", "uri", "a", "data", "x"}, "error ERR no job 'other' at this cluster-serving RESP door (its streams are the jobs: add)"},
		{[]any{"XADD", "add", "1-1", "uri", "a", "data", "x"}, "error ERR the cluster-serving RESP door assigns entry ids itself"},
		{[]any{"XADD", "add", "*", "data", "x"}, "error ERR XADD needs a field 'uri'"},
		{[]any{"XADD", "add", "*", "uri", "a", "serde", "stream"}, "error ERR XADD needs a field 'data'"},
		{[]any{"XADD", "add", "*", "uri", strings.Repeat("u", 513), "data", "x"}, "error ERR uri longer than 512 bytes"},
		{[]any{"XGROUP", "CREATE", "add", "serving", "$"}, "error BUSYGROUP Consumer Group name already exists"},
		{[]any{"XGROUP", "CREATE", "nope", "serving", "$"}, "error ERR no job 'nope'"},
		{[]any{"HGETALL", "cluster-serving_add:none"}, "[]"},
		{[]any{"HGET", "cluster-serving_add:none", "value"}, "error redis: nil"},
		{[]any{"HMGET", "cluster-serving_add:none", "value", "x"}, "[<nil> <nil>]"},
		{[]any{"EXISTS", "cluster-serving_add:none"}, "0"},
		{[]any{"DEL", "cluster-serving_add:none"}, "0"},
		{[]any{"HGETALL", "cluster-serving_other:a"}, "error ERR key 'cluster-serving_other:a' is not a result key of this cluster-serving RESP door: its keys are cluster-serving_<job>:<uri> for the jobs add"},
		{[]any{"DEL", "cluster-serving_add:a", "somekey"}, "error ERR key 'somekey' is not a result key"},
		{[]any{"KEYS", "cluster-serving_add:*"}, "[]"},
		{[]any{"SCAN", "0", "MATCH", "*", "COUNT", "5"}, "[0 []]"},
		{[]any{"SCAN", "x"}, "error ERR invalid cursor"},
		{[]any{"AUTH", "pw"}, "error ERR AUTH <password> called without any password configured for the default user"},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprint(tt.args...), func(t *testing.T) {
			v, err := s.rdb.Do(ctx, tt.args...).Result()
			got := fmt.Sprint(v)
			if err != nil {
				got = "error " + err.Error()
			}
			if !strings.HasPrefix(got, tt.want) {
				t.Errorf("got %q, want %q", got, tt.want)
			}
		})
	}
}

// TestInfo checks the section the original client reads: used_memory,
// and maxmemory the work queue's limit (queueMaxBytes' default, 1 GiB).
func TestInfo(t *testing.T) {
	s := startDoor(t, respdoor.Config{}, nil, add)
	info, err := s.rdb.Info(context.Background(), "memory").Result()
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"# Memory\r\n", "\r\nused_memory:", "\r\nmaxmemory:1073741824\r\n"} {
		if !strings.Contains(info, want) {
			t.Errorf("INFO memory: got %q, want it to hold %q", info, want)
		}
	}
	if strings.Contains(info, "# Server") {
		t.Errorf("INFO memory: got %q, want the memory section alone", info)
	}
}
