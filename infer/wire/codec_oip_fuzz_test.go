package wire

import (
	"errors"
	"testing"

	"github.com/cluster-serving/cluster-serving/infer"
)

// FuzzDecodeOIP: any body gives records or an *InputError, never a panic.
func FuzzDecodeOIP(f *testing.F) {
	info := infer.ModelInfo{Inputs: []infer.IO{
		{Name: "a", DType: infer.Float32, Shape: []int64{-1, 3}},
		{Name: "b", DType: infer.Int64, Shape: []int64{-1, 2, -1}},
	}}
	for _, seed := range []string{
		`{"inputs":[{"name":"a","datatype":"FP32","shape":[1,3],"data":[1,2,3]},{"name":"b","datatype":"INT64","shape":[1,2,1],"data":[[[4],[5]]]}]}`,
		`{"id":"x","inputs":[{"name":"a","datatype":"FP32","shape":[2,3],"data":[1,2,3,4,5,6]}],"outputs":[{"name":"y"}]}`,
		`{"inputs":[{"name":"a","datatype":"BOOL","shape":[1,3],"data":[true,false,true]}]}`,
		`{"inputs":[]}`, `{`, `[]`, `{"inputs":[{"shape":[-1,99999999999]}]}`,
	} {
		f.Add([]byte(seed))
	}
	c, spec := oipCodec{}, &Spec{Info: info}
	f.Fuzz(func(t *testing.T, body []byte) {
		req, err := c.Decode(body, spec)
		if err != nil {
			var ie *infer.InputError
			if !errors.As(err, &ie) {
				t.Fatalf("got %T %v, want an *InputError", err, err)
			}
			return
		}
		for _, r := range req.Records {
			if len(r) != len(info.Inputs) {
				t.Fatalf("got a record of %d tensors, want %d", len(r), len(info.Inputs))
			}
		}
	})
}
