package main

import (
	"fmt"
	"strings"
	"testing"
)

func TestTemplateParsesAndNamesEveryKey(t *testing.T) {
	tmpl := fmt.Sprintf(configTemplate, "/models/demo")
	cfg, err := parseConfig([]byte(tmpl))
	if err != nil {
		t.Fatalf("parse template: %v", err)
	}
	if cfg.ModelPath != "/models/demo" || cfg.JobName != "serving_stream" {
		t.Errorf("got modelPath %q jobName %q", cfg.ModelPath, cfg.JobName)
	}
	for key := range configKeys {
		if !strings.Contains(tmpl, "\n"+key+":") {
			t.Errorf("template lacks key %q", key)
		}
	}
}

func TestParseConfigErrors(t *testing.T) {
	tests := []struct {
		name, yaml, want string
	}{
		{"unknown key", "modelPath: m\nmodelpth: x\n", `config key "modelpth" (line 2): unknown key`},
		{"case slip", "modelPath: m\njobname: x\n", `did you mean "jobName"?`},
		{"malformed int", "modelPath: m\nmodelParallelism: two\n", `config key "modelParallelism" (line 2): want int, got "two"`},
		{"missing model", "jobName: a\n", `config key "modelPath": required`},
		{"bad job", "modelPath: m\njobName: a.b\n", `config key "jobName"`},
		{"bad post", "modelPath: m\npostProcessing: top(3)\n", `config key "postProcessing"`},
		{"bad resize", "modelPath: m\nimageResize: 224\n", `config key "imageResize"`},
		{"twice", "modelPath: m\nmodelPath: n\n", `given twice`},
		{"negative", "modelPath: m\nmaxBatch: -1\n", `config key "maxBatch": -1 is negative`},
		{"not a mapping", "- a\n- b\n", "want a mapping"},
		{"storage", "modelPath: m\nqueueStorage: disk\n", `config key "queueStorage"`},
		{"encrypted", "modelPath: m\nmodelEncrypted: true\n", `config key "modelEncrypted"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := parseConfig([]byte(tt.yaml))
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("got error %v, want one containing %q", err, tt.want)
			}
		})
	}
}

func TestDerivedThreads(t *testing.T) {
	tests := []struct {
		yaml                 string
		parallelism, threads int
	}{
		{"modelPath: m\ncoreNumberPerMachine: 8\nmodelParallelism: 2\n", 2, 4},
		{"modelPath: m\ncoreNumberPerMachine: 8\n", 1, 8},
		{"modelPath: m\ncoreNumberPerMachine: 2\nmodelParallelism: 4\n", 4, 1},
		{"modelPath: m\nmodelParallelism: 3\nthreadPerModel: 5\n", 3, 5},
	}
	for _, tt := range tests {
		cfg, err := parseConfig([]byte(tt.yaml))
		if err != nil {
			t.Fatal(err)
		}
		if cfg.ModelParallelism != tt.parallelism || cfg.ThreadPerModel != tt.threads {
			t.Errorf("%q: got %d×%d, want %d×%d", tt.yaml, cfg.ModelParallelism, cfg.ThreadPerModel, tt.parallelism, tt.threads)
		}
	}
}

func TestLogValueRedacts(t *testing.T) {
	cfg := Config{RedisSecureTrustStorePassword: "hunter2"}
	if s := cfg.LogValue().String(); strings.Contains(s, "hunter2") {
		t.Errorf("secret in log value: %s", s)
	}
}

func TestSemver(t *testing.T) {
	for in, want := range map[string]string{"v1.2.3": "1.2.3", "1.2.3-rc.1": "1.2.3-rc.1", "dev": "0.0.0-dev", "a7652f6-dirty": "0.0.0-a7652f6-dirty", "v0.1.0-3-gabc": "0.1.0-3-gabc"} {
		if got := semver(in); got != want {
			t.Errorf("semver(%q) = %q, want %q", in, got, want)
		}
	}
}
