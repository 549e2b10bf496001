package wire

import (
	"bytes"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"testing"

	flatbuffers "github.com/google/flatbuffers/go"

	"github.com/cluster-serving/cluster-serving/infer"
	"github.com/cluster-serving/cluster-serving/infer/infertest"
)

// TestHostileArrowVectorLengths patches the schema's field count of a real
// payload to two billion: arrow-go would size a slice from it, so the
// decoder must refuse it before handing the stream over.
func TestHostileArrowVectorLengths(t *testing.T) {
	b64 := bytes.TrimSpace(infertest.Fixture(t, "payloads/image-3_224_224-arrow-base64"))
	raw, err := base64.StdEncoding.DecodeString(string(b64))
	if err != nil {
		t.Fatal(err)
	}
	if err := checkIPCVectors(raw); err != nil {
		t.Fatalf("real payload: got %v, want no error", err)
	}
	// The modern framing: marker, length, then the schema message.
	msg := raw[8 : 8+int(binary.LittleEndian.Uint32(raw[4:]))]
	schema := union(root(msg), msgHeader)
	lenAt := int(schema.Vector(flatbuffers.UOffsetT(schema.Offset(schemaFields)))) - 4
	binary.LittleEndian.PutUint32(msg[lenAt:], 2_000_000_000)
	if err := checkIPCVectors(raw); !errors.Is(err, errVector) {
		t.Errorf("hostile field count: got %v, want errVector", err)
	}
	_, err = DecodeRedisArrow([]byte(base64.StdEncoding.EncodeToString(raw)), infer.ModelInfo{Inputs: []infer.IO{{Name: "x", DType: infer.Float32, Shape: []int64{-1, 3, 224, 224}}}}, false)
	var ie *infer.InputError
	if !errors.As(err, &ie) {
		t.Errorf("DecodeRedisArrow: got %v, want an *InputError", err)
	}
}
