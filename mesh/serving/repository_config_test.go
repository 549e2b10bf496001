package serving_test

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/cluster-serving/cluster-serving/mesh"
	"github.com/cluster-serving/cluster-serving/mesh/serving"
)

// putConfig writes <repo>/<name>/config.pbtxt.
func putConfig(tb testing.TB, repo, name, pbtxt string) {
	tb.Helper()
	if err := os.MkdirAll(filepath.Join(repo, name), 0o755); err != nil {
		tb.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(repo, name, "config.pbtxt"), []byte(pbtxt), 0o644); err != nil {
		tb.Fatal(err)
	}
}

// served finds model name at version among ms.
func served(ms []serving.Model, name, version string) (serving.Model, bool) {
	for _, m := range ms {
		if m.Name == name && m.Version == version {
			return m, true
		}
	}
	return serving.Model{}, false
}

// workerOf is the discovered worker of job, as `cluster-serving status`
// finds it.
func workerOf(tb testing.TB, n *running, job string) mesh.WorkerInfo {
	tb.Helper()
	var found mesh.WorkerInfo
	waitFor(tb, "the worker of "+job+" in discovery", func() bool {
		ws, err := mesh.DiscoverWorkers(context.Background(), n.Conn(), 200*time.Millisecond)
		if err != nil {
			return false
		}
		i := slices.IndexFunc(ws, func(w mesh.WorkerInfo) bool { return w.Job == job })
		if i >= 0 {
			found = ws[i]
		}
		return i >= 0
	})
	return found
}

// TestRepositoryModelConfig serves a repository of add models (2x+1,
// x: FP32 [-1,4]) each with its own config.pbtxt, and checks that each
// setting took effect where a user sees it: the worker's batching in
// discovery (status), the engine's sessions, the versions served and
// their jobs, the completed config the doors answer, and the reasons of
// the models that cannot serve.
func TestRepositoryModelConfig(t *testing.T) {
	repo := t.TempDir()
	// As in Triton, a max_batch_size of 0 (or one without
	// dynamic_batching) holds only where the config lists the inputs and
	// outputs: else auto-complete reads 0 as unset and fills it in.
	io := func(dims string) string {
		return `input [{name: "x", data_type: TYPE_FP32, dims: ` + dims + `}] output [{name: "y", data_type: TYPE_FP32, dims: ` + dims + `}]`
	}
	configs := map[string]string{
		"unbatched": `max_batch_size: 0 ` + io("[-1, 4]"),
		"alone":     `max_batch_size: 4 ` + io("[4]"),
		"dynamic":   `max_batch_size: 8 dynamic_batching { preferred_batch_size: [4] max_queue_delay_microseconds: 2000 }`,
		"instances": `name: "instances" instance_group [{count: 2, kind: KIND_CPU}]`,
		"versions":  `version_policy: { all: {} } max_batch_size: 8`,
		"tf":        `platform: "tensorflow_savedmodel"`,
		"baddims":   `max_batch_size: 8 input [{name: "x", data_type: TYPE_FP32, dims: [5]}]`,
		"broken":    `max_batch_size: eight`,
		"noconfig":  "",
	}
	for name, pbtxt := range configs {
		putModel(t, repo, name, "1", "model.onnx", addModel)
		if pbtxt != "" {
			putConfig(t, repo, name, pbtxt)
		}
	}
	putModel(t, repo, "versions", "2", "model.onnx", addModel)
	// Version 2 does not load: version 1 takes the model's job.
	putModel(t, repo, "halfbroken", "1", "model.onnx", addModel)
	putBytes(t, repo, "halfbroken", "2", "model.onnx", []byte("not onnx"))
	putConfig(t, repo, "halfbroken", `version_policy: { all: {} }`)
	// x: FP32 [1,4], a fixed dim 0: no batch dimension to stack along.
	putModel(t, repo, "fixed", "1", "model.onnx", "../../infer/testdata/fixed_f32.onnx")
	putConfig(t, repo, "fixed", `max_batch_size: 4 dynamic_batching {}`)
	n := runReady(t, repoConfig(t, repo, "mc", 0))
	ms := n.Models()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()

	t.Run("batching", func(t *testing.T) {
		for _, tc := range []struct {
			name, batching, reason string
			maxBatch               int32
		}{
			{"unbatched", "false", "config.pbtxt: max_batch_size 0 (no batch dimension): each request runs alone", 0},
			{"alone", "false", "config.pbtxt: max_batch_size 4 without dynamic_batching: each request runs alone, as its own batch", 4},
			{"dynamic", "true", "config.pbtxt: dynamic_batching, max_batch_size 8, max_queue_delay 2ms, preferred_batch_size [4]", 8},
			{"noconfig", "true", "dim 0 of every input and output is dynamic", 16}, // the engine's batch size
		} {
			m, ok := served(ms, tc.name, "1")
			if !ok {
				t.Errorf("%s: not served: %+v", tc.name, n.Repository().Index(false))
				continue
			}
			w := workerOf(t, n, m.Job)
			if w.Batching != tc.batching || w.BatchReason != tc.reason {
				t.Errorf("%s: worker batching: got %s (%s), want %s (%s)", tc.name, w.Batching, w.BatchReason, tc.batching, tc.reason)
			}
			if m.Config == nil || m.Config.MaxBatchSize != tc.maxBatch || m.Config.Platform != "onnxruntime_onnx" {
				t.Errorf("%s: completed config: got %v, want max_batch_size %d, platform onnxruntime_onnx", tc.name, m.Config, tc.maxBatch)
			}
			if v, err := oipAdd(ctx, n.Client(), m.Job); err != nil || v != "1" {
				t.Errorf("%s: infer: got version %q, %v; want 2x+1 from version 1", tc.name, v, err)
			}
		}
		// cluster-serving status prints it in its batching table.
		js, err := jetstream.New(n.Conn())
		if err != nil {
			t.Fatal(err)
		}
		st, err := mesh.TakeStatus(ctx, n.Conn(), js)
		if err != nil {
			t.Fatal(err)
		}
		var out strings.Builder
		st.Print(&out, "")
		row := "mc-dynamic dynamic yes config.pbtxt: dynamic_batching, max_batch_size 8, max_queue_delay 2ms, preferred_batch_size [4]"
		if !slices.ContainsFunc(strings.Split(out.String(), "\n"), func(l string) bool { return strings.Join(strings.Fields(l), " ") == row }) {
			t.Errorf("status: no batching row %q in\n%s", row, out.String())
		}
		m, _ := served(ms, "dynamic", "1")
		if db := m.Config.GetDynamicBatching(); db.GetMaxQueueDelayMicroseconds() != 2000 || len(m.Config.Input) != 1 || !slices.Equal(m.Config.Input[0].Dims, []int64{4}) {
			t.Errorf("dynamic: completed config: got %v, want the queue delay 2000 µs and input x dims [4]", m.Config)
		}
	})

	t.Run("instances", func(t *testing.T) {
		for _, u := range n.Units() {
			want := 1
			if u.Model().Name == "instances" {
				want = 2
			}
			if got := u.Sessions(); got != want {
				t.Errorf("%s: sessions: got %d, want %d", u.Model().Name, got, want)
			}
		}
	})

	t.Run("versions", func(t *testing.T) {
		for _, tc := range []struct{ version, job string }{{"1", "mc-versions-v1"}, {"2", "mc-versions"}} {
			m, ok := served(ms, "versions", tc.version)
			if !ok || m.Job != tc.job {
				t.Errorf("version %s: got %+v (served %v), want it on job %s", tc.version, m, ok, tc.job)
				continue
			}
			if v, err := oipAdd(ctx, n.Client(), tc.job); err != nil || v != tc.version {
				t.Errorf("version %s: infer on %s: got version %q, %v", tc.version, tc.job, v, err)
			}
		}
		states := func(name string) []string {
			var out []string
			for _, e := range n.Repository().Index(false) {
				if e.Name == name {
					out = append(out, e.Version+":"+e.State)
				}
			}
			return out
		}
		if got, want := states("versions"), []string{"1:READY", "2:READY"}; !slices.Equal(got, want) {
			t.Errorf("index of versions: got %v, want %v", got, want)
		}
		if got, want := states("halfbroken"), []string{"1:READY", "2:UNAVAILABLE"}; !slices.Equal(got, want) {
			t.Errorf("index of halfbroken: got %v, want %v", got, want)
		}
		if m, ok := served(ms, "halfbroken", "1"); !ok || m.Job != "mc-halfbroken" {
			t.Errorf("halfbroken version 1: got %+v (served %v), want it on job mc-halfbroken", m, ok)
		}
		if e := index(n, "halfbroken"); !strings.Contains(e.Reason, "version 2 failed to load, version 1 serves") {
			t.Errorf("halfbroken: got reason %q, want version 2's failure", e.Reason)
		}
		// A request without a version reaches the last listed: the latest.
		last := slices.IndexFunc(ms, func(m serving.Model) bool { return m.Name == "versions" && m.Version == "2" })
		if last < 0 || (last+1 < len(ms) && ms[last+1].Name == "versions") {
			t.Errorf("models: got %v, want version 2 listed last of versions", ms)
		}
	})

	t.Run("unavailable", func(t *testing.T) {
		for _, tc := range []struct{ name, reason string }{
			{"tf", "ONNX"},
			{"baddims", `input[0].dims: model 'baddims', tensor 'x'`},
			{"broken", "config.pbtxt"},
			{"fixed", `max_batch_size 4`},
			{"fixed", `input "x" has fixed dim 0 = 1`},
		} {
			e := index(n, tc.name)
			if e.State != serving.StateUnavailable || !strings.Contains(e.Reason, tc.reason) {
				t.Errorf("%s: got %+v, want UNAVAILABLE with a reason holding %q", tc.name, e, tc.reason)
			}
			if _, ok := served(ms, tc.name, "1"); ok {
				t.Errorf("%s: served, want not", tc.name)
			}
		}
	})

	// A load re-reads config.pbtxt.
	putConfig(t, repo, "dynamic", `max_batch_size: 2 dynamic_batching { max_queue_delay_microseconds: 5000 }`)
	if err := n.Repository().Load(ctx, "dynamic"); err != nil {
		t.Fatal(err)
	}
	m, _ := served(n.Models(), "dynamic", "1")
	waitFor(t, "the reloaded worker's batching", func() bool {
		return workerOf(t, n, m.Job).BatchReason == "config.pbtxt: dynamic_batching, max_batch_size 2, max_queue_delay 5ms"
	})
}

// logLines is a log's lines, safe for concurrent use.
type logLines struct {
	mu    sync.Mutex
	lines []string
}

func (l *logLines) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.lines = append(l.lines, string(p))
	return len(p), nil
}

// count is the number of lines holding s.
func (l *logLines) count(s string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, line := range l.lines {
		if strings.Contains(line, s) {
			n++
		}
	}
	return n
}

// TestRepositoryVersionPolicyPoll follows a model whose config.pbtxt
// serves its latest 2 versions as versions appear: the latest always on
// the model's job, the older one on its own, the oldest retired; a
// changed config.pbtxt reloads it. The field config.pbtxt holds that
// this server does not know is a warning once per load, not per poll.
func TestRepositoryVersionPolicyPoll(t *testing.T) {
	repo := t.TempDir()
	putModel(t, repo, "add", "1", "model.onnx", addModel)
	putConfig(t, repo, "add", `version_policy: { latest: { num_versions: 2 } } not_triton_field: 1`)
	cfg := repoConfig(t, repo, "vp", 50*time.Millisecond)
	var log logLines
	cfg.Logger = slog.New(slog.NewTextHandler(&log, nil))
	n := runReady(t, cfg)
	jobs := func() string {
		var out []string
		for _, m := range n.Models() {
			out = append(out, m.Version+"@"+m.Job)
		}
		return strings.Join(out, ",")
	}
	if got := jobs(); got != "1@vp-add" {
		t.Fatalf("models: got %s, want 1@vp-add", got)
	}
	putModel(t, repo, "add", "2", "model.onnx", addModel)
	waitFor(t, "versions 1 and 2", func() bool { return jobs() == "1@vp-add-v1,2@vp-add" })
	putModel(t, repo, "add", "3", "model.onnx", addModel)
	waitFor(t, "versions 2 and 3", func() bool { return jobs() == "2@vp-add-v2,3@vp-add" })
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	for job, want := range map[string]string{"vp-add": "3", "vp-add-v2": "2"} {
		if v, err := oipAdd(ctx, n.Client(), job); err != nil || v != want {
			t.Errorf("infer on %s: got version %q, %v; want %s", job, v, err, want)
		}
	}
	if u := n.Units(); len(u) != 2 {
		t.Errorf("units: got %d, want 2 (version 1 retired)", len(u))
	}
	putConfig(t, repo, "add", `version_policy: { latest: { num_versions: 1 } } not_triton_field: 1`)
	waitFor(t, "version 3 alone", func() bool { return jobs() == "3@vp-add" })
	// Four loads (start, versions 2 and 3, the new config), a warning each,
	// however many polls ran between them.
	if got := log.count("not_triton_field"); got != 4 {
		t.Errorf("warnings naming not_triton_field: got %d, want 4", got)
	}
}

// TestScanRepositoryConfig: the scan reads each model's config.pbtxt and
// lists the versions its version_policy picks, each with its file or the
// reason it has none; a config that keeps the model from serving at all
// is the entry's error, wrapping ErrModelConfig.
func TestScanRepositoryConfig(t *testing.T) {
	repo := t.TempDir()
	for _, v := range []string{"1", "2", "3"} {
		for _, name := range []string{"latest2", "all", "specific", "missing", "renamed", "unknown"} {
			putModel(t, repo, name, v, "model.onnx", addModel)
		}
	}
	if err := os.Remove(filepath.Join(repo, "all", "2", "model.onnx")); err != nil {
		t.Fatal(err)
	}
	putConfig(t, repo, "latest2", `version_policy: { latest: { num_versions: 2 } }`)
	putConfig(t, repo, "all", `version_policy: { all: {} }`)
	putConfig(t, repo, "specific", `version_policy: { specific: { versions: [1, 3] } }`)
	putConfig(t, repo, "missing", `version_policy: { specific: { versions: [4] } }`)
	putConfig(t, repo, "renamed", `name: "other"`)
	putConfig(t, repo, "unknown", "max_batch_size: 4\nnot_triton: 1\n")
	entries, err := serving.ScanRepository(repo)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, versions, err string
		version             int64
		warned              bool
	}{
		{name: "latest2", versions: "2 3", version: 3},
		{name: "all", versions: "1 2! 3", version: 3}, // ! a version without its file
		{name: "specific", versions: "1 3", version: 3},
		{name: "missing", err: "version 4"},
		{name: "renamed", err: `name "other" differs from the model directory's name`},
		{name: "unknown", versions: "3", version: 3, warned: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			i := slices.IndexFunc(entries, func(e serving.RepoEntry) bool { return e.Name == tc.name })
			if i < 0 {
				t.Fatalf("not listed: %+v", entries)
			}
			e := entries[i]
			var vs []string
			for _, v := range e.Versions {
				s := strconv.FormatInt(v.Version, 10)
				if v.Err != nil {
					s += "!"
				}
				vs = append(vs, s)
			}
			if got := strings.Join(vs, " "); got != tc.versions || (tc.err == "" && e.Version != tc.version) {
				t.Errorf("versions: got %q (serving %d), want %q (%d)", got, e.Version, tc.versions, tc.version)
			}
			switch {
			case tc.err == "" && e.Err != nil:
				t.Errorf("got error %v, want none", e.Err)
			case tc.err != "" && (e.Err == nil || !strings.Contains(e.Err.Error(), tc.err) || !errors.Is(e.Err, serving.ErrModelConfig)):
				t.Errorf("got error %v, want one holding %q wrapping ErrModelConfig", e.Err, tc.err)
			}
			if warned := slices.ContainsFunc(e.Warnings, func(w string) bool { return strings.Contains(w, "not_triton") }); warned != tc.warned {
				t.Errorf("warnings: got %q, want one naming not_triton: %v", e.Warnings, tc.warned)
			}
		})
	}
}
