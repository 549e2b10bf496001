package serving

import (
	"reflect"
	"strings"
	"testing"
)

func TestTemplateParsesAndNamesEveryKey(t *testing.T) {
	tmpl := Template("/models/demo")
	f, err := ParseFile(tmpl)
	if err != nil {
		t.Fatalf("parse template: %v", err)
	}
	if f.ModelPath != "/models/demo" || f.JobName != "serving_stream" {
		t.Errorf("got modelPath %q jobName %q", f.ModelPath, f.JobName)
	}
	for key := range fileKeys {
		if !strings.Contains(string(tmpl), "\n"+key+":") {
			t.Errorf("template lacks key %q", key)
		}
	}
}

func TestParseFileErrors(t *testing.T) {
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
		{"image pixels", "modelPath: m\nimageMaxPixels: 40000000\n", `config key "imageMaxPixels": 40000000: want 1 to 33554432`},
		{"image budget", "modelPath: m\nimageMemoryBudget: -1\n", `config key "imageMemoryBudget": -1 is negative`},
		{"image decodes", "modelPath: m\nimageDecodeConcurrency: -2\n", `config key "imageDecodeConcurrency": -2 is negative`},
		{"negative", "modelPath: m\nmaxBatch: -1\n", `config key "maxBatch": -1 is negative`},
		{"not a mapping", "- a\n- b\n", "want a mapping"},
		{"storage", "modelPath: m\nqueueStorage: disk\n", `config key "queueStorage"`},
		{"partitions", "modelPath: m\njetstreamPartitions: 17\n", `config key "jetstreamPartitions": 17: at most 16`},
		{"negative partitions", "modelPath: m\njetstreamPartitions: -1\n", `config key "jetstreamPartitions": -1 is negative`},
		{"listen", "modelPath: m\nnatsListen: localhost\n", `config key "natsListen"`},
		{"log level", "modelPath: m\nlogLevel: loud\n", `config key "logLevel"`},
		{"trace detail", "modelPath: m\ntraceDetail: spans\n", `config key "traceDetail": "spans" is not request or stages`},
		{"tls cert alone", "modelPath: m\nhttpTlsCert: c.pem\n", `config key "httpTlsKey": required when httpTlsCert is set`},
		{"tls key alone", "modelPath: m\nredisTlsKey: k.pem\n", `config key "redisTlsCert": required when redisTlsKey is set`},
		{"client ca without tls", "modelPath: m\nhttpTlsClientCa: ca.pem\n", `config key "httpTlsClientCa": needs httpTlsCert`},
		{"server config with url", "modelPath: m\nnatsUrl: nats://h:4222\nnatsServerConfig: n.conf\n", `config key "natsServerConfig"`},
		{"sync not a duration", "modelPath: m\nnatsSync: sometimes\n", `config key "natsSync": "sometimes" is neither always nor a duration`},
		{"sync interval with url", "modelPath: m\nnatsUrl: nats://h:4222\nnatsSync: 2m\n", `config key "natsSync": configures the embedded`},
		{"inbox wildcard", "modelPath: m\nnatsInboxPrefix: _INBOX_cs.>\n", `config key "natsInboxPrefix": "_INBOX_cs.>" is not a subject prefix`},
		{"inbox star", "modelPath: m\nnatsInboxPrefix: a.*.b\n", `config key "natsInboxPrefix"`},
		{"inbox trailing dot", "modelPath: m\nnatsInboxPrefix: _INBOX_cs.\n", `config key "natsInboxPrefix"`},
		{"inbox empty token", "modelPath: m\nnatsInboxPrefix: a..b\n", `config key "natsInboxPrefix"`},
		{"inbox blank", "modelPath: m\nnatsInboxPrefix: \"a b\"\n", `config key "natsInboxPrefix"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := ParseFile([]byte(tt.yaml))
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("got error %v, want one containing %q", err, tt.want)
			}
		})
	}
}

func TestLogValueRedacts(t *testing.T) {
	f := File{RedisSecureTrustStorePassword: "hunter2", NatsURL: "nats://u:hunter3@h:4222,nats://tok4@h2:4222",
		RedisURL: "rediss://u:hunter5@h:6379", NatsCredentials: "/run/nats.creds", OtlpEndpoint: "https://u:hunter6@collector:4318"}
	s := f.LogValue().String()
	for _, secret := range []string{"hunter2", "hunter3", "tok4", "hunter5", "hunter6"} {
		if strings.Contains(s, secret) {
			t.Errorf("secret %q in log value: %s", secret, s)
		}
	}
	// A file's path is no secret, and says which file was used.
	if !strings.Contains(s, "/run/nats.creds") {
		t.Errorf("natsCredentials path missing from %s", s)
	}
}

func TestServedModels(t *testing.T) {
	f, err := ParseFile([]byte("jobName: j\nmodels:\n  - {name: a, path: /m/a}\n  - name: b\n    version: \"3\"\n    path: /m/b\n"))
	if err != nil {
		t.Fatal(err)
	}
	want := []Model{
		{Name: "a", Version: "1", Path: "/m/a", Job: "j"},
		{Name: "b", Version: "3", Path: "/m/b", Job: "j-b-v3"},
	}
	if got := f.ServedModels(); !reflect.DeepEqual(got, want) {
		t.Errorf("got %+v, want %+v", got, want)
	}
	f, err = ParseFile([]byte("modelPath: /m\njobName: j\n"))
	if err != nil {
		t.Fatal(err)
	}
	if got := f.ServedModels(); !reflect.DeepEqual(got, []Model{{Name: "j", Version: "1", Path: "/m", Job: "j"}}) {
		t.Errorf("modelPath form: got %+v", got)
	}
}

func TestModelsErrors(t *testing.T) {
	tests := []struct{ name, yaml, want string }{
		{"both", "modelPath: m\nmodels:\n  - {name: a, path: p}\n", `config key "models": set modelPath (one model) or models (several), not both`},
		{"neither", "jobName: j\n", `config key "modelPath": required`},
		{"unknown entry key", "models:\n  - {name: a, path: p, pth: q}\n", `unknown key "pth" in a model entry`},
		{"no path", "models:\n  - {name: a}\n", `config key "models": entry 1: path is required`},
		{"bad name", "models:\n  - {name: a.b, path: p}\n", `entry 1: name "a.b"`},
		{"twice", "models:\n  - {name: a, path: p}\n  - {name: a, version: \"1\", path: q}\n", "a version 1 is listed twice"},
		{"not a list of mappings", "models:\n  - a\n", "each entry is a mapping"},
		{"port", "modelPath: m\nhttpPort: 70000\n", `config key "httpPort"`},
		{"timeout", "modelPath: m\nhttpRequestTimeout: -5\n", `config key "httpRequestTimeout"`},
		{"alias conflict", "modelPath: m\nmaxBatch: 8\ncountWindow: 4\n", `config key "countWindow": 4 conflicts with maxBatch: 8`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := ParseFile([]byte(tt.yaml))
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("got error %v, want one containing %q", err, tt.want)
			}
		})
	}
}
