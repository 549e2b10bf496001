package mesh_test

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/micro"

	"github.com/cluster-serving/cluster-serving/mesh"
	"github.com/cluster-serving/cluster-serving/mesh/meshtest"
)

// TestServiceStatsCountForwardsAndRefusals: the door forwards a request to
// the work queue and the worker answers the caller (Client.Forward), so
// $SRV.STATS count each request the door took, when it is stored or
// refused; the door's refusals (here a publish without a reply subject)
// count in num_errors and last_error. An error the worker answers (a bad
// body: 400) reaches the caller as a micro error reply all the same.
func TestServiceStatsCountForwardsAndRefusals(t *testing.T) {
	sc := mesh.StreamConfig{Job: "stats"}
	s, nc := startStreams(t, sc)
	runWorker(t, nc, mesh.WorkerConfig{Stream: sc}, newFake())
	svc := startService(t, nc, nc, mesh.ServiceConfig{Jobs: []string{"stats"}})
	caller := meshtest.Connect(t, s)
	meshtest.WaitFor(t, "the door", func() bool { return svc.ID() != "" })

	if m, err := caller.Request(mesh.PredictSubject("stats"), []byte("good"), 10*time.Second); err != nil || string(m.Data) != "GOOD" || len(m.Header) != 0 {
		t.Fatalf("good request: got %v, %v; want GOOD and no headers", m, err)
	}
	m, err := caller.Request(mesh.PredictSubject("stats"), []byte("bad body"), 10*time.Second)
	if err != nil || m.Header.Get(micro.ErrorCodeHeader) != "400" || !strings.Contains(m.Header.Get(micro.ErrorHeader), "bad payload") || len(m.Data) != 0 {
		t.Fatalf("bad request: got %v, %v; want a 400 error reply saying bad payload", m, err)
	}
	if err := caller.Publish(mesh.PredictSubject("stats"), []byte("no reply")); err != nil {
		t.Fatal(err)
	}

	for _, subj := range []string{"$SRV.STATS." + mesh.ServiceName, "$SRV.STATS." + mesh.ServiceName + "." + svc.ID()} {
		var e *micro.EndpointStats
		meshtest.WaitFor(t, subj+" counting 3 requests", func() bool {
			m, err = caller.Request(subj, nil, 5*time.Second)
			if err != nil {
				t.Fatalf("%s: %v", subj, err)
			}
			var st micro.Stats
			if err := json.Unmarshal(m.Data, &st); err != nil || st.Type != micro.StatsResponseType || len(st.Endpoints) != 1 {
				t.Fatalf("%s: got %s (%v), want micro stats of one endpoint", subj, m.Data, err)
			}
			e = st.Endpoints[0]
			return e.NumRequests >= 3
		})
		if e.Name != mesh.EndpointName || e.NumRequests != 3 || e.NumErrors != 1 {
			t.Errorf("%s: got %s %d requests %d errors, want %s 3 requests 1 error", subj, e.Name, e.NumRequests, e.NumErrors, mesh.EndpointName)
		}
		if !strings.HasPrefix(e.LastError, "400:") || !strings.Contains(e.LastError, "no reply subject") {
			t.Errorf("%s: last_error %q, want 400:<no reply subject>", subj, e.LastError)
		}
		if e.ProcessingTime <= 0 || e.AverageProcessingTime <= 0 {
			t.Errorf("%s: processing time %v (average %v), want both above 0", subj, e.ProcessingTime, e.AverageProcessingTime)
		}
	}

	// PING and INFO answer as micro's do.
	m, err = caller.Request("$SRV.PING."+mesh.ServiceName+"."+svc.ID(), nil, 5*time.Second)
	var ping micro.Ping
	if err != nil || json.Unmarshal(m.Data, &ping) != nil || ping.Type != micro.PingResponseType || ping.ID != svc.ID() || ping.Name != mesh.ServiceName {
		t.Errorf("PING: got %v, %v; want a micro ping of %s", m, err, svc.ID())
	}
	m, err = caller.Request("$SRV.INFO."+mesh.ServiceName, nil, 5*time.Second)
	var info micro.Info
	if err != nil || json.Unmarshal(m.Data, &info) != nil || info.Type != micro.InfoResponseType || len(info.Endpoints) != 1 ||
		info.Endpoints[0].QueueGroup != mesh.ServiceQueueGroup || info.Endpoints[0].Subject != mesh.PredictSubject("stats") {
		t.Errorf("INFO: got %v, %v; want micro info with the predict endpoint", m, err)
	}
}
