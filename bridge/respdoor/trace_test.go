package respdoor_test

import (
	"fmt"
	"testing"

	"github.com/cluster-serving/cluster-serving/bridge/door/doortest"
	"github.com/cluster-serving/cluster-serving/bridge/respdoor"
	"github.com/cluster-serving/cluster-serving/mesh/meshtest"
	"github.com/cluster-serving/cluster-serving/telemetry"
)

// TestTraceAndMetrics: an XADD with a traceparent field is a server span
// of the caller's trace that the worker continues; the result's put is
// linked to it, and the door counts its requests, outcomes and errors as
// door "resp".
func TestTraceAndMetrics(t *testing.T) {
	spans := meshtest.CaptureSpans(t)
	m, err := telemetry.NewMetrics(telemetry.Meter())
	if err != nil {
		t.Fatal(err)
	}
	s := startDoor(t, respdoor.Config{Metrics: m}, nil, add)
	r := records(t)[0]
	r.fields = append(r.fields, "traceparent", doortest.Traceparent)
	xadd(t, s.rdb, r)
	query(t, s.rdb, r.job, r.uri)
	bad := records(t)[2]
	xadd(t, s.rdb, bad)
	query(t, s.rdb, bad.job, bad.uri)
	ended := spans.Wait(t, telemetry.SpanDoorRESP, telemetry.SpanPublish, telemetry.SpanProcess, telemetry.SpanResultPut)
	doortest.CheckTraceContinued(t, ended, telemetry.SpanDoorRESP)
	put := ended.Find(telemetry.SpanResultPut)
	if len(put.Links) == 0 || put.Links[0].SpanContext.TraceID().String() != doortest.TraceID {
		t.Errorf("%s: got links %v, want the record's trace", telemetry.SpanResultPut, put.Links)
	}
	doors, errs := m.Tally().Snapshot()
	var got string
	for _, d := range doors {
		if d.Door == telemetry.DoorRESP {
			got = fmt.Sprintln(d.Listen != "", d.Jobs[0].Job, d.Jobs[0].Outcomes)
		}
	}
	if want := "true add map[bad_input:1 ok:1]\n"; got != want {
		t.Errorf("tally of door resp: got %q, want %q", got, want)
	}
	if len(errs) != 1 || errs[0].Door != telemetry.DoorRESP {
		t.Errorf("errors: got %+v, want the bad record's, at door resp", errs)
	}
}
