package serving

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cluster-serving/cluster-serving/infer/infertest"
)

func TestPIDFileRole(t *testing.T) {
	for _, tc := range []struct {
		job, name, role string
		ok              bool
	}{
		{"j", "j.start.pid", "start", true},
		{"j", "j.worker.123.pid", "worker", true},
		{"j", "j.bridge.7.pid", "bridge", true},
		{"j", "j.worker.pid", "worker", true}, // written by older versions
		{"j", "j.worker.x.pid", "", false},
		{"j", "j.b.start.pid", "", false}, // job "j.b"
		{"j.b", "j.b.start.pid", "start", true},
		{"j", "k.start.pid", "", false},
		{"j", ".tmp-5.pid", "", false},
		{"j", "j.start.pid.bak", "", false},
	} {
		role, ok := pidFileRole(tc.job, tc.name)
		if role != tc.role || ok != tc.ok {
			t.Errorf("pidFileRole(%q, %q) = %q, %v; want %q, %v", tc.job, tc.name, role, ok, tc.role, tc.ok)
		}
	}
}

// TestPIDDirClaim: a claimed pid file is found live and removed again; a
// stale one (its process gone) is removed by the next look; a `start` is
// refused while another live `start` of the job holds the folder, and the
// refusal redacts the other's -nats password.
func TestPIDDirClaim(t *testing.T) {
	d := PIDDir(t.TempDir())
	write := func(name string, p PIDFile) {
		t.Helper()
		b, err := json.Marshal(p)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(string(d), name), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	dead := exec.Command("true")
	if err := dead.Run(); err != nil {
		t.Fatal(err)
	}
	stale := fmt.Sprintf("j.worker.%d.pid", dead.Process.Pid)
	write(stale, PIDFile{PID: dead.Process.Pid, Cmd: "worker", Job: "j"})
	remove, err := d.Claim("j", "worker", []string{"-c", "x.yaml"})
	if err != nil {
		t.Fatal(err)
	}
	live, err := d.Live("j")
	if err != nil {
		t.Fatal(err)
	}
	if len(live) != 1 || live[0].PID != os.Getpid() || live[0].Cmd != "worker" {
		t.Errorf("Live = %+v, want this process's worker alone", live)
	}
	if _, err := os.Stat(filepath.Join(string(d), stale)); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("stale pid file: stat err %v, want it removed", err)
	}
	remove()
	if live, _ := d.Live("j"); len(live) != 0 {
		t.Errorf("after remove, Live = %+v, want none", live)
	}

	write("j.start.pid", PIDFile{PID: os.Getppid(), Args: []string{"-nats", "nats://u:s3cret@h:4222"}, Cmd: "start", Job: "j"})
	_, err = d.Claim("j", "start", nil)
	if err == nil || !strings.Contains(err.Error(), fmt.Sprint(os.Getppid())) {
		t.Fatalf("Claim start beside a live start: err %v, want a refusal naming pid %d", err, os.Getppid())
	}
	if strings.Contains(err.Error(), "s3cret") {
		t.Errorf("refusal shows the password: %v", err)
	}
}

// TestAliveSkipsZombies kills a child this test does not reap yet: it
// still takes signals, and alive must say it no longer runs (a
// `shutdown` waiting on such a process waited its whole timeout).
func TestAliveSkipsZombies(t *testing.T) {
	cmd := exec.Command("sleep", "60")
	if err := cmd.Start(); err != nil {
		t.Skipf("no sleep command: %v", err)
	}
	pid := cmd.Process.Pid
	if !alive(pid) {
		t.Fatalf("alive(%d) of a running child: false", pid)
	}
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	infertest.WaitFor(t, fmt.Sprintf("alive(%d) of a killed, unreaped child to say false", pid),
		func() bool { return !alive(pid) })
	_ = cmd.Wait()
}
