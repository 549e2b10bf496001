package serving_test

import (
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	yaml "go.yaml.in/yaml/v3"

	"github.com/cluster-serving/cluster-serving/mesh/serving"
)

// TestDeployConfigs parses, with the strict parser every process uses, the
// config.yaml each manifest in deploy/ mounts: deploy/config/*.yaml (the
// compose files) and the config.yaml key of every ConfigMap under
// deploy/kubernetes. An unknown or misspelt key fails here, not at a
// pod's start. (deploy/manifests_test.go, a module of its own, checks the
// manifests themselves against the Kubernetes, KEDA and compose schemas.)
func TestDeployConfigs(t *testing.T) {
	configs := map[string][]byte{}
	files, _ := filepath.Glob("../../deploy/config/*.yaml")
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		configs[f] = data
	}
	manifests, _ := filepath.Glob("../../deploy/kubernetes/*.yaml")
	for _, f := range manifests {
		for name, data := range configMapConfigs(t, f) {
			configs[f+": ConfigMap "+name] = data
		}
	}
	if len(files) < 2 || len(configs) < 3 {
		t.Fatalf("found %d deploy/config files and %d configs in all; want the compose configs and a ConfigMap", len(files), len(configs))
	}
	for where, data := range configs {
		f, err := serving.ParseFile(data)
		if err != nil {
			t.Errorf("%s: %v", where, err)
			continue
		}
		if f.NatsURL == "" {
			t.Errorf("%s: natsUrl is empty; workers and doors join an external NATS", where)
		}
		if strings.Count(f.NatsURL, ",") == 2 && f.QueueReplicas != 3 {
			t.Errorf("%s: three NATS servers but queueReplicas %d, want 3", where, f.QueueReplicas)
		}
	}
}

// configMapConfigs returns the config.yaml of each ConfigMap in the
// multi-document manifest file.
func configMapConfigs(t *testing.T, file string) map[string][]byte {
	t.Helper()
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string][]byte{}
	dec := yaml.NewDecoder(bytes.NewReader(data))
	for {
		var doc struct {
			Kind     string                `yaml:"kind"`
			Metadata struct{ Name string } `yaml:"metadata"`
			Data     map[string]string     `yaml:"data"`
		}
		err := dec.Decode(&doc)
		if errors.Is(err, io.EOF) {
			return out
		}
		if err != nil {
			t.Fatalf("%s: %v", file, err)
		}
		if c, ok := doc.Data["config.yaml"]; ok && doc.Kind == "ConfigMap" {
			out[doc.Metadata.Name] = []byte(c)
		}
	}
}
