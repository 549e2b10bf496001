package telemetry

import (
	"strings"
	"testing"

	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	resourcepb "go.opentelemetry.io/proto/otlp/resource/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/proto"
)

// exportRequest is an export request of two resources with spans in
// several scopes, every span with ids, a name and an attribute.
func exportRequest(perScope ...int) *coltracepb.ExportTraceServiceRequest {
	str := func(k, v string) *commonpb.KeyValue {
		return &commonpb.KeyValue{Key: k, Value: &commonpb.AnyValue{Value: &commonpb.AnyValue_StringValue{StringValue: v}}}
	}
	req := &coltracepb.ExportTraceServiceRequest{}
	for r := range 2 {
		rs := &tracepb.ResourceSpans{Resource: &resourcepb.Resource{Attributes: []*commonpb.KeyValue{str("service.name", "s")}}, SchemaUrl: "u"}
		for i, n := range perScope {
			if i%2 != r {
				continue
			}
			ss := &tracepb.ScopeSpans{Scope: &commonpb.InstrumentationScope{Name: "scope"}}
			for range n {
				ss.Spans = append(ss.Spans, &tracepb.Span{
					TraceId: make([]byte, 16), SpanId: make([]byte, 8), ParentSpanId: make([]byte, 8),
					Name: "nats request", Kind: tracepb.Span_SPAN_KIND_SERVER, StartTimeUnixNano: 1, EndTimeUnixNano: 2,
					Attributes: []*commonpb.KeyValue{str("messaging.system", "nats")},
					Status:     &tracepb.Status{Code: tracepb.Status_STATUS_CODE_OK},
				})
			}
			rs.ScopeSpans = append(rs.ScopeSpans, ss)
		}
		req.ResourceSpans = append(req.ResourceSpans, rs)
	}
	return req
}

func TestCountSpans(t *testing.T) {
	for _, tt := range []struct {
		name     string
		perScope []int
		want     int
	}{
		{"none", nil, 0},
		{"one", []int{1}, 1},
		{"scopes of two resources", []int{3, 0, 512, 7}, 522},
	} {
		t.Run(tt.name, func(t *testing.T) {
			b, err := proto.Marshal(exportRequest(tt.perScope...))
			if err != nil {
				t.Fatal(err)
			}
			got, err := countSpans(b)
			if err != nil || got != tt.want {
				t.Errorf("countSpans = %d, %v; want %d, nil", got, err, tt.want)
			}
		})
	}
}

func TestCountSpansRefusesMalformed(t *testing.T) {
	good, err := proto.Marshal(exportRequest(2))
	if err != nil {
		t.Fatal(err)
	}
	noIDs := exportRequest(1)
	noIDs.ResourceSpans[0].ScopeSpans[0].Spans[0].SpanId = nil
	noSpanID, err := proto.Marshal(noIDs)
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		name string
		b    []byte
		want string
	}{
		{"truncated", good[:len(good)-3], "otlp:"},
		{"bad tag", []byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff}, "bad tag"},
		{"span without a span id", noSpanID, "span id of 0"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			n, err := countSpans(tt.b)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("countSpans = %d, %v; want an error with %q", n, err, tt.want)
			}
		})
	}
}
