package serving_test

import (
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/cluster-serving/cluster-serving/embedded"
	"github.com/cluster-serving/cluster-serving/infer"
	"github.com/cluster-serving/cluster-serving/mesh"
	"github.com/cluster-serving/cluster-serving/mesh/serving"
	"github.com/cluster-serving/cluster-serving/telemetry"
)

// TestTemplateStatesThePackageDefaults checks that the numbers the
// template writes out are the defaults of the packages that use them, which
// an empty key gets.
func TestTemplateStatesThePackageDefaults(t *testing.T) {
	tmpl, err := serving.ParseFile(serving.Template("m"))
	if err != nil {
		t.Fatal(err)
	}
	empty, err := serving.ParseFile([]byte("modelPath: m\n"))
	if err != nil {
		t.Fatal(err)
	}
	stream := mesh.StreamConfig{Replicas: mesh.DefaultReplicas, Storage: jetstream.FileStorage, MaxMsgs: mesh.DefaultMaxMsgs,
		MaxBytes: mesh.DefaultMaxBytes, AckWait: mesh.DefaultAckWait, MaxDeliver: mesh.DefaultMaxDeliver, ResultTTL: mesh.DefaultResultTTL}
	tests := []struct {
		name      string
		got, want any
	}{
		{"natsListen", tmpl.NATSURL(), empty.NATSURL()},
		{"natsMaxPayload", int32(tmpl.NatsMaxPayload), int32(embedded.DefaultMaxPayload)},
		{"natsStoreDir", tmpl.Embedded().StoreDir, empty.Embedded().StoreDir},
		{"natsSync", tmpl.NatsSync, embedded.SyncAlways},
		{"queue keys", tmpl.Stream(), stream},
		{"maxBatch", tmpl.MaxBatch, infer.DefaultMaxBatch},
		{"workerInflight", tmpl.WorkerInflight, mesh.DefaultMaxInflight},
		{"shutdownGrace", tmpl.Grace(), mesh.DefaultShutdownGrace},
		{"metricsListen", tmpl.MetricsAddr(), empty.MetricsAddr()},
		{"jobName", tmpl.JobName, empty.JobName},
		{"natsInboxPrefix", tmpl.NATSAuth(nil).InboxPrefix, serving.DefaultInboxPrefix},
	}
	for _, tt := range tests {
		if !reflect.DeepEqual(tt.got, tt.want) {
			t.Errorf("%s: template says %v, the default is %v", tt.name, tt.got, tt.want)
		}
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
		f, err := serving.ParseFile([]byte(tt.yaml))
		if err != nil {
			t.Fatal(err)
		}
		e := f.Engine()
		if e.Parallelism != tt.parallelism || e.Threads != tt.threads {
			t.Errorf("%q: got %d×%d, want %d×%d", tt.yaml, e.Parallelism, e.Threads, tt.parallelism, tt.threads)
		}
	}
}

func TestMappedKeys(t *testing.T) {
	f, err := serving.ParseFile([]byte("modelPath: m\ntimeWindow: 5\ncountWindow: 32\nackWait: 1500\nresultTTL: 60\n" +
		"queueStorage: memory\nnatsListen: 0.0.0.0:4333\ntokenBucketEnabled: true\ntokenAcquireTimeout: 250\n" +
		"imageMaxPixels: 1000000\nimageDecodeConcurrency: 3\nimageMemoryBudget: 1048576\n"))
	if err != nil {
		t.Fatal(err)
	}
	if f.MaxWait != 5 || f.MaxBatch != 32 {
		t.Errorf("aliases: got maxWait %d maxBatch %d, want 5 and 32", f.MaxWait, f.MaxBatch)
	}
	if e := f.Engine(); e.MaxWait != 5*time.Millisecond || e.MaxBatch != 32 {
		t.Errorf("engine: got MaxWait %v MaxBatch %d, want 5ms and 32", e.MaxWait, e.MaxBatch)
	}
	if e := f.Engine(); e.ImageMaxPixels != 1000000 || e.ImageDecodeConcurrency != 3 || e.ImageMemoryBudget != 1<<20 {
		t.Errorf("image budget: got %d pixels, %d decodes, %d bytes; want 1000000, 3, 1048576",
			e.ImageMaxPixels, e.ImageDecodeConcurrency, e.ImageMemoryBudget)
	}
	if s := f.Stream(); s.AckWait != 1500*time.Millisecond || s.ResultTTL != time.Minute || s.Storage != jetstream.MemoryStorage {
		t.Errorf("stream: got %+v", s)
	}
	if e := f.Embedded(); e.Host != "0.0.0.0" || e.Port != 4333 || f.NATSURL() != "nats://0.0.0.0:4333" {
		t.Errorf("embedded: got %+v, url %s", e, f.NATSURL())
	}
	if rate, wait := f.TokenBucket(); rate != serving.DefaultTokensPerSecond || wait != 250*time.Millisecond {
		t.Errorf("token bucket: got %v, %v", rate, wait)
	}
	empty, _ := serving.ParseFile([]byte("modelPath: m\nmetricsListen: off\n"))
	if rate, _ := empty.TokenBucket(); rate != 0 || empty.MetricsAddr() != "" || empty.NATSURL() != "nats://127.0.0.1:4222" {
		t.Errorf("defaults: got rate %v, metrics %q, url %s", rate, empty.MetricsAddr(), empty.NATSURL())
	}
}

func TestTelemetryFromEnv(t *testing.T) {
	f, _ := serving.ParseFile([]byte("modelPath: m\n"))
	env := map[string]string{"OTEL_TRACES_EXPORTER": "otlp", "OTEL_EXPORTER_OTLP_PROTOCOL": "http/protobuf",
		"OTEL_TRACES_SAMPLER_ARG": "0.25", "OTEL_SERVICE_NAME": "svc"}
	tc := f.Telemetry(func(k string) string { return env[k] })
	if tc.TracesExporter != telemetry.ExporterOTLPHTTP || tc.SampleRatio != 0.25 || tc.ServiceName != "svc" || !tc.MetricsEnabled {
		t.Errorf("got %+v", tc)
	}
	f, _ = serving.ParseFile([]byte("modelPath: m\ntracesExporter: otlp-grpc\ntraceSampleRatio: 0.5\ntraceDetail: stages\n"))
	if tc := f.Telemetry(func(k string) string { return env[k] }); tc.TracesExporter != telemetry.ExporterOTLPGRPC || tc.SampleRatio != 0.5 || tc.TraceDetail != telemetry.TraceDetailStages {
		t.Errorf("keys must win: got %+v", tc)
	}
}

// TestFileTelemetryFromEnv: File.TelemetryFromEnv, the config keys with
// the OTEL_* variables, as cmd reads them.
func TestFileTelemetryFromEnv(t *testing.T) {
	for _, tc := range []struct {
		name, key string
		env       map[string]string
		want      string // the exporter; "" for an error
	}{
		{"nothing set", "", nil, telemetry.ExporterNone},
		{"the endpoint variable alone", "", map[string]string{telemetry.EnvOTLPEndpoint: "http://c:4318"}, telemetry.ExporterOTLPHTTP},
		{"key none, the variables decide", "none", map[string]string{telemetry.EnvOTLPEndpoint: "c:4317", telemetry.EnvOTLPProtocol: "grpc"}, telemetry.ExporterOTLPGRPC},
		{"the key wins", "otlp-grpc", map[string]string{telemetry.EnvTracesExporter: "none"}, telemetry.ExporterOTLPGRPC},
		{"a bad variable", "", map[string]string{telemetry.EnvTracesExporter: "zipkin"}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			yaml := "modelPath: m\n"
			if tc.key != "" {
				yaml += "tracesExporter: " + tc.key + "\n"
			}
			if tc.key != "" && tc.key != "none" {
				yaml += "otlpEndpoint: c:4317\n"
			}
			file, err := serving.ParseFile([]byte(yaml))
			if err != nil {
				t.Fatal(err)
			}
			got, err := file.TelemetryFromEnv(func(k string) string { return tc.env[k] })
			if tc.want == "" {
				if err == nil || !strings.Contains(err.Error(), "tracesExporter") {
					t.Errorf("got %v, want an error naming the key tracesExporter", err)
				}
				return
			}
			if err != nil || got.TracesExporter != tc.want {
				t.Errorf("got %q (%v), want %q", got.TracesExporter, err, tc.want)
			}
		})
	}
}
