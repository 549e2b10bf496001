package kservepb

import (
	"bytes"
	"encoding/json"
	"fmt"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
)

// JSON writes m as Triton's HTTP API does (GET .../config, .../stats):
// the proto field names, every scalar and list field even when zero, no
// unset message (never a null: perf_analyzer reads a member that is there
// as an object), enums by name, and 64-bit integers as JSON numbers. protojson writes those as strings (the
// proto3 JSON mapping), which clients that read max_batch_size or dims as
// numbers (perf_analyzer, tritonclient) cannot use; so the protojson
// output is decoded and each 64-bit field, found through m's descriptor,
// is written back as a number.
func JSON(m proto.Message) ([]byte, error) {
	b, err := protojson.MarshalOptions{UseProtoNames: true, EmitUnpopulated: true}.Marshal(m)
	if err != nil {
		return nil, err
	}
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	var v map[string]any
	if err := d.Decode(&v); err != nil {
		return nil, fmt.Errorf("kservepb: re-reading protojson: %w", err)
	}
	numbersIn(v, m.ProtoReflect().Descriptor())
	return json.Marshal(v)
}

// numbersIn rewrites, in obj (the JSON object of a message of type md),
// the 64-bit integer fields that protojson wrote as strings.
func numbersIn(obj map[string]any, md protoreflect.MessageDescriptor) {
	fields := md.Fields()
	for i := range fields.Len() {
		f := fields.Get(i)
		v, ok := obj[string(f.Name())]
		if !ok {
			continue
		}
		if v == nil { // an unset message: Triton leaves it out, never null
			delete(obj, string(f.Name()))
			continue
		}
		switch {
		case f.IsMap():
			if m, ok := v.(map[string]any); ok {
				for k, e := range m {
					m[k] = fixValue(e, f.MapValue())
				}
			}
		case f.IsList():
			if l, ok := v.([]any); ok {
				for k, e := range l {
					l[k] = fixValue(e, f)
				}
			}
		default:
			obj[string(f.Name())] = fixValue(v, f)
		}
	}
}

// fixValue is one value of field f: a message is walked, a 64-bit
// integer written as a string becomes a number.
func fixValue(v any, f protoreflect.FieldDescriptor) any {
	switch f.Kind() {
	case protoreflect.MessageKind, protoreflect.GroupKind:
		if m, ok := v.(map[string]any); ok {
			numbersIn(m, f.Message())
		}
	case protoreflect.Int64Kind, protoreflect.Sint64Kind, protoreflect.Sfixed64Kind,
		protoreflect.Uint64Kind, protoreflect.Fixed64Kind:
		if s, ok := v.(string); ok {
			return json.Number(s)
		}
	}
	return v
}
