package main

import (
	"bytes"
	"strings"
	"testing"
)

func TestSemver(t *testing.T) {
	for in, want := range map[string]string{"v1.2.3": "1.2.3", "1.2.3-rc.1": "1.2.3-rc.1", "dev": "0.0.0-dev", "a7652f6-dirty": "0.0.0-a7652f6-dirty", "v0.1.0-3-gabc": "0.1.0-3-gabc"} {
		if got := semver(in); got != want {
			t.Errorf("semver(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestUsage checks the usage text the command table renders, line by line.
func TestUsage(t *testing.T) {
	var out bytes.Buffer
	if err := run([]string{"help"}, &out, &out); err != nil {
		t.Fatal(err)
	}
	want := `cluster-serving serves ONNX models behind NATS JetStream work queues.

Usage: cluster-serving <command> [flags]

Commands:
  init      write a commented config.yaml with every key
  start     serve: embedded NATS (unless natsUrl is set), workers and the NATS door
  worker    join an external NATS as one more inference worker
  bridge    run the Redis door alone against an external NATS
  http      run the HTTP door alone against an external NATS
  predict   send one request to a running job and print the answer
  status    live throughput, latency, queue depth and workers of the mesh
  stop      stop the running job now; in-flight work goes back to the queue
  shutdown  stop taking work, finish what is in flight, then exit
  restart   stop the running job and start it again
  bench     measure throughput and latency (what make bench prints)
  version   print the version

Run "cluster-serving <command> -h" for a command's flags.
`
	if got := out.String(); got != want {
		t.Errorf("got\n%s\nwant\n%s", got, want)
	}
	out.Reset()
	if err := run([]string{"nope"}, &out, &out); err == nil || !strings.Contains(out.String(), "Commands:") {
		t.Errorf("unknown command: got %v and %q, want an error after the usage", err, out.String())
	}
}
