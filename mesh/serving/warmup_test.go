package serving_test

import (
	"context"
	"encoding/binary"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cluster-serving/cluster-serving/mesh/serving"
)

// putWarmupFile writes <repo>/<name>/warmup/<file>, Triton's place for
// model_warmup's input_data_file.
func putWarmupFile(tb testing.TB, repo, name, file string, data []byte) {
	tb.Helper()
	dir := filepath.Join(repo, name, "warmup")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		tb.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, file), data, 0o644); err != nil {
		tb.Fatal(err)
	}
}

// f32Bytes is vs as little-endian float32s, a warmup file's form.
func f32Bytes(vs ...float32) []byte {
	b, _ := binary.Append(nil, binary.LittleEndian, vs)
	return b
}

// TestRepositoryModelWarmup serves a repository of add models (x: FP32
// [-1,4]) whose config.pbtxt has model_warmup: the one whose samples run
// is READY and serves, after a log line per sample; the ones whose
// warmup fails (a short file, an input the model lacks) are UNAVAILABLE
// with the reason naming the sample and the cause, while the others
// serve; a fixed file and a load make the broken one serve.
func TestRepositoryModelWarmup(t *testing.T) {
	repo := t.TempDir()
	warmup := func(inputs string) string {
		return `max_batch_size: 8 dynamic_batching {} model_warmup [{ name: "w1" batch_size: 4 count: 2 inputs ` + inputs + ` }]`
	}
	fromFile := `{ key: "x" value: { data_type: TYPE_FP32 dims: [4] input_data_file: "x.bin" } }`
	for name, pbtxt := range map[string]string{
		"good":    warmup(fromFile) + ` model_warmup { name: "w2" batch_size: 8 inputs { key: "x" value: { data_type: TYPE_FP32 dims: [4] random_data: true } } }`,
		"short":   warmup(fromFile),
		"unknown": warmup(`{ key: "q" value: { data_type: TYPE_FP32 dims: [4] zero_data: true } }`),
		"plain":   "",
	} {
		putModel(t, repo, name, "1", "model.onnx", addModel)
		if pbtxt != "" {
			putConfig(t, repo, name, pbtxt)
		}
	}
	putWarmupFile(t, repo, "good", "x.bin", f32Bytes(1, 2, 3, 4))
	putWarmupFile(t, repo, "short", "x.bin", f32Bytes(1, 2, 3))
	cfg := repoConfig(t, repo, "wu", 0)
	var log logLines
	cfg.Logger = slog.New(slog.NewTextHandler(&log, nil))
	n := runReady(t, cfg)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()

	for _, name := range []string{"good", "plain"} {
		if e := index(n, name); e.State != serving.StateReady {
			t.Errorf("%s: got %+v, want READY", name, e)
		}
		m, ok := served(n.Models(), name, "1")
		if !ok {
			t.Errorf("%s: not served", name)
			continue
		}
		if v, err := oipAdd(ctx, n.Client(), m.Job); err != nil || v != "1" {
			t.Errorf("%s: infer: got version %q, %v; want 2x+1 from version 1", name, v, err)
		}
	}
	for _, sample := range []string{"sample=w1 batch_size=4 runs=2", "sample=w2 batch_size=8 runs=1"} {
		if got := log.count(`msg="model warmed up" name=good version=1 ` + sample); got != 1 {
			t.Errorf("log lines of good's %s: got %d, want 1", sample, got)
		}
	}
	for name, reason := range map[string]string{
		"short":   `model "short": config.pbtxt: model_warmup "w1": input "x": file warmup/x.bin holds 12 bytes, 16 wanted`,
		"unknown": `model "unknown": config.pbtxt: model_warmup "w1": input "q": not an input of the model: its inputs are [x]`,
	} {
		e := index(n, name)
		if e.State != serving.StateUnavailable || !strings.Contains(e.Reason, reason) {
			t.Errorf("%s: got %+v, want UNAVAILABLE with a reason holding %q", name, e, reason)
		}
		if _, ok := served(n.Models(), name, "1"); ok {
			t.Errorf("%s: served, want not", name)
		}
	}

	// The load API answers the reason too; a fixed file makes it serve.
	err := n.Repository().Load(ctx, "short")
	if err == nil || !strings.Contains(err.Error(), "holds 12 bytes, 16 wanted") {
		t.Errorf("load short: got %v, want the warmup's reason", err)
	}
	putWarmupFile(t, repo, "short", "x.bin", f32Bytes(1, 2, 3, 4))
	if err := n.Repository().Load(ctx, "short"); err != nil {
		t.Fatalf("load short with its file fixed: %v", err)
	}
	m, ok := served(n.Models(), "short", "1")
	if !ok || index(n, "short").State != serving.StateReady {
		t.Fatalf("short: got %+v, want READY", index(n, "short"))
	}
	if v, err := oipAdd(ctx, n.Client(), m.Job); err != nil || v != "1" {
		t.Errorf("short: infer: got version %q, %v; want 2x+1", v, err)
	}
}

// TestUnitModelWarmupError: NewUnit's error for a broken warmup wraps
// ErrModelConfig and names the sample.
func TestUnitModelWarmupError(t *testing.T) {
	repo := t.TempDir()
	putModel(t, repo, "add", "1", "model.onnx", addModel)
	putConfig(t, repo, "add", `max_batch_size: 4 model_warmup { name: "w" batch_size: 1 inputs { key: "x" value: { data_type: TYPE_INT32 dims: [4] zero_data: true } } }`)
	entries, err := serving.ScanRepository(repo)
	if err != nil || len(entries) != 1 || entries[0].Err != nil {
		t.Fatalf("scan: got %+v, %v", entries, err)
	}
	cfg := addConfig(t, "add", "").Unit
	cfg.Model = serving.Model{Name: "add", Version: "1", Path: entries[0].Path, Job: "add"}
	cfg.ModelConfig = entries[0].Config
	u, err := serving.NewUnit(cfg)
	want := `model_warmup "w": input "x": data type int32 differs from the model's float32`
	if u != nil || !errors.Is(err, serving.ErrModelConfig) || !strings.Contains(err.Error(), want) {
		t.Errorf("got %v, %v; want no unit and ErrModelConfig holding %q", u, err, want)
	}
}
