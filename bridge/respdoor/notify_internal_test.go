package respdoor

import (
	"net"
	"testing"
	"time"

	"github.com/cluster-serving/cluster-serving/telemetry"
)

// TestNotifyFlags reads and writes notify-keyspace-events as Redis 7
// does (keyspaceEventsStringToFlags and back).
func TestNotifyFlags(t *testing.T) {
	tests := []struct{ in, want string }{
		{"", ""}, {"Kh", "hK"}, {"KEA", "AKE"}, {"gKhxnm", "ghxnKm"}, {"An", "A"}, {"g$lshzxetd", "A"},
		{"AmKn", "AKm"}, {"EhE", "hE"}, {"x", "x"},
	}
	for _, tt := range tests {
		f, ok := parseNotify(tt.in)
		if got := formatNotify(f); !ok || got != tt.want {
			t.Errorf("%q: got %q, %v, want %q", tt.in, got, ok, tt.want)
		}
	}
	for _, bad := range []string{"Q", "Kh ", "a", "k"} {
		if _, ok := parseNotify(bad); ok {
			t.Errorf("%q: got ok, want an invalid class", bad)
		}
	}
	for flags, want := range map[string]bool{"": false, "h": false, "K": false, "KE$": false, "Kh": true, "Eg": true, "Kx": true, "KA": true} {
		if f, _ := parseNotify(flags); notifying(f) != want {
			t.Errorf("notifying(%q): got %v, want %v", flags, !want, want)
		}
	}
}

// TestSlowSubscriberDisconnected: a subscriber whose queue is full is
// disconnected, once, and counted, and the publisher does not wait.
func TestSlowSubscriberDisconnected(t *testing.T) {
	d := &Door{lim: telemetry.NewLogLimit(nil, 0)}
	conn, peer := net.Pipe()
	defer peer.Close()
	sub := &subscriber{raw: conn, wake: make(chan struct{}, 1)}
	msg := make([]byte, 1<<10)
	for range subscriberQueue/len(msg) + 10 {
		d.queue(sub, msg)
	}
	if !sub.stopped.Load() || d.ps.dropped.Load() != 1 || sub.qbytes > subscriberQueue {
		t.Errorf("past %d bytes queued: got stopped %v, dropped %d, %d bytes queued, want true, 1, at most the bound",
			subscriberQueue, sub.stopped.Load(), d.ps.dropped.Load(), sub.qbytes)
	}
	_ = peer.SetReadDeadline(time.Now().Add(10 * time.Second))
	if _, err := peer.Read(make([]byte, 1)); err == nil {
		t.Error("the slow subscriber's connection: got a read, want it closed")
	}
}
