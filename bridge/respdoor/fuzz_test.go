package respdoor_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	goredis "github.com/redis/go-redis/v9"

	"github.com/cluster-serving/cluster-serving/bridge/respdoor"
)

// FuzzCommands sends any command (a name from a seed and arguments
// split at NUL) to a real door: every command gets an answer, a Redis
// reply or error, never a hang, a crash or a closed connection (QUIT
// aside), and the connection serves a PING after it.
func FuzzCommands(f *testing.F) {
	for _, seed := range []string{
		"XADD\x00add\x00*\x00uri\x00a\x00data\x00{}\x00serde\x00stream",
		"XADD\x00add\x00MAXLEN\x00~\x0010\x00LIMIT\x005\x00*\x00uri\x00u\x00data\x00x",
		"XADD\x00add\x00NOMKSTREAM\x00MINID\x00=",
		"HGETALL\x00cluster-serving_add:a", "HMGET\x00cluster-serving_add:\x00value\x00value",
		"SCAN\x000\x00MATCH\x00*[\x00COUNT\x00-1\x00TYPE", "KEYS\x00cluster-serving_*\\", "KEYS\x00[",
		"HELLO\x002\x00AUTH\x00u", "HELLO\x002\x00SETNAME\x00a\x00AUTH\x00a\x00b", "CLIENT\x00SETNAME\x00a b",
		"CONFIG\x00GET\x00*\x00max*", "INFO\x00memory\x00server", "SELECT\x00-1", "DEL\x00cluster-serving_add:\x00", "EXISTS",
		"XGROUP\x00CREATE\x00add", "AUTH\x00a\x00b\x00c", "PING\x00a\x00b", "\x00",
	} {
		f.Add(seed)
	}
	s := startDoor(f, respdoor.Config{}, nil, add)
	f.Fuzz(func(t *testing.T, cmd string) {
		parts := strings.Split(cmd, "\x00")
		if strings.EqualFold(parts[0], "QUIT") || len(cmd) > 4096 {
			return
		}
		args := make([]any, len(parts))
		for i, p := range parts {
			args[i] = p
		}
		ctx := context.Background()
		err := s.rdb.Do(ctx, args...).Err()
		var re goredis.Error
		if err != nil && !errors.Is(err, goredis.Nil) && !errors.As(err, &re) {
			t.Fatalf("%q: got %v, want a reply", parts, err)
		}
		if err := s.rdb.Ping(ctx).Err(); err != nil {
			t.Fatalf("PING after %q: %v", parts, err)
		}
	})
}
