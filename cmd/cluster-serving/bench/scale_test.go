package bench

import (
	"errors"
	"io"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/cluster-serving/cluster-serving/infer/infertest"
	"github.com/cluster-serving/cluster-serving/mesh/meshtest"
)

// TestCheckKeys: the binary's own config parser decides whether a
// layout's keys are known.
func TestCheckKeys(t *testing.T) {
	if err := checkKeys(map[string]string{"jetstreamPartitions": "2", "threadPerModel": "1"}); err != nil {
		t.Errorf("known keys: got %v, want nil", err)
	}
	err := checkKeys(map[string]string{"noSuchKey": "1"})
	if !errors.Is(err, errUnknownKey) {
		t.Fatalf("unknown key: got %v, want errUnknownKey", err)
	}
	if got := notMeasured(err); got != "n/a: key not known to this binary" {
		t.Errorf("note: got %q", got)
	}
}

// TestScalePlan: flags and quick mode size the plan; worker counts are
// capped at the cores.
func TestScalePlan(t *testing.T) {
	for _, tt := range []struct {
		name    string
		args    []string
		cores   int
		env     string
		conc    []int
		workers []int
		d       time.Duration
		extra   int
	}{
		{"full, 16 cores", nil, 16, "", []int{32, 128, 512}, []int{1, 2, 4, 8, 14}, 5 * time.Second, 3},
		{"full, 8 cores", nil, 8, "", []int{32, 128, 512}, []int{1, 2, 4, 6}, 5 * time.Second, 3},
		{"full, 2 cores", nil, 2, "", []int{32, 128, 512}, []int{1}, 5 * time.Second, 3},
		{"SCALE_QUICK=1", nil, 2, "1", []int{32, 128}, []int{1, 2}, 2 * time.Second, 1},
		{"-quick, 1 core", []string{"-quick"}, 1, "", []int{32, 128}, []int{1}, 2 * time.Second, 1},
		{"flags win", []string{"-quick", "-scale-conc", "8, 16", "-scale-workers", "3", "-scale-d", "1s", "-scale-extra", "2"}, 2, "",
			[]int{8, 16}, []int{3}, time.Second, 2},
	} {
		t.Run(tt.name, func(t *testing.T) {
			o, err := parseOptions(append([]string{"-only", "scale"}, tt.args...), io.Discard)
			if err != nil {
				t.Fatal(err)
			}
			p, err := newScalePlan(o, tt.cores, tt.env)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(p.conc, tt.conc) || !slices.Equal(p.workers, tt.workers) || p.d != tt.d || p.extra != tt.extra {
				t.Errorf("got conc %v workers %v d %s extra %d, want %v %v %s %d", p.conc, p.workers, p.d, p.extra, tt.conc, tt.workers, tt.d, tt.extra)
			}
		})
	}
	o, _ := parseOptions([]string{"-scale-workers", "1,0"}, io.Discard)
	if _, err := newScalePlan(o, 4, ""); err == nil || !strings.Contains(err.Error(), "-scale-workers") {
		t.Errorf("-scale-workers 1,0: got %v, want an error naming the flag", err)
	}
}

// TestScaleSample is make scale's short sample: real requests over
// spreadNATSOp to a real NATS server, a responder that refuses one
// request in four with a 503 and fails one in four with a 500, then the
// table of the measured rows beside a trivial responder's.
func TestScaleSample(t *testing.T) {
	s := meshtest.StartServer(t)
	nc := meshtest.Connect(t, s)
	var seen atomic.Int64
	if _, err := nc.Subscribe("scale.door", func(m *nats.Msg) {
		reply := nats.NewMsg(m.Reply)
		switch seen.Add(1) % 4 {
		case 0:
			reply.Header.Set("Nats-Service-Error-Code", "503")
			reply.Header.Set("Nats-Service-Error", "busy: too many requests in flight")
		case 1:
			reply.Header.Set("Nats-Service-Error-Code", "500")
			reply.Header.Set("Nats-Service-Error", "model failed")
		}
		reply.Data = m.Data
		_ = m.RespondMsg(reply)
	}); err != nil {
		t.Fatal(err)
	}
	closeTrivial, err := trivialResponder(s.ClientURL(), "scale.trivial")
	if err != nil {
		t.Fatal(err)
	}
	defer closeTrivial()
	run := func(way, subject string) scaleRow {
		do, closeDo, err := spreadNATSOp(s.ClientURL(), subject, tinyBody, 200) // 2 natsOps of 4 connections
		if err != nil {
			t.Fatal(err)
		}
		defer closeDo()
		var refused atomic.Int64
		cpu0 := selfCPU()
		res := runLoad(8, time.Minute, 400, countRefusals(do, &refused))
		return scaleRow{layout: "sample", way: way, conc: 8, res: res, refused: int(refused.Load()), cpu: scaleCPU{bench: selfCPU() - cpu0}}
	}
	rows := []scaleRow{run(wayStored, "scale.trivial"), run(wayNATS, "scale.door"),
		{layout: "sample, newKey=1", way: wayNATS, note: notMeasured(errUnknownKey)}}
	if got := rows[0]; got.res.n != 400 || got.res.errs != 0 {
		t.Errorf("trivial: got %d answered, %d errors, want 400, 0 (last error %v)", got.res.n, got.res.errs, got.res.lastErr)
	}
	if got := rows[1]; got.res.n != 200 || got.refused != 100 || got.otherErrors() != 100 {
		t.Errorf("door: got %d answered, %d refused, %d other errors, want 200, 100, 100", got.res.n, got.refused, got.otherErrors())
	}
	var b strings.Builder
	scaleTable(&b, rows)
	want := ratio(rows[1].res.rate(), rows[0].res.rate()) + " ÷ stored"
	for _, line := range []string{"sample                 NATS door", want, "sample, newKey=1       NATS door                 n/a: key not known"} {
		if !strings.Contains(b.String(), line) {
			t.Errorf("table lacks %q:\n%s", line, b.String())
		}
	}
}

// TestResNetScaleTable: speed-up over N × the one-worker row, serving
// over raw with N processes, and a row that was not measured.
func TestResNetScaleTable(t *testing.T) {
	var b strings.Builder
	resNetScaleTable(&b, []resNetScaleRow{
		{workers: 1, serving: 10, raw: 11, p50: 100 * time.Millisecond},
		{workers: 2, serving: 19, raw: 20, p50: 105 * time.Millisecond},
		{workers: 4, note: "n/a: child did not become ready"},
	})
	for _, line := range []string{
		"      1      10.00    100ms      0           1.00         11.00           0.91",
		"      2      19.00    105ms      0           0.95         20.00           0.95",
		"      4 n/a: child did not become ready",
	} {
		if !strings.Contains(b.String(), line) {
			t.Errorf("table lacks %q:\n%s", line, b.String())
		}
	}
}

// TestPipelineSample runs `bench -only pipeline` for a second per run
// against the real binary (built here), the real ONNX Runtime and a
// generated repository: every row answers, with no errors, and each
// figure prints. It checks no timing.
func TestPipelineSample(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary and runs serving processes for about a minute")
	}
	infertest.RequireLibrary(t)
	bin := filepath.Join(t.TempDir(), "cluster-serving")
	if out, err := exec.Command("go", "build", "-o", bin, "..").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	var b strings.Builder
	r := &runner{w: &b, bin: bin, storage: "memory"}
	o := &options{tiny: infertest.Model("add_f32"), d: time.Second, batch: 8, threads: 1}
	if err := r.pipeline(o); err != nil {
		t.Fatalf("%v\n%s", err, b.String())
	}
	out := b.String()
	t.Log(out)
	for _, want := range []string{
		"tiny: one-step ensemble / direct, req/s at 32 callers:",
		"3-step pipeline p50",
		"slow step on 3 worker processes / on 1, pipeline req/s at 32 callers:",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q", want)
		}
	}
	if strings.Contains(out, "last error") {
		t.Errorf("a row had errors")
	}
}
