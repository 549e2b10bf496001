package telemetry

import (
	"context"
	"fmt"

	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	"google.golang.org/grpc"
	"google.golang.org/grpc/encoding"
	_ "google.golang.org/grpc/encoding/proto" // registers the "proto" codec countCodec falls back to
	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/encoding/protowire"
)

// Field numbers of the OTLP trace messages that countSpans walks
// (opentelemetry/proto/collector/trace/v1 and trace/v1).
const (
	fieldResourceSpans = 1 // ExportTraceServiceRequest.resource_spans
	fieldScopeSpans    = 2 // ResourceSpans.scope_spans
	fieldSpans         = 2 // ScopeSpans.spans
	fieldTraceID       = 1 // Span.trace_id, 16 bytes
	fieldSpanID        = 2 // Span.span_id, 8 bytes
)

// countSpans counts the spans of an encoded ExportTraceServiceRequest.
// It walks the protobuf wire format down to each span and checks that
// the span is well formed and carries a 16-byte trace id and an 8-byte
// span id, without decoding the rest (names, attributes, events) into
// messages: what a receiver that only counts needs, at a fraction of a
// full decode's cost. It returns an error naming the first malformed
// part.
func countSpans(b []byte) (int, error) {
	n := 0
	err := eachBytesField(b, fieldResourceSpans, func(rs []byte) error {
		return eachBytesField(rs, fieldScopeSpans, func(ss []byte) error {
			return eachBytesField(ss, fieldSpans, func(span []byte) error {
				if err := checkSpan(span); err != nil {
					return fmt.Errorf("span %d: %w", n, err)
				}
				n++
				return nil
			})
		})
	})
	return n, err
}

// eachBytesField calls f with the payload of every length-delimited
// field num of message b, and checks that the other fields are well
// formed.
func eachBytesField(b []byte, num protowire.Number, f func([]byte) error) error {
	for len(b) > 0 {
		n, typ, l := protowire.ConsumeTag(b)
		if l < 0 {
			return fmt.Errorf("otlp: bad tag: %w", protowire.ParseError(l))
		}
		b = b[l:]
		if n == num && typ == protowire.BytesType {
			v, l := protowire.ConsumeBytes(b)
			if l < 0 {
				return fmt.Errorf("otlp: field %d: %w", n, protowire.ParseError(l))
			}
			if err := f(v); err != nil {
				return err
			}
			b = b[l:]
			continue
		}
		l = protowire.ConsumeFieldValue(n, typ, b)
		if l < 0 {
			return fmt.Errorf("otlp: field %d: %w", n, protowire.ParseError(l))
		}
		b = b[l:]
	}
	return nil
}

// checkSpan checks that span is a well-formed message with a 16-byte
// trace id and an 8-byte span id.
func checkSpan(span []byte) error {
	var traceID, spanID int
	err := eachBytesField(span, fieldTraceID, func(v []byte) error { traceID = len(v); return nil })
	if err == nil {
		err = eachBytesField(span, fieldSpanID, func(v []byte) error { spanID = len(v); return nil })
	}
	switch {
	case err != nil:
		return err
	case traceID != 16 || spanID != 8:
		return fmt.Errorf("otlp: trace id of %d bytes and span id of %d, want 16 and 8", traceID, spanID)
	}
	return nil
}

// spanCount is what the counting receiver decodes an export request
// into: its number of spans (countCodec).
type spanCount int

// countCodec is the gRPC codec of a receiver that only counts: it
// decodes an export request into a spanCount with countSpans, and
// everything else (the responses) as the proto codec does.
type countCodec struct{ proto encoding.CodecV2 }

func (c countCodec) Marshal(v any) (mem.BufferSlice, error) { return c.proto.Marshal(v) }

func (c countCodec) Unmarshal(data mem.BufferSlice, v any) error {
	n, ok := v.(*spanCount)
	if !ok {
		return c.proto.Unmarshal(data, v)
	}
	var b []byte
	if len(data) == 1 {
		b = data[0].ReadOnlyData()
	} else {
		buf := data.MaterializeToBuffer(mem.DefaultBufferPool())
		defer buf.Free()
		b = buf.ReadOnlyData()
	}
	count, err := countSpans(b)
	*n = spanCount(count)
	return err
}

func (c countCodec) Name() string { return c.proto.Name() }

// countService is the OTLP trace service of a receiver that only
// counts: the same method as coltracepb's, decoded by countCodec.
func countService(r *Receiver) *grpc.ServiceDesc {
	return &grpc.ServiceDesc{
		ServiceName: coltracepb.TraceService_ServiceDesc.ServiceName,
		HandlerType: (*any)(nil),
		Methods: []grpc.MethodDesc{{
			MethodName: "Export",
			Handler: func(_ any, _ context.Context, dec func(any) error, _ grpc.UnaryServerInterceptor) (any, error) {
				var n spanCount
				if err := dec(&n); err != nil {
					return nil, err // a status error already
				}
				r.addCount(int(n))
				return &coltracepb.ExportTraceServiceResponse{}, nil
			},
		}},
		Metadata: "opentelemetry/proto/collector/trace/v1/trace_service.proto",
	}
}
