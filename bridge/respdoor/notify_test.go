package respdoor_test

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/cluster-serving/cluster-serving/bridge/redisdoor"
	"github.com/cluster-serving/cluster-serving/bridge/respdoor"
	"github.com/cluster-serving/cluster-serving/embedded/tlstest"
)

// instances is a record add serves.
const instances = `{"instances":[{"x":[1,2,3,4]}]}`

// xaddURI writes a record of add under uri through rdb.
func xaddURI(tb testing.TB, rdb *goredis.Client, uri string) {
	tb.Helper()
	xadd(tb, rdb, record{job: "add", uri: uri, fields: []any{"data", instances, "serde", "stream"}})
}

// subscribed opens a pubsub connection of rdb on channels, or on
// patterns when pattern, and returns once the door confirmed them.
func subscribed(tb testing.TB, rdb *goredis.Client, pattern bool, names ...string) *goredis.PubSub {
	tb.Helper()
	ctx := context.Background()
	ps := rdb.Subscribe(ctx, names...)
	if pattern {
		ps = rdb.PSubscribe(ctx, names...)
	}
	tb.Cleanup(func() { _ = ps.Close() })
	for range names {
		if _, err := ps.Receive(ctx); err != nil {
			tb.Fatalf("subscribing to %q: %v", names, err)
		}
	}
	return ps
}

// next is the next message of ps, waited for 30 s at most.
func next(tb testing.TB, ps *goredis.PubSub) *goredis.Message {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	m, err := ps.ReceiveMessage(ctx)
	if err != nil {
		tb.Fatalf("waiting for a message: %v", err)
	}
	return m
}

// configSet is CONFIG SET notify-keyspace-events flags.
func configSet(tb testing.TB, rdb *goredis.Client, flags string) {
	tb.Helper()
	if err := rdb.ConfigSet(context.Background(), "notify-keyspace-events", flags).Err(); err != nil {
		tb.Fatalf("CONFIG SET notify-keyspace-events %q: %v", flags, err)
	}
}

// hgetallNow reads key once, with no poll: the value must be there.
func hgetallNow(tb testing.TB, rdb *goredis.Client, key string) {
	tb.Helper()
	m, err := rdb.HGetAll(context.Background(), key).Result()
	if err != nil || m[redisdoor.ResultField] == "" {
		tb.Errorf("HGETALL %s right after its message: got %q, %v, want its value", key, m, err)
	}
}

// TestKeyspaceNotifications: a client turns notifications on, subscribes
// as the common Redis pattern does, XADDs a record, and hears of its
// result once a worker answered; HGETALL then finds it at once, and DEL
// is heard of with g.
func TestKeyspaceNotifications(t *testing.T) {
	s := startDoor(t, respdoor.Config{}, nil, add)
	ctx := context.Background()
	tests := []struct {
		flags   string
		pattern bool
		sub     string
		// channel and payload of the message for key, and of its DEL
		// (none: no message wanted).
		channel, payload       func(key string) string
		delChannel, delPayload func(key string) string
	}{
		{flags: "Kh", pattern: true, sub: "__keyspace@0__:cluster-serving_add:*",
			channel: func(k string) string { return "__keyspace@0__:" + k }, payload: func(string) string { return "hset" }},
		{flags: "Eh", sub: "__keyevent@0__:hset",
			channel: func(string) string { return "__keyevent@0__:hset" }, payload: func(k string) string { return k }},
		{flags: "KEA", pattern: true, sub: "__keyevent@0__:*",
			channel: func(string) string { return "__keyevent@0__:hset" }, payload: func(k string) string { return k },
			delChannel: func(string) string { return "__keyevent@0__:del" }, delPayload: func(k string) string { return k }},
		{flags: "gKh", pattern: true, sub: "__keyspace@0__:*",
			channel: func(k string) string { return "__keyspace@0__:" + k }, payload: func(string) string { return "hset" },
			delChannel: func(k string) string { return "__keyspace@0__:" + k }, delPayload: func(string) string { return "del" }},
	}
	for i, tt := range tests {
		t.Run(tt.flags, func(t *testing.T) {
			configSet(t, s.rdb, tt.flags)
			ps := subscribed(t, s.rdb, tt.pattern, tt.sub)
			uri := fmt.Sprintf("notified-%d", i)
			key := redisdoor.ResultKey("add", uri)
			xaddURI(t, s.rdb, uri)
			m := next(t, ps)
			if m.Channel != tt.channel(key) || m.Payload != tt.payload(key) {
				t.Fatalf("got %s %q, want %s %q", m.Channel, m.Payload, tt.channel(key), tt.payload(key))
			}
			if tt.pattern && m.Pattern != tt.sub {
				t.Errorf("pattern: got %q, want %q", m.Pattern, tt.sub)
			}
			hgetallNow(t, s.rdb, key)
			if n, err := s.rdb.Del(ctx, key).Result(); err != nil || n != 1 {
				t.Fatalf("DEL: got %d, %v, want 1", n, err)
			}
			if tt.delChannel == nil {
				return
			}
			if m := next(t, ps); m.Channel != tt.delChannel(key) || m.Payload != tt.delPayload(key) {
				t.Errorf("after DEL: got %s %q, want %s %q", m.Channel, m.Payload, tt.delChannel(key), tt.delPayload(key))
			}
		})
	}
}

// TestNoNotificationWithoutConfig: with notifications off (the default),
// or on without K/E or without h, a stored result is heard of by no one:
// the first message a subscriber gets, once h and K are on, is of the
// record stored after.
func TestNoNotificationWithoutConfig(t *testing.T) {
	s := startDoor(t, respdoor.Config{}, nil, add)
	ps := subscribed(t, s.rdb, true, "__key*__:*")
	for i, flags := range []string{"(default)", "h", "KE$lszxetd", ""} {
		if i > 0 {
			configSet(t, s.rdb, flags)
		}
		quiet := fmt.Sprintf("quiet-%d", i)
		xaddURI(t, s.rdb, quiet)
		query(t, s.rdb, "add", quiet)
	}
	configSet(t, s.rdb, "Kh")
	xaddURI(t, s.rdb, "heard")
	want := "__keyspace@0__:" + redisdoor.ResultKey("add", "heard")
	if m := next(t, ps); m.Channel != want || m.Payload != "hset" {
		t.Errorf("first message: got %s %q, want %s hset", m.Channel, m.Payload, want)
	}
}

// TestSubscribeNeedsAuth: on a door with a password, SUBSCRIBE, PSUBSCRIBE
// and CONFIG SET before AUTH are answered NOAUTH; after it, a subscriber
// hears of results.
func TestSubscribeNeedsAuth(t *testing.T) {
	pwFile := t.TempDir() + "/pw"
	if err := os.WriteFile(pwFile, []byte(testPassword+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	s := startOn(t, doortestMesh(t), respdoor.Config{PasswordFile: pwFile, Jobs: []string{"add"}}, &goredis.Options{Password: testPassword})
	c := dial(t, s.addr)
	for _, cmd := range []string{"SUBSCRIBE a", "PSUBSCRIBE *", "CONFIG SET notify-keyspace-events KA", "UNSUBSCRIBE"} {
		if got := c.send(t, cmd+"\r\n"); got != "-NOAUTH Authentication required.\r\n" {
			t.Errorf("%s before AUTH: got %q, want NOAUTH", cmd, got)
		}
	}
	configSet(t, s.rdb, "Kh")
	ps := subscribed(t, s.rdb, false, "__keyspace@0__:cluster-serving_add:authed")
	xaddURI(t, s.rdb, "authed")
	if m := next(t, ps); m.Payload != "hset" {
		t.Errorf("got %s %q, want hset", m.Channel, m.Payload)
	}
}

// TestSubscribeExactChannel: SUBSCRIBE on one key's channel hears of that
// key alone, and a subscriber sits quiet past the idle timeout without
// being closed, as Redis exempts pubsub clients from its timeout.
func TestSubscribeExactChannel(t *testing.T) {
	const idle = 200 * time.Millisecond
	s := startDoor(t, respdoor.Config{IdleTimeout: idle}, nil, add)
	configSet(t, s.rdb, "Kh")
	key := redisdoor.ResultKey("add", "exact")
	ps := subscribed(t, s.rdb, false, "__keyspace@0__:"+key)
	time.Sleep(3 * idle) // longer than the idle timeout, which must not apply
	xaddURI(t, s.rdb, "other")
	query(t, s.rdb, "add", "other")
	xaddURI(t, s.rdb, "exact")
	m := next(t, ps)
	if m.Channel != "__keyspace@0__:"+key || m.Payload != "hset" || m.Pattern != "" {
		t.Errorf("got %+v, want a message on %s's channel", m, key)
	}
	hgetallNow(t, s.rdb, key)
	if err := ps.Ping(context.Background()); err != nil {
		t.Errorf("PING on the subscribed connection: %v", err)
	}
}

// TestNotificationsAcrossDoors: two door processes of one job; a client
// of the first hears of results of records XADDed through the second
// (either door may store a result: they share the results consumer), and
// reads each on the first at once.
func TestNotificationsAcrossDoors(t *testing.T) {
	m := startDoorMesh(t, add)
	first := startOn(t, m, respdoor.Config{Jobs: []string{"add"}}, nil)
	second := startOn(t, m, respdoor.Config{Jobs: []string{"add"}}, nil)
	configSet(t, first.rdb, "Kh")
	ps := subscribed(t, first.rdb, true, "__keyspace@0__:cluster-serving_add:*")
	want := map[string]bool{}
	for i := range 6 {
		uri := fmt.Sprintf("across-%d", i)
		want["__keyspace@0__:"+redisdoor.ResultKey("add", uri)] = true
		xaddURI(t, second.rdb, uri)
	}
	for len(want) > 0 {
		msg := next(t, ps)
		if !want[msg.Channel] || msg.Payload != "hset" {
			t.Fatalf("got %s %q, want hset of one of %v", msg.Channel, msg.Payload, want)
		}
		delete(want, msg.Channel)
		hgetallNow(t, first.rdb, strings.TrimPrefix(msg.Channel, "__keyspace@0__:"))
	}
}

// TestStopClosesSubscribers: a door's Serve ends with subscribers
// connected, in plain TCP and over TLS, and closes them.
func TestStopClosesSubscribers(t *testing.T) {
	p := tlstest.New(t, "resp")
	for _, secure := range []bool{false, true} {
		t.Run(fmt.Sprint("tls=", secure), func(t *testing.T) {
			cfg, opt := respdoor.Config{Jobs: []string{"add"}}, &goredis.Options{}
			if secure {
				cfg.TLSCertFile, cfg.TLSKeyFile = p.ServerCert, p.ServerKey
				opt.TLSConfig = p.ClientTLS(t, false)
			}
			s := startOn(t, doortestMesh(t), cfg, opt)
			configSet(t, s.rdb, "Kh")
			ps := subscribed(t, s.rdb, false, "__keyspace@0__:cluster-serving_add:stop")
			xaddURI(t, s.rdb, "stop")
			if m := next(t, ps); m.Payload != "hset" {
				t.Fatalf("got %s %q, want hset", m.Channel, m.Payload)
			}
			stopped := make(chan struct{})
			go func() {
				s.stop()
				close(stopped)
			}()
			select {
			case <-stopped:
			case <-time.After(30 * time.Second):
				t.Fatal("Serve did not end with a subscriber connected")
			}
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			if msg, err := ps.ReceiveMessage(ctx); err == nil || ctx.Err() != nil {
				t.Errorf("the subscriber after the stop: got %v, %v, want its connection closed", msg, err)
			}
		})
	}
}

// TestNotificationsFromConfig: a door started with NotifyKeyspaceEvents
// (config key respNotifyKeyspaceEvents) notifies with no CONFIG SET, and
// CONFIG GET reads the setting back; a class Redis does not know is
// refused at New.
func TestNotificationsFromConfig(t *testing.T) {
	s := startDoor(t, respdoor.Config{NotifyKeyspaceEvents: "Kh"}, nil, add)
	got, err := s.rdb.ConfigGet(context.Background(), "notify-keyspace-events").Result()
	if err != nil || got["notify-keyspace-events"] != "hK" && got["notify-keyspace-events"] != "Kh" {
		t.Errorf("CONFIG GET notify-keyspace-events: got %v, %v, want the flags K and h", got, err)
	}
	ps := subscribed(t, s.rdb, true, "__keyspace@0__:*")
	xaddURI(t, s.rdb, "configured")
	want := "__keyspace@0__:" + redisdoor.ResultKey("add", "configured")
	if m := next(t, ps); m.Channel != want || m.Payload != "hset" {
		t.Errorf("message: got %s %q, want %s hset", m.Channel, m.Payload, want)
	}
	cfg := respdoor.Config{Addr: "127.0.0.1:0", Jobs: []string{"add"}, NotifyKeyspaceEvents: "Kq"}
	if err := cfg.Validate(); err == nil || !strings.Contains(err.Error(), "NotifyKeyspaceEvents") {
		t.Errorf("Validate with NotifyKeyspaceEvents Kq: got %v, want an error naming it", err)
	}
}
