package wire_test

import (
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/cluster-serving/cluster-serving/infer/status"
	"github.com/cluster-serving/cluster-serving/infer/wire"
	"github.com/cluster-serving/cluster-serving/infer/wire/kservepb"
)

func TestQueueParamsOf(t *testing.T) {
	want := wire.QueueParams{Priority: 2, Timeout: 1500 * time.Microsecond}
	jsonBody := `{"id":"x","inputs":[{"name":"a","datatype":"FP32","shape":[1],"data":[1]}],"parameters":{"priority":2,"timeout":1500,"binary_data_output":true}}`
	header := `{"inputs":[{"name":"a","datatype":"FP32","shape":[1],"parameters":{"binary_data_size":4}}],"parameters":{"timeout":1500,"priority":2}}`
	grpcBody, err := proto.Marshal(&kservepb.ModelInferRequest{ModelName: "m", Parameters: map[string]*kservepb.InferParameter{
		"priority": {ParameterChoice: &kservepb.InferParameter_Uint64Param{Uint64Param: 2}},
		"timeout":  {ParameterChoice: &kservepb.InferParameter_Int64Param{Int64Param: 1500}},
		"other":    {ParameterChoice: &kservepb.InferParameter_StringParam{StringParam: "x"}},
	}, RawInputContents: [][]byte{make([]byte, 64)}})
	if err != nil {
		t.Fatal(err)
	}
	for name, c := range map[string]struct {
		ct   string
		body []byte
	}{
		"oip":    {wire.MediaTypeOIP, []byte(jsonBody)},
		"binary": {wire.MediaTypeOIPBinary, wire.FrameOIPBinary(len(header), append([]byte(header), 0, 0, 128, 63))},
		"grpc":   {wire.MediaTypeKServeGRPC, grpcBody},
	} {
		got, err := wire.QueueParamsOf(c.ct, c.body)
		if err != nil || got != want {
			t.Errorf("%s: got %+v %v, want %+v", name, got, err, want)
		}
	}
	none, err := wire.QueueParamsOf(wire.MediaTypeOIP, []byte(`{"inputs":[]}`))
	if err != nil || none != (wire.QueueParams{}) {
		t.Errorf("no parameters: got %+v %v", none, err)
	}
	_, err = wire.QueueParamsOf(wire.MediaTypeOIP, []byte(`{"parameters":{"priority":"high"}}`))
	if status.Of(err) != status.BadInput {
		t.Errorf("priority \"high\": got %v, want a 400", err)
	}
}
