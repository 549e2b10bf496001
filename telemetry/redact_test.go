package telemetry_test

import (
	"strings"
	"testing"

	"github.com/cluster-serving/cluster-serving/telemetry"
)

func TestRedactURL(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"", ""},
		{"nats://h:4222", "nats://h:4222"},
		{"nats://u:s3cret@h:4222", "nats://u:xxxxx@h:4222"},
		{"nats://t0ken@h:4222", "nats://xxxxx@h:4222"},
		{"nats://a:s3cret@h1:4222,nats://b:s3cret@h2:4222", "nats://a:xxxxx@h1:4222,nats://b:xxxxx@h2:4222"},
		{"redis://:s3cret@h:6379/0", "redis://:xxxxx@h:6379/0"},
		{"rediss://u:s3cret@h:6379", "rediss://u:xxxxx@h:6379"},
		{"nats://u:s3 cret@h%zz:4222", "nats://xxxxx@h%zz:4222"},
		{"localhost:6379", "localhost:6379"},
	} {
		if got := telemetry.RedactURL(tc.in); got != tc.want {
			t.Errorf("RedactURL(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

func TestRedactURLWithoutScheme(t *testing.T) {
	if got := telemetry.RedactURL("u:s3cret@h:6379"); got != "xxxxx@h:6379" {
		t.Errorf("got %q, want xxxxx@h:6379", got)
	}
}

func TestURLSecrets(t *testing.T) {
	got := telemetry.URLSecrets("nats://a:pw%40x@h:4222,nats://tok@h2,nats://h3,:bad@h4")
	want := []string{"pw%40x", "pw@x", "tok", "bad"}
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Errorf("got %q, want %q", got, want)
	}
}
