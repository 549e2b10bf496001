package mesh

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/cluster-serving/cluster-serving/telemetry"
)

// TestStatusStripsUserinfo: a process that publishes a door URL with its
// password (one of an older release, whose Tally kept it) and a NATS URL
// with credentials show neither in the document nor in Print.
func TestStatusStripsUserinfo(t *testing.T) {
	s := &Status{At: time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC)}
	s.addProcesses([]ProcessInfo{{Name: "bridge", Host: "h", PID: "1", Stats: ProcessStats{
		Doors: []telemetry.DoorTally{{Door: telemetry.DoorRedis, Listen: "rediss://csuser:s3cret@h:6379"}}}}})
	if got, want := s.Doors[0].Listen, "rediss://h:6379"; got != want {
		t.Errorf("got listen %q, want %q", got, want)
	}
	doc, err := json.Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	s.Print(&out, "nats://a:xxxxx@h:4222")
	for name, text := range map[string]string{"document": string(doc), "Print": out.String()} {
		if strings.Contains(text, "s3cret") || strings.Contains(text, "@h") {
			t.Errorf("%s: got\n%s\nwant no user info", name, text)
		}
	}
	if !strings.Contains(out.String(), "nats://h:4222") {
		t.Errorf("Print: got\n%s\nwant the title to name nats://h:4222", out.String())
	}
}
