package telemetry_test

import (
	"strings"
	"testing"

	"github.com/cluster-serving/cluster-serving/telemetry"
)

func TestStripUserinfo(t *testing.T) {
	for _, tc := range []struct{ name, in, want string }{
		{"user and password", "rediss://csuser:s3cret@127.0.0.1:6379/0", "rediss://127.0.0.1:6379/0"},
		{"password alone", "redis://:s3cret@h:6379", "redis://h:6379"},
		{"user alone", "nats://csuser@h:4222", "nats://h:4222"},
		{"token", "nats://s3cret@h:4222", "nats://h:4222"},
		{"escaped password", "nats://a:s3cret%40x@h:4222", "nats://h:4222"},
		{"no user info", "https://127.0.0.1:8080", "https://127.0.0.1:8080"},
		{"an '@' in the path", "http://h/a@b", "http://h/a@b"},
		{"host:port", "localhost:6379", "localhost:6379"},
		{"subjects", "serving.a.predict serving.b.predict", "serving.a.predict serving.b.predict"},
		{"empty", "", ""},
		{"list", "nats://a:s3cret@h1:4222,nats://h2:4222,nats://s3cret@h3", "nats://h1:4222,nats://h2:4222,nats://h3"},
		{"unparsable", "nats://u:s3 cret@h%zz:4222", "nats://h%zz:4222"},
		{"unparsable, '#' in the password", "redis://u:s3#cret@h:6379", "redis://h:6379"},
		{"no scheme", "u:s3cret@h:6379", "h:6379"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := telemetry.StripUserinfo(tc.in)
			if got != tc.want {
				t.Errorf("StripUserinfo(%q): got %q, want %q", tc.in, got, tc.want)
			}
			if strings.Contains(got, "s3") {
				t.Errorf("StripUserinfo(%q): got %q, want no secret", tc.in, got)
			}
		})
	}
}

// TestTallyOpenStripsUserinfo: a door opened on a URL with a password is
// published without its user info.
func TestTallyOpenStripsUserinfo(t *testing.T) {
	tally := telemetry.NewTally()
	defer tally.Open(telemetry.DoorRedis, "rediss://:s3cret@h:6379")()
	doors, _ := tally.Snapshot()
	if len(doors) != 1 || doors[0].Listen != "rediss://h:6379" {
		t.Errorf("got %+v, want the redis door listening on rediss://h:6379", doors)
	}
}
