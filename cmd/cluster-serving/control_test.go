package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestWorkersShareAMachine runs `start` and two `worker` processes of one
// job with one pid file directory, as on one machine, beside the stale
// pid file of a worker that died: all three run, and one `stop` signals
// all three, waits for them, and leaves no pid file behind.
func TestWorkersShareAMachine(t *testing.T) {
	skipIfShort(t)
	cfg, url, job, env := testJob(t, "")
	dir := filepath.Join(strings.TrimPrefix(env[0], "XDG_RUNTIME_DIR="), "cluster-serving")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	dead := exec.Command("true")
	if err := dead.Run(); err != nil {
		t.Fatal(err)
	}
	stale := filepath.Join(dir, fmt.Sprintf("%s.worker.%d.pid", job, dead.Process.Pid))
	writeFile(t, stale, fmt.Sprintf(`{"pid":%d,"cmd":"worker"}`, dead.Process.Pid), 0o644)

	start := spawn(t, env, "start", "-c", cfg)
	waitReady(t, url, start)
	w1 := spawn(t, env, "worker", "-c", cfg, "-nats", url)
	w2 := spawn(t, env, "worker", "-c", cfg, "-nats", url)
	waitLog(t, w1, "joined")
	waitLog(t, w2, "joined")
	want := []string{
		job + ".start.pid",
		fmt.Sprintf("%s.worker.%d.pid", job, w1.cmd.Process.Pid),
		fmt.Sprintf("%s.worker.%d.pid", job, w2.cmd.Process.Pid),
	}
	if got := pidFiles(t, dir); !slices.Equal(got, sorted(want)) {
		t.Errorf("pid files: got %v, want %v (the stale one removed)", got, sorted(want))
	}

	stop := spawn(t, env, "stop", "-c", cfg)
	<-stop.done
	if stop.cmd.ProcessState.ExitCode() != 0 {
		t.Fatalf("stop failed:\n%s", stop.logs())
	}
	for _, p := range []*proc{start, w1, w2} {
		select {
		case <-p.done:
		case <-time.After(30 * time.Second):
			t.Fatalf("pid %d still runs after stop:\n%s", p.cmd.Process.Pid, stop.logs())
		}
		if !strings.Contains(stop.logs(), fmt.Sprintf("(pid %d)", p.cmd.Process.Pid)) {
			t.Errorf("stop did not say it signalled pid %d:\n%s", p.cmd.Process.Pid, stop.logs())
		}
	}
	if got := pidFiles(t, dir); len(got) != 0 {
		t.Errorf("pid files left after stop: %v", got)
	}
}

func pidFiles(t *testing.T, dir string) []string {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range ents {
		names = append(names, e.Name())
	}
	return sorted(names)
}

func sorted(s []string) []string {
	s = slices.Clone(s)
	slices.Sort(s)
	return s
}
