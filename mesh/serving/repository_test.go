package serving_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cluster-serving/cluster-serving/infer/status"

	"github.com/cluster-serving/cluster-serving/infer/wire"
	"github.com/cluster-serving/cluster-serving/mesh"
	"github.com/cluster-serving/cluster-serving/mesh/meshtest"
	"github.com/cluster-serving/cluster-serving/mesh/serving"
)

// putModel copies src to <repo>/<name>/<version>/<file>, the version
// directory appearing at once (renamed into place), as a deployer would.
func putModel(tb testing.TB, repo, name, version, file, src string) {
	tb.Helper()
	data, err := os.ReadFile(src)
	if err != nil {
		tb.Fatal(err)
	}
	putBytes(tb, repo, name, version, file, data)
}

func putBytes(tb testing.TB, repo, name, version, file string, data []byte) {
	tb.Helper()
	tmp := filepath.Join(repo, name, ".tmp-"+version)
	if err := os.MkdirAll(tmp, 0o755); err != nil {
		tb.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(tmp, file), data, 0o644); err != nil {
		tb.Fatal(err)
	}
	if err := os.Rename(tmp, filepath.Join(repo, name, version)); err != nil {
		tb.Fatal(err)
	}
}

func TestScanRepositoryLayout(t *testing.T) {
	repo := t.TempDir()
	putModel(t, repo, "add", "1", "model.onnx", addModel)
	putModel(t, repo, "add", "10", "model.onnx", addModel)
	putModel(t, repo, "add", "9", "model.onnx", addModel)
	putModel(t, repo, "named", "1", "whatever.onnx", addModel) // any single .onnx
	putModel(t, repo, "pick", "1", "other.onnx", addModel)     // model.onnx wins over others
	putModel(t, repo, "pick", "2", "other.onnx", addModel)
	if err := os.WriteFile(filepath.Join(repo, "pick", "2", "model.onnx"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	putModel(t, repo, "two", "1", "a.onnx", addModel)
	putModel(t, repo, "two", "1b", "b.onnx", addModel) // not a version
	if err := os.WriteFile(filepath.Join(repo, "two", "1", "b.onnx"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	putModel(t, repo, "noversion", "latest", "model.onnx", addModel)
	putModel(t, repo, "zero", "0", "model.onnx", addModel)
	putModel(t, repo, "lead", "01", "model.onnx", addModel)
	putModel(t, repo, "bad.name", "1", "model.onnx", addModel)
	putModel(t, repo, ".hidden", "1", "model.onnx", addModel)
	if err := os.MkdirAll(filepath.Join(repo, "empty", "1"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(repo, "README"), []byte("a file at the top is not a model"), 0o644); err != nil {
		t.Fatal(err)
	}

	entries, err := serving.ScanRepository(repo)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]serving.RepoEntry{}
	var names []string
	for _, e := range entries {
		got[e.Name] = e
		names = append(names, e.Name)
	}
	if want := "add,bad.name,empty,lead,named,noversion,pick,two,zero"; strings.Join(names, ",") != want {
		t.Errorf("models: got %s, want %s", strings.Join(names, ","), want)
	}
	for _, tc := range []struct {
		name    string
		version int64
		file    string // base name of Path; "" with an error
		err     string
	}{
		{"add", 10, "model.onnx", ""},
		{"named", 1, "whatever.onnx", ""},
		{"pick", 2, "model.onnx", ""},
		{"two", 1, "", "keep exactly one"},
		{"noversion", 0, "", "has no version directory"},
		{"zero", 0, "", "has no version directory"},
		{"lead", 0, "", "has no version directory"},
		{"bad.name", 0, "", "may hold only letters"},
		{"empty", 1, "", "want exactly one *.onnx"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := got[tc.name]
			if e.Version != tc.version || filepath.Base(e.Path) != cmpOr(tc.file, ".") {
				t.Errorf("got version %d path %q, want %d %q", e.Version, e.Path, tc.version, tc.file)
			}
			switch {
			case tc.err == "" && e.Err != nil:
				t.Errorf("got error %v, want none", e.Err)
			case tc.err != "" && (e.Err == nil || !strings.Contains(e.Err.Error(), tc.err) || !errors.Is(e.Err, serving.ErrRepositoryLayout)):
				t.Errorf("got error %v, want one with %q wrapping ErrRepositoryLayout", e.Err, tc.err)
			}
		})
	}
	if _, err := serving.ScanRepository(filepath.Join(repo, "missing")); err == nil {
		t.Error("a missing repository: got no error")
	}
}

func cmpOr(a, b string) string {
	if a == "" {
		return b
	}
	return a
}

func TestRepositoryConfigKeys(t *testing.T) {
	for _, tc := range []struct{ yaml, err string }{
		{"modelRepository: r\nmodelPath: m\n", `"modelRepository": set one of modelPath`},
		{"modelRepository: r\nmodels: [{name: a, path: p}]\n", `"modelRepository": set one of modelPath`},
		{"modelRepository: r\nmodelRepositoryPoll: -2\n", `"modelRepositoryPoll": -2`},
		{"modelPath: m\nmodelRepositoryPoll: 5\n", `"modelRepositoryPoll": needs modelRepository`},
		{"modelRepository: r\nmodelRepositoryPoll: soon\n", `"modelRepositoryPoll" (line 2): want int`},
		{"modelRepository: r\nmodelControl: manual\n", `"modelControl": "manual": want poll (the default), explicit or none`},
		{"modelPath: m\nmodelControl: none\n", `"modelControl": needs modelRepository`},
		{"modelRepository: r\nmodelControl: explicit\nmodelRepositoryPoll: 5\n", `"modelRepositoryPoll": 5: modelControl explicit does not poll`},
		{"modelRepository: r\nmodelControl: none\nmodelRepositoryPoll: 5\n", `"modelRepositoryPoll": 5: modelControl none does not poll`},
		{"modelRepository: r\nmodelControl: poll\nmodelRepositoryPoll: -1\n", `"modelRepositoryPoll": -1 (no polling) contradicts modelControl poll`},
	} {
		_, err := serving.ParseFile([]byte(tc.yaml))
		if err == nil || !strings.Contains(err.Error(), tc.err) {
			t.Errorf("%q: got %v, want an error with %s", tc.yaml, err, tc.err)
		}
	}
	for _, tc := range []struct {
		yaml string
		want serving.RepositoryConfig
	}{
		{"modelRepository: r\n", serving.RepositoryConfig{Dir: "r", Poll: serving.DefaultRepositoryPoll, Job: mesh.DefaultJob, Control: serving.ControlPoll}},
		{"modelRepository: r\nmodelRepositoryPoll: 0\njobName: j\n", serving.RepositoryConfig{Dir: "r", Poll: serving.DefaultRepositoryPoll, Job: "j", Control: serving.ControlPoll}},
		{"modelRepository: r\nmodelRepositoryPoll: 3\n", serving.RepositoryConfig{Dir: "r", Poll: 3 * time.Second, Job: mesh.DefaultJob, Control: serving.ControlPoll}},
		{"modelRepository: r\nmodelControl: poll\nmodelRepositoryPoll: 3\n", serving.RepositoryConfig{Dir: "r", Poll: 3 * time.Second, Job: mesh.DefaultJob, Control: serving.ControlPoll}},
		// -1 meant "only the load API changes what serves": explicit.
		{"modelRepository: r\nmodelRepositoryPoll: -1\n", serving.RepositoryConfig{Dir: "r", Job: mesh.DefaultJob, Control: serving.ControlExplicit}},
		{"modelRepository: r\nmodelControl: explicit\n", serving.RepositoryConfig{Dir: "r", Job: mesh.DefaultJob, Control: serving.ControlExplicit}},
		{"modelRepository: r\nmodelControl: none\nmodelRepositoryPoll: -1\n", serving.RepositoryConfig{Dir: "r", Job: mesh.DefaultJob, Control: serving.ControlNone}},
		{"modelRepository: r\nserveModels: [slow]\n", serving.RepositoryConfig{Dir: "r", Job: mesh.DefaultJob, Control: serving.ControlPoll, Poll: serving.DefaultRepositoryPoll, Serve: []string{"slow"}}},
	} {
		f, err := serving.ParseFile([]byte(tc.yaml))
		if err != nil {
			t.Fatalf("%q: %v", tc.yaml, err)
		}
		if got := f.Node(func(string) string { return "" }); !reflect.DeepEqual(got.Repository, tc.want) || len(got.Models) != 0 {
			t.Errorf("%q: got %+v, models %v; want %+v, none", tc.yaml, got.Repository, got.Models, tc.want)
		}
	}
}

// repoConfig is a serving node's config on repository dir, polling every
// poll (0: off).
func repoConfig(tb testing.TB, dir, job string, poll time.Duration) serving.Config {
	cfg := addConfig(tb, job, "")
	cfg.Models = nil
	cfg.Serve = true
	cfg.Repository = serving.RepositoryConfig{Dir: dir, Poll: poll, Job: job}
	return cfg
}

// oipAdd asks model add (2x+1) through job and returns the model_version
// of its answer.
func oipAdd(ctx context.Context, c *mesh.Client, job string) (string, error) {
	res, err := c.Submit(ctx, job, mesh.Request{ContentType: wire.MediaTypeOIP,
		Body: []byte(`{"inputs":[{"name":"x","datatype":"FP32","shape":[1,4],"data":[1,2,3,4]}]}`)})
	if err != nil {
		return "", err
	}
	body := string(res.Body)
	if !strings.Contains(body, `"data":[3,5,7,9]`) {
		return "", errors.New("answer " + body + " lacks [3,5,7,9]")
	}
	_, v, ok := strings.Cut(body, `"model_version":"`)
	if !ok {
		return "", errors.New("answer " + body + " lacks model_version")
	}
	v, _, _ = strings.Cut(v, `"`)
	return v, nil
}

func index(n *running, name string) serving.IndexEntry {
	for _, e := range n.Repository().Index(false) {
		if e.Name == name {
			return e
		}
	}
	return serving.IndexEntry{}
}

// TestRepositoryPollSwapsVersionsUnderLoad serves version 1 of a model
// from a repository, sends a steady stream of concurrent requests, adds
// version 2 (a poll picks it up) and then a broken version 3: not one
// request fails or goes missing, version 2 ends up answering, and the
// broken version leaves version 2 serving with the reason in the index.
func TestRepositoryPollSwapsVersionsUnderLoad(t *testing.T) {
	repo := t.TempDir()
	putModel(t, repo, "add", "1", "model.onnx", addModel)
	n := runReady(t, repoConfig(t, repo, "rp", 50*time.Millisecond))
	models := n.Models()
	if len(models) != 1 || models[0].Name != "add" || models[0].Version != "1" || models[0].Job != "rp-add" {
		t.Fatalf("models: got %+v, want add version 1 on job rp-add", models)
	}

	var sent, answered, failed atomic.Int64
	var mu sync.Mutex
	versions := map[string]int{}
	var firstErr error
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				sent.Add(1)
				ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
				v, err := oipAdd(ctx, n.Client(), "rp-add")
				cancel()
				mu.Lock()
				if err != nil {
					failed.Add(1)
					if firstErr == nil {
						firstErr = err
					}
				} else {
					answered.Add(1)
					versions[v]++
				}
				mu.Unlock()
			}
		}()
	}
	seen := func(v string, atLeast int) func() bool {
		return func() bool {
			mu.Lock()
			defer mu.Unlock()
			return versions[v] >= atLeast
		}
	}
	waitFor(t, "answers of version 1", seen("1", 20))
	putModel(t, repo, "add", "2", "model.onnx", addModel)
	waitFor(t, "index: version 2 ready", func() bool { e := index(n, "add"); return e.Version == "2" && e.State == serving.StateReady })
	waitFor(t, "answers of version 2", seen("2", 20))

	data, err := os.ReadFile(addModel)
	if err != nil {
		t.Fatal(err)
	}
	putBytes(t, repo, "add", "3", "model.onnx", data[:len(data)/2]) // truncated
	waitFor(t, "index: the reason version 3 fails", func() bool { return strings.Contains(index(n, "add").Reason, "version 3 failed to load") })
	mu.Lock()
	before := versions["2"]
	mu.Unlock()
	waitFor(t, "more answers of version 2", seen("2", before+20))
	close(stop)
	wg.Wait()

	if failed.Load() != 0 || sent.Load() != answered.Load() {
		t.Errorf("sent %d, answered %d, failed %d (first: %v); want every request answered", sent.Load(), answered.Load(), failed.Load(), firstErr)
	}
	if versions["3"] != 0 {
		t.Errorf("answers of the broken version 3: got %d, want 0", versions["3"])
	}
	e := index(n, "add")
	if e.State != serving.StateReady || e.Version != "2" || !strings.Contains(e.Reason, "version 2 serves") {
		t.Errorf("index after version 3: got %+v, want READY version 2 and the reason", e)
	}
	if m := n.Models(); len(m) != 1 || m[0].Version != "2" {
		t.Errorf("models: got %+v, want version 2", m)
	}
	if u := n.Units(); len(u) != 1 || u[0].Model().Version != "2" {
		t.Errorf("units: got %d, want the one of version 2", len(u))
	}
	// status shows the version a worker serves: the old one left discovery.
	waitFor(t, "discovery: the worker of version 2 alone", func() bool {
		ws, err := mesh.DiscoverWorkers(context.Background(), n.Conn(), 200*time.Millisecond)
		return err == nil && len(ws) == 1 && ws[0].Model == "add" && ws[0].ModelVersion == "2"
	})
	t.Logf("sent %d, answered %d: %v", sent.Load(), answered.Load(), versions)

	// A model whose directory goes unloads, then leaves the index.
	if err := os.RemoveAll(filepath.Join(repo, "add")); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the removed model to leave the index", func() bool { return len(n.Repository().Index(false)) == 0 })
	if m := n.Models(); len(m) != 0 {
		t.Errorf("models after removal: got %+v, want none", m)
	}
}

// TestRepositoryLoadUnload loads a model added while polling is off,
// unloads it, and refuses an unknown one and a broken one, which is
// UNAVAILABLE with its reason.
func TestRepositoryLoadUnload(t *testing.T) {
	repo := t.TempDir()
	putModel(t, repo, "add", "1", "model.onnx", addModel)
	putModel(t, repo, "broken", "1", "model.onnx", addModel)
	if err := os.WriteFile(filepath.Join(repo, "broken", "1", "model.onnx"), []byte("not onnx"), 0o644); err != nil {
		t.Fatal(err)
	}
	n := runReady(t, repoConfig(t, repo, "lu", 0))
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if e := index(n, "broken"); e.State != serving.StateUnavailable || e.Reason == "" {
		t.Errorf("broken at start: got %+v, want UNAVAILABLE with a reason", e)
	}

	putModel(t, repo, "other", "3", "model.onnx", addModel)
	if e := index(n, "other"); e.State != serving.StateUnavailable || e.Version != "3" {
		t.Errorf("a model added with polling off: got %+v, want UNAVAILABLE version 3", e)
	}
	if err := n.Repository().Load(ctx, "other"); err != nil {
		t.Fatalf("load: %v", err)
	}
	if v, err := oipAdd(ctx, n.Client(), "lu-other"); err != nil || v != "3" {
		t.Errorf("other after load: got %q, %v; want version 3", v, err)
	}
	// Reload of the serving version, and a second model on the node.
	if err := n.Repository().Load(ctx, "other"); err != nil {
		t.Fatalf("reload: %v", err)
	}
	if v, err := oipAdd(ctx, n.Client(), "lu-add"); err != nil || v != "1" {
		t.Errorf("add: got %q, %v; want version 1", v, err)
	}

	var we *status.Error
	if err := n.Repository().Load(ctx, "nope"); !errors.As(err, &we) || we.Status != status.NotFound {
		t.Errorf("load unknown: got %v, want a 404 status.Error", err)
	}
	err := n.Repository().Load(ctx, "broken")
	if !errors.As(err, &we) || we.Status != status.BadInput {
		t.Errorf("load broken: got %v, want a 400 status.Error", err)
	}
	if e := index(n, "broken"); e.State != serving.StateUnavailable || e.Reason == "" {
		t.Errorf("broken after load: got %+v, want UNAVAILABLE with a reason", e)
	}

	if err := n.Repository().Unload(ctx, "other"); err != nil {
		t.Fatalf("unload: %v", err)
	}
	if e := index(n, "other"); e.State != serving.StateUnavailable || !strings.Contains(e.Reason, "unloaded") {
		t.Errorf("index after unload: got %+v, want UNAVAILABLE, unloaded", e)
	}
	for _, m := range n.Models() {
		if m.Name == "other" {
			t.Errorf("models after unload: got %+v, want no other", n.Models())
		}
	}
	if err := n.Repository().Unload(ctx, "other"); !errors.As(err, &we) || we.Status != status.NotFound {
		t.Errorf("unload twice: got %v, want a 404 status.Error", err)
	}
	if got := n.Repository().Index(true); len(got) != 1 || got[0].Name != "add" {
		t.Errorf("ready index: got %+v, want add alone", got)
	}
	if !n.Ready() {
		t.Error("Ready: got false, want true")
	}
	if err := n.wait(t, serving.ErrShutdown); err != nil {
		t.Fatal(err)
	}
	if err := n.Repository().Load(ctx, "other"); !errors.Is(err, serving.ErrRepositoryStopped) {
		t.Errorf("load after Run returned: got %v, want ErrRepositoryStopped", err)
	}
}

// TestRepositoryStartErrors: a repository that is missing or holds no
// model that loads stops NewNode with the reason.
func TestRepositoryStartErrors(t *testing.T) {
	empty := t.TempDir()
	broken := t.TempDir()
	if err := os.MkdirAll(filepath.Join(broken, "m", "1"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ dir, want string }{
		{filepath.Join(empty, "missing"), "no such file"},
		{empty, "no model loads"},
		{broken, "want exactly one *.onnx"},
	} {
		_, err := serving.NewNode(context.Background(), repoConfig(t, tc.dir, "se", 0))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: got %v, want an error with %q", tc.dir, err, tc.want)
		}
	}
	cfg := repoConfig(t, empty, "se", 0)
	cfg.Models = []serving.Model{{Name: "a", Path: addModel, Job: "a"}}
	if _, err := serving.NewNode(context.Background(), cfg); !errors.Is(err, serving.ErrInvalidConfig) {
		t.Errorf("Models with Repository: got %v, want ErrInvalidConfig", err)
	}
}

// TestRepositoryDescribeNode: a door-only node on the same repository
// (cluster-serving http) describes the models at their serving version
// and sends to the workers of a serving node.
func TestRepositoryDescribeNode(t *testing.T) {
	repo := t.TempDir()
	putModel(t, repo, "add", "4", "model.onnx", addModel)
	worker := runReady(t, repoConfig(t, repo, "dn", 0))
	cfg := repoConfig(t, repo, "dn", 0)
	cfg.URL, cfg.Serve, cfg.Describe = worker.URL(), false, true
	door := runReady(t, cfg)
	m := door.Models()
	if len(m) != 1 || m[0].Version != "4" || m[0].Job != "dn-add" || len(m[0].Info.Inputs) != 1 || m[0].Info.Inputs[0].Name != "x" {
		t.Fatalf("door models: got %+v, want add version 4 described", m)
	}
	if len(door.Units()) != 0 {
		t.Errorf("door units: got %d, want none", len(door.Units()))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if v, err := oipAdd(ctx, door.Client(), "dn-add"); err != nil || v != "4" {
		t.Errorf("through the door node: got %q, %v; want version 4", v, err)
	}
}

// TestRepositoryModelControl: outside explicit, load and unload are a 403
// status.Error naming the mode and what serves stays as it is; a model
// added after start loads with the next poll in poll mode, never in none.
// A Control the node does not know, or a Poll without poll, is
// ErrInvalidConfig.
func TestRepositoryModelControl(t *testing.T) {
	for _, tc := range []struct {
		control string
		poll    time.Duration
		reason  string
	}{
		{serving.ControlNone, 0, "modelControl none"},
		{serving.ControlPoll, 20 * time.Millisecond, ""},
	} {
		t.Run(tc.control, func(t *testing.T) {
			repo := t.TempDir()
			putModel(t, repo, "add", "1", "model.onnx", addModel)
			cfg := repoConfig(t, repo, "mc"+tc.control, tc.poll)
			cfg.Repository.Control = tc.control
			n := runReady(t, cfg)
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			var we *status.Error
			for what, err := range map[string]error{"load": n.Repository().Load(ctx, "add"), "unload": n.Repository().Unload(ctx, "add")} {
				if !errors.As(err, &we) || we.Status != 403 || !strings.Contains(we.Message, "modelControl "+tc.control) {
					t.Errorf("%s: got %v, want a 403 status.Error naming modelControl %s", what, err, tc.control)
				}
			}
			if v, err := oipAdd(ctx, n.Client(), "mc"+tc.control+"-add"); err != nil || v != "1" {
				t.Errorf("add after the refused unload: got %q, %v; want version 1 serving", v, err)
			}
			putModel(t, repo, "other", "2", "model.onnx", addModel)
			if tc.reason != "" {
				if e := index(n, "other"); e.State != serving.StateUnavailable || !strings.Contains(e.Reason, tc.reason) {
					t.Errorf("a model added after start: got %+v, want UNAVAILABLE saying %s", e, tc.reason)
				}
				return
			}
			meshtest.WaitFor(t, "the poll to load other", func() bool { return index(n, "other").State == serving.StateReady })
		})
	}
	for _, rc := range []serving.RepositoryConfig{
		{Control: "manual"},
		{Control: serving.ControlExplicit, Poll: time.Second},
		{Control: serving.ControlNone, Poll: time.Second},
	} {
		cfg := repoConfig(t, t.TempDir(), "mc", 0)
		rc.Dir, rc.Job = cfg.Repository.Dir, cfg.Repository.Job
		cfg.Repository = rc
		if _, err := serving.NewNode(context.Background(), cfg); !errors.Is(err, serving.ErrInvalidConfig) {
			t.Errorf("%+v: got %v, want ErrInvalidConfig", rc, err)
		}
	}
}
