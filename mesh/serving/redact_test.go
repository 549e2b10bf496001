package serving_test

import (
	"testing"

	"github.com/cluster-serving/cluster-serving/mesh/serving"
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
		if got := serving.RedactURL(tc.in); got != tc.want {
			t.Errorf("RedactURL(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}
