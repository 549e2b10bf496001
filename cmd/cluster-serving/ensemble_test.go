package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/cluster-serving/cluster-serving/infer/wire/kservepb"
)

// simpleEnsemble is a one-step ensemble over Triton's "simple" with the
// same inputs and outputs, so that it answers sum and difference as
// simple does; step names the step's model.
func simpleEnsemble(name, step string) string {
	io := func(kind, n string) string {
		return fmt.Sprintf(`%s { name: "%s" data_type: TYPE_INT32 dims: [ 16 ] }`, kind, n)
	}
	return fmt.Sprintf(`name: "%s"
platform: "ensemble"
max_batch_size: 8
%s
%s
%s
%s
ensemble_scheduling { step [ { model_name: "%s" model_version: -1
  input_map { key: "INPUT0" value: "INPUT0" } input_map { key: "INPUT1" value: "INPUT1" }
  output_map { key: "OUTPUT0" value: "OUTPUT0" } output_map { key: "OUTPUT1" value: "OUTPUT1" } } ] }
`, name, io("input", "INPUT0"), io("input", "INPUT1"), io("output", "OUTPUT0"), io("output", "OUTPUT1"), step)
}

// TestTritonEnsemble serves Triton's simple behind a one-step ensemble
// and a nested one (an ensemble whose step is that ensemble), beside a
// broken ensemble (a step whose dtype does not fit): both doors answer
// the ensembles' metadata, config, inference and statistics as Triton's,
// the NATS door lists and answers them, and the broken one is
// UNAVAILABLE with its reason while the rest serves.
func TestTritonEnsemble(t *testing.T) {
	repo := t.TempDir()
	tritonRepo(t, repo)
	for name, cfg := range map[string]string{
		"simple_ens":    simpleEnsemble("simple_ens", "simple"),
		"simple_nested": simpleEnsemble("simple_nested", "simple_ens"),
		"simple_broken": strings.Replace(simpleEnsemble("simple_broken", "simple"), `input { name: "INPUT0" data_type: TYPE_INT32`, `input { name: "INPUT0" data_type: TYPE_FP32`, 1),
	} {
		if err := os.MkdirAll(filepath.Join(repo, name, "1"), 0o755); err != nil {
			t.Fatal(err)
		}
		writeFile(t, filepath.Join(repo, name, "config.pbtxt"), cfg, 0o644)
	}
	ports := startRepoNode(t, repo, "modelControl: explicit\n", true)
	e := startTritonOn(t, ports)

	var meta struct {
		Platform string `json:"platform"`
	}
	if st := e.getJSON("/v2/models/simple_ens", &meta); st != 200 || meta.Platform != "ensemble" {
		t.Errorf("GET /v2/models/simple_ens: %d platform %q, want 200 ensemble", st, meta.Platform)
	}
	cfg, err := e.g.ModelConfig(e.ctx, &kservepb.ModelConfigRequest{Name: "simple_nested"})
	if err != nil || cfg.Config.GetEnsembleScheduling().GetStep()[0].GetModelName() != "simple_ens" {
		t.Errorf("ModelConfig simple_nested: %v %v", cfg, err)
	}
	var idx []struct{ Name, State, Reason string }
	resp, b := e.do("POST", "/v2/repository/index", []byte(`{}`))
	if resp.StatusCode != 200 || !strings.Contains(string(b), `"simple_broken"`) {
		t.Fatalf("index: %d %s", resp.StatusCode, b)
	}
	if err := json.Unmarshal(b, &idx); err != nil {
		t.Fatal(err)
	}
	for _, m := range idx {
		want := "READY"
		if m.Name == "simple_broken" {
			want = "UNAVAILABLE"
			if !strings.Contains(m.Reason, "inconsistent data type") {
				t.Errorf("simple_broken reason %q: want the dtype mismatch", m.Reason)
			}
		}
		if m.State != want {
			t.Errorf("index %s: %s (%s), want %s", m.Name, m.State, m.Reason, want)
		}
	}

	t.Logf("index: %+v", idx)
	_, before := e.stats("simple")
	const k = 3
	for i := 0; i < k; i++ {
		for _, model := range []string{"simple_ens", "simple_nested"} {
			if err := e.httpInfer(model, 2, i%2 == 1); err != nil {
				t.Errorf("HTTP infer %s: %v", model, err)
			}
			if err := e.grpcInfer(model, 2); err != nil {
				t.Errorf("gRPC infer %s: %v", model, err)
			}
		}
	}
	h, g := e.stats("simple_ens")
	_, after := e.stats("simple")
	// simple_ens ran 2k times itself and 2k times for simple_nested; each
	// of its runs is one run of simple.
	if h.InferenceStats.Success.Count != 4*k || g.InferenceStats.Success.Count != 4*k {
		t.Errorf("simple_ens stats: HTTP %v, gRPC %v: want success %d", h, g, 4*k)
	}
	if got := after.InferenceStats.Success.Count - before.InferenceStats.Success.Count; got != 4*k {
		t.Errorf("simple counted %d requests for %d ensemble runs", got, 4*k)
	}

	nc, err := nats.Connect(e.nats)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	body, _ := inferBody(2, false)
	m := nats.NewMsg("serving.add-simple_ens.predict")
	m.Data = body
	m.Header.Set("Content-Type", "application/vnd.cluster-serving.oip+json")
	reply, err := nc.RequestMsg(m, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	out0, out1, err := outputs(reply.Data, 0)
	if err == nil {
		err = sumDiff(2, out0, out1)
	}
	if err != nil {
		t.Errorf("NATS serving.add-simple_ens.predict: %v in %s", err, reply.Data)
	}
}
