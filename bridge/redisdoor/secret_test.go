package redisdoor_test

import (
	"bytes"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/cluster-serving/cluster-serving/bridge/redisdoor"
	"github.com/cluster-serving/cluster-serving/bridge/redisdoor/redistest"
)

// noSecret fails the test for each of texts that holds secret.
func noSecret(tb testing.TB, secret string, texts ...string) {
	tb.Helper()
	for _, s := range texts {
		if strings.Contains(s, secret) {
			tb.Errorf("the secret is printed: %q", s)
		}
	}
}

// A password in redisUrl is printed nowhere: not in the door's log at
// debug level (go-redis's own lines included) when Redis takes it or
// refuses it, not in the errors of a redisUrl that does not parse, not
// when the Config itself is logged.
func TestRedisPasswordNeverPrinted(t *testing.T) {
	addr, _ := redistest.StartWith(t, &goredis.Options{Password: planted}, "--requirepass", planted)
	rdb := goredis.NewClient(&goredis.Options{Addr: addr, Password: planted})
	t.Cleanup(func() { _ = rdb.Close() })

	good := redisdoor.Config{Addr: "redis://:" + planted + "@" + addr, Job: "pw"}
	texts := serveOne(t, good, rdb)
	_, all := refused(t, redisdoor.Config{Addr: "redis://:wr0ng-" + planted + "@" + addr, Job: "pw",
		RetryInterval: 10 * time.Millisecond}, "the wrong password refused")
	texts = append(texts, all...)
	_, all = refused(t, redisdoor.Config{Addr: "redis://user:" + planted + "@" + addr, Job: "pw",
		RetryInterval: 10 * time.Millisecond}, "the unknown user refused")
	texts = append(texts, all...)

	for _, bad := range []string{
		"redis://:" + planted + "@127.0.0.1:notaport",
		"redis://:" + planted + "@127.0.0.1:6379/notadb",
		"redis://:" + planted + "@127.0.0.1:6379?nosuch=1",
		"redis://:" + planted + "@bad host:6379",
		"redis://:" + planted + "@127.0.0.1:6379/%zz",
		"nosuch://:" + planted + "@127.0.0.1:6379",
		":" + planted + "@127.0.0.1:6379",
	} {
		err := redisdoor.Config{Addr: bad}.Validate()
		if err == nil {
			t.Errorf("%s: got no error, want one", redisdoor.Config{Addr: bad}.LogValue())
			continue
		}
		texts = append(texts, err.Error())
	}
	var logged bytes.Buffer
	slog.New(slog.NewJSONHandler(&logged, nil)).Info("config", "redis", good, "bad", redisdoor.Config{Addr: "redis://:" + planted + "@bad host"})
	texts = append(texts, logged.String(), fmt.Sprint(good.LogValue()))
	if !strings.Contains(logged.String(), "xxxxx") {
		t.Errorf("got %s, want the password shown as xxxxx", logged.String())
	}
	noSecret(t, planted, texts...)
	t.Logf("searched %d lines and errors, e.g.:\n%s", len(texts), strings.Join(texts[len(texts)-10:], "\n"))
}
