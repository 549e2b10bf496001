package httpdoor_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"reflect"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cluster-serving/cluster-serving/infer/infertest"

	"github.com/cluster-serving/cluster-serving/bridge/door"
	httpdoor "github.com/cluster-serving/cluster-serving/bridge/httpdoor"
	"github.com/cluster-serving/cluster-serving/infer"
	"github.com/cluster-serving/cluster-serving/infer/wire"
	"github.com/cluster-serving/cluster-serving/mesh"
)

func TestPredictShapes(t *testing.T) {
	infertest.RequireLibrary(t)
	e := startDoor(t, httpdoor.Config{},
		served{name: "add", file: "add_f32"},
		served{name: "two", version: "2", file: "two_io"})
	tests := []struct {
		name, path, body string
		want             []tensorJSON
	}{
		{"tensor instances", "/predict", `{"instances":[{"x":[1,2,3,4]},{"x":[0.5,0,0,-1]}]}`,
			[]tensorJSON{{[]float64{3, 5, 7, 9}, []int64{4}}, {[]float64{2, 1, 1, -1}, []int64{4}}}},
		{"sparse", "/predict", `{"instances":[{"x":{"shape":[4],"data":[5],"indices":[[2]]}}]}`,
			[]tensorJSON{{[]float64{1, 1, 11, 1}, []int64{4}}}},
		{"named model", "/models/add/versions/1/predict", `{"instances":[{"x":[1,1,1,1]}]}`,
			[]tensorJSON{{[]float64{3, 3, 3, 3}, []int64{4}}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			st, body := call(t, "POST", e.url+tt.path, tt.body)
			if st != http.StatusOK {
				t.Fatalf("got %d %s, want 200", st, body)
			}
			if got := predictions(t, body); !reflect.DeepEqual(got, tt.want) {
				t.Errorf("got %+v, want %+v", got, tt.want)
			}
		})
	}
	t.Run("sparse and dense together, two outputs", func(t *testing.T) {
		st, body := call(t, "POST", e.url+"/models/two/versions/2/predict",
			`{"instances":[{"a":{"shape":[3],"data":[7,8],"indices":[[0,2]]},"b":[1,2,3]}]}`)
		if st != http.StatusOK {
			t.Fatalf("got %d %s", st, body)
		}
		var resp struct{ Predictions []string }
		_ = json.Unmarshal(body, &resp)
		var v struct{ Value string }
		_ = json.Unmarshal([]byte(resp.Predictions[0]), &v)
		want := `[{"data":[8,2,11],"shape":[3]},{"data":[7,0,24],"shape":[3]}]`
		if v.Value != want {
			t.Errorf("got %s, want %s", v.Value, want)
		}
	})
	t.Run("base64 image", func(t *testing.T) {
		// add_f32 has no image input: a string for it is bad input, and
		// the answer says so with a valid example.
		st, body := call(t, "POST", e.url+"/predict", `{"instances":[{"x":"aGVsbG8="}]}`)
		if st != http.StatusBadRequest || !strings.Contains(errorOf(t, body), `{"instances":[{"x":[1.0,2.0,3.0,4.0]}]}`) {
			t.Errorf("got %d %s, want 400 with an example", st, body)
		}
	})
}

// oipCase is one OIP request and the tensor a direct session run takes.
type oipCase struct {
	model string
	in    infer.Tensor
	data  string // the JSON data as sent
}

func TestOIPInferEveryDatatype(t *testing.T) {
	infertest.RequireLibrary(t)
	cases := []oipCase{
		{"add_f32", infer.Tensor{DType: infer.Float32, Shape: []int64{2, 4}, Data: []float32{1, 2, 3, 4, 5, 6, 7, 8.5}}, `[[1,2,3,4],[5,6,7,8.5]]`},
		{"add_f64", infer.Tensor{DType: infer.Float64, Shape: []int64{1, 4}, Data: []float64{1, 2, 3, 0.125}}, `[1,2,3,0.125]`},
		{"add_i32", infer.Tensor{DType: infer.Int32, Shape: []int64{1, 4}, Data: []int32{1, -2, 3, 4}}, `[1,-2,3,4]`},
		{"add_i64", infer.Tensor{DType: infer.Int64, Shape: []int64{3, 4}, Data: []int64{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12}}, `[1,2,3,4,5,6,7,8,9,10,11,12]`},
		{"identity_u8", infer.Tensor{DType: infer.Uint8, Shape: []int64{1, 4}, Data: []uint8{0, 1, 254, 255}}, `[0,1,254,255]`},
		{"not_bool", infer.Tensor{DType: infer.Bool, Shape: []int64{2, 4}, Data: []bool{true, false, true, false, false, false, true, true}}, `[true,false,true,false,false,false,true,true]`},
		{"classifier", infer.Tensor{DType: infer.Float32, Shape: []int64{1, 8}, Data: []float32{1, 0, -1, 2, 0.5, 0, 0, 3}}, `[1,0,-1,2,0.5,0,0,3]`},
		{"identity_i8", infer.Tensor{DType: infer.Int8, Shape: []int64{1, 4}, Data: []int8{-128, -1, 0, 127}}, `[-128,-1,0,127]`},
		{"identity_i16", infer.Tensor{DType: infer.Int16, Shape: []int64{1, 4}, Data: []int16{-32768, -1, 0, 32767}}, `[-32768,-1,0,32767]`},
		{"identity_u16", infer.Tensor{DType: infer.Uint16, Shape: []int64{1, 4}, Data: []uint16{0, 1, 65534, 65535}}, `[0,1,65534,65535]`},
		{"identity_u32", infer.Tensor{DType: infer.Uint32, Shape: []int64{1, 4}, Data: []uint32{0, 1, 1<<32 - 2, 1<<32 - 1}}, `[0,1,4294967294,4294967295]`},
		{"identity_u64", infer.Tensor{DType: infer.Uint64, Shape: []int64{1, 4}, Data: []uint64{0, 1, 1<<64 - 2, 1<<64 - 1}}, `[0,1,18446744073709551614,18446744073709551615]`},
		{"identity_f16", infer.Tensor{DType: infer.Float16, Shape: []int64{1, 4}, Data: []infer.F16{0x3c00, 0xc100, 0x7bff, 0x2e66}}, `[1,-2.5,65504,0.1]`},
		{"identity_bf16", infer.Tensor{DType: infer.BFloat16, Shape: []int64{1, 4}, Data: []infer.BF16{0x3f80, 0xc020, 0x7f7f, 0x3dcd}}, `[1,-2.5,3.3895314e38,0.1]`},
		{"cast_f32_f16", infer.Tensor{DType: infer.Float32, Shape: []int64{1, 4}, Data: []float32{1, 0.1, 65519, 0x1p-24}}, `[1,0.1,65519,5.9604645e-8]`},
		{"cast_f16_f32", infer.Tensor{DType: infer.Float16, Shape: []int64{1, 4}, Data: []infer.F16{0x3c00, 0x2e66, 0x7bff, 0x0001}}, `[1,0.1,65504,5.9604645e-8]`},
	}
	var models []served
	for _, c := range cases {
		models = append(models, served{name: c.model, file: c.model})
	}
	models = append(models, served{name: "two_io", file: "two_io"})
	e := startDoor(t, httpdoor.Config{}, models...)
	for _, c := range cases {
		t.Run(c.model, func(t *testing.T) {
			sess := infertest.NewSession(t, modelPath(c.model))
			want, err := sess.Run([]infer.Tensor{c.in})
			if err != nil {
				t.Fatal(err)
			}
			info := sess.Info()
			shape, _ := json.Marshal(c.in.Shape)
			body := fmt.Sprintf(`{"id":"req-%s","inputs":[{"name":%q,"datatype":%q,"shape":%s,"data":%s}]}`,
				c.model, info.Inputs[0].Name, wire.OIPDatatype(c.in.DType), shape, c.data)
			st, ans := call(t, "POST", e.url+"/v2/models/"+c.model+"/infer", body)
			if st != http.StatusOK {
				t.Fatalf("got %d %s", st, ans)
			}
			var got infertest.OIPResponse
			if err := json.Unmarshal(ans, &got); err != nil || len(got.Outputs) != 1 {
				t.Fatalf("answer %s: %v", ans, err)
			}
			if got.ModelName != c.model || got.ModelVersion != "1" || got.ID != "req-"+c.model {
				t.Errorf("got model %q version %q id %q", got.ModelName, got.ModelVersion, got.ID)
			}
			o := got.Outputs[0]
			if o.Name != info.Outputs[0].Name || o.Datatype != wire.OIPDatatype(want[0].DType) || !reflect.DeepEqual(o.Shape, want[0].Shape) {
				t.Errorf("got output %s %s %v, want %s %s %v", o.Name, o.Datatype, o.Shape, info.Outputs[0].Name, wire.OIPDatatype(want[0].DType), want[0].Shape)
			}
			if !sameData(t, o.Data, want[0].Data) {
				t.Errorf("got data %s, want %v", o.Data, want[0].Data)
			}
		})
	}
	t.Run("requested outputs and versions route", func(t *testing.T) {
		body := `{"inputs":[{"name":"a","datatype":"FP32","shape":[1,3],"data":[1,2,3]},{"name":"b","datatype":"FP32","shape":[1,3],"data":[2,2,2]}],"outputs":[{"name":"prod"}]}`
		st, ans := call(t, "POST", e.url+"/v2/models/two_io/versions/1/infer", body)
		want := `{"model_name":"two_io","model_version":"1","outputs":[{"name":"prod","datatype":"FP32","shape":[1,3],"data":[2,4,6]}]}`
		if st != http.StatusOK || string(ans) != want {
			t.Errorf("got %d %s, want 200 %s", st, ans, want)
		}
	})
}

// TestOIPNewDatatypes checks what the door says about the datatypes added
// beyond the first six: the metadata names them, and a value out of an
// input's range is 400 naming the input.
func TestOIPNewDatatypes(t *testing.T) {
	infertest.RequireLibrary(t)
	var models []served
	for _, m := range []string{"cast_f16_f32", "identity_u8", "identity_i8", "identity_u64", "identity_f16"} {
		models = append(models, served{name: m, file: m})
	}
	e := startDoor(t, httpdoor.Config{}, models...)
	st, ans := call(t, "GET", e.url+"/v2/models/cast_f16_f32", "")
	if want := `"inputs":[{"name":"x","datatype":"FP16","shape":[-1,4]}],"outputs":[{"name":"y","datatype":"FP32","shape":[-1,4]}]`; st != 200 || !strings.Contains(string(ans), want) {
		t.Errorf("metadata: got %d %s, want 200 with %s", st, ans, want)
	}
	for model, body := range map[string]string{
		"identity_u8":  `{"inputs":[{"name":"x","datatype":"UINT8","shape":[1,4],"data":[256,0,0,0]}]}`,
		"identity_i8":  `{"inputs":[{"name":"x","datatype":"INT8","shape":[1,4],"data":[128,0,0,0]}]}`,
		"identity_u64": `{"inputs":[{"name":"x","datatype":"UINT64","shape":[1,4],"data":[-1,0,0,0]}]}`,
		"identity_f16": `{"inputs":[{"name":"x","datatype":"FP16","shape":[1,4],"data":[70000,0,0,0]}]}`,
	} {
		st, ans := call(t, "POST", e.url+"/v2/models/"+model+"/infer", body)
		if st != http.StatusBadRequest || !strings.Contains(string(ans), `input \"x\"`) {
			t.Errorf("%s out of range: got %d %s, want 400 naming input x", model, st, ans)
		}
	}
}

// sameHalves compares a JSON array of numbers with 16-bit floats h, by
// their bits once each number is converted by from.
func sameHalves[H comparable](raw json.RawMessage, h []H, from func(float32) H) bool {
	var f []float32
	if json.Unmarshal(raw, &f) != nil || len(f) != len(h) {
		return false
	}
	for i := range f {
		if from(f[i]) != h[i] {
			return false
		}
	}
	return true
}

// sameData compares a JSON array with a tensor's data.
func sameData(tb testing.TB, raw json.RawMessage, data any) bool {
	tb.Helper()
	if u8, ok := data.([]uint8); ok { // json.Marshal writes []uint8 as base64
		var got []uint8
		var ints []int
		if err := json.Unmarshal(raw, &ints); err != nil {
			return false
		}
		for _, v := range ints {
			got = append(got, uint8(v))
		}
		return reflect.DeepEqual(got, u8)
	}
	switch h := data.(type) { // 16-bit floats come as numbers: compare their bits
	case []infer.F16:
		return sameHalves(raw, h, infer.F16From)
	case []infer.BF16:
		return sameHalves(raw, h, infer.BF16From)
	}
	ptr := reflect.New(reflect.TypeOf(data))
	if err := json.Unmarshal(raw, ptr.Interface()); err != nil {
		tb.Logf("unmarshal %s: %v", raw, err)
		return false
	}
	return reflect.DeepEqual(ptr.Elem().Interface(), data)
}

func TestMetadataRoutes(t *testing.T) {
	infertest.RequireLibrary(t)
	e := startDoor(t, httpdoor.Config{Config: door.Config{Version: "1.2.3"}},
		served{name: "add", file: "add_f32"},
		served{name: "add", version: "2", file: "add_f64"})
	tests := []struct {
		path string
		st   int
		want string
	}{
		{"/v2", 200, `{"extensions":["model_configuration","system_shared_memory","binary_tensor_data","statistics"],"name":"cluster-serving","version":"1.2.3"}`},
		{"/v2/health/live", 200, `{"live":true}`},
		{"/v2/health/ready", 200, `{"ready":true}`},
		{"/v2/models/add", 200, `{"name":"add","versions":["1","2"],"platform":"onnxruntime_onnx","inputs":[{"name":"x","datatype":"FP64","shape":[-1,4]}],"outputs":[{"name":"y","datatype":"FP64","shape":[-1,4]}],"parameters":{"batching":true,"batching_reason":"dim 0 of every input and output is dynamic"}}`},
		{"/v2/models/add/versions/1", 200, `{"name":"add","versions":["1","2"],"platform":"onnxruntime_onnx","inputs":[{"name":"x","datatype":"FP32","shape":[-1,4]}],"outputs":[{"name":"y","datatype":"FP32","shape":[-1,4]}],"parameters":{"batching":true,"batching_reason":"dim 0 of every input and output is dynamic"}}`},
		{"/v2/models/add/versions/1/ready", 200, `{"name":"add","ready":true}`},
		{"/v2/models/add/ready", 200, `{"name":"add","ready":true}`},
		{"/v2/models/nope/ready", 404, `{"error":"unknown model \"nope\""}`},
		{"/v2/models/nope/config", 404, `{"error":"unknown model \"nope\""}`},
		{"/v2/models/add/versions/9/config", 404, `{"error":"model \"add\" has no version \"9\""}`},
		{"/models/add/versions/2", 200, `{"name":"add","version":"2","job":"add-v2","inputs":[{"name":"x","datatype":"FP64","shape":[-1,4]}],"outputs":[{"name":"y","datatype":"FP64","shape":[-1,4]}],"batching":true,"batching_reason":"dim 0 of every input and output is dynamic"}`},
		{"/v2/models/nope", 404, `{"error":"unknown model \"nope\""}`},
		{"/v2/models/add/versions/9", 404, `{"error":"model \"add\" has no version \"9\""}`},
		{"/models/nope", 404, `{"error":"unknown model \"nope\""}`},
		{"/nowhere", 404, `{"error":"no route GET /nowhere"}`},
	}
	for _, tt := range tests {
		t.Run(tt.path, func(t *testing.T) {
			st, body := call(t, "GET", e.url+tt.path, "")
			if st != tt.st || string(body) != tt.want {
				t.Errorf("got %d %s, want %d %s", st, body, tt.st, tt.want)
			}
		})
	}
	st, body := call(t, "GET", e.url+"/", "")
	if st != 200 || string(body) != httpdoor.Welcome {
		t.Errorf("GET /: got %d %q", st, body)
	}
	st, body = call(t, "GET", e.url+"/models", "")
	var list []map[string]any
	if st != 200 || json.Unmarshal(body, &list) != nil || len(list) != 2 {
		t.Errorf("GET /models: got %d %s, want both versions", st, body)
	}
}

// TestMetadataBatching: the metadata of a model summing over dim 0 (its
// output's dim 0 is fixed) says it does not batch and why; so does one
// whose config turns batching off.
func TestMetadataBatching(t *testing.T) {
	infertest.RequireLibrary(t)
	e := startDoor(t, httpdoor.Config{},
		served{name: "sum", file: "sum_batch"},
		served{name: "off", file: "add_f32", engineCfg: infer.Config{Batching: infer.BatchingOff}})
	tests := []struct{ path, want string }{
		{"/v2/models/sum", `{"name":"sum","versions":["1"],"platform":"onnxruntime_onnx","inputs":[{"name":"x","datatype":"FP32","shape":[-1,4]}],"outputs":[{"name":"y","datatype":"FP32","shape":[1,4]}],"parameters":{"batching":false,"batching_reason":"output \"y\" has fixed dim 0 = 1"}}`},
		{"/models/sum", `[{"name":"sum","version":"1","job":"sum","inputs":[{"name":"x","datatype":"FP32","shape":[-1,4]}],"outputs":[{"name":"y","datatype":"FP32","shape":[1,4]}],"batching":false,"batching_reason":"output \"y\" has fixed dim 0 = 1"}]`},
		{"/v2/models/off", `{"name":"off","versions":["1"],"platform":"onnxruntime_onnx","inputs":[{"name":"x","datatype":"FP32","shape":[-1,4]}],"outputs":[{"name":"y","datatype":"FP32","shape":[-1,4]}],"parameters":{"batching":false,"batching_reason":"config batching: off"}}`},
	}
	for _, tt := range tests {
		st, body := call(t, "GET", e.url+tt.path, "")
		if st != 200 || string(body) != tt.want {
			t.Errorf("GET %s: got %d %s, want 200 %s", tt.path, st, body, tt.want)
		}
	}
}

func TestMetrics(t *testing.T) {
	infertest.RequireLibrary(t)
	e := startDoor(t, httpdoor.Config{}, served{name: "add", file: "add_f32"})
	for range 5 {
		if st, body := call(t, "POST", e.url+"/predict", `{"instances":[{"x":[1,2,3,4]}]}`); st != 200 {
			t.Fatalf("predict: %d %s", st, body)
		}
	}
	st, body := call(t, "GET", e.url+"/metrics", "")
	var timers []map[string]any
	if st != 200 || json.Unmarshal(body, &timers) != nil {
		t.Fatalf("got %d %s", st, body)
	}
	var found bool
	for _, tm := range timers {
		if tm["name"] != "cluster-serving.http.predict.add.v1" {
			continue
		}
		found = true
		for _, k := range []string{"count", "meanRate", "min", "max", "mean", "median", "stdDev", "_75thPercentile",
			"_95thPercentile", "_98thPercentile", "_99thPercentile", "_999thPercentile"} {
			if _, ok := tm[k]; !ok {
				t.Errorf("timer lacks %q: %v", k, tm)
			}
		}
		if tm["count"] != 5.0 || tm["min"].(float64) <= 0 || tm["max"].(float64) < tm["median"].(float64) {
			t.Errorf("got %v, want count 5 and sane stats", tm)
		}
	}
	if !found {
		t.Errorf("no predict timer in %s", body)
	}
}

func TestErrorStatuses(t *testing.T) {
	infertest.RequireLibrary(t)
	release := make(chan struct{})
	defer close(release)
	var ready atomic.Bool
	slowInfo := infer.ModelInfo{Inputs: []infer.IO{{Name: "x", DType: infer.Float32, Shape: []int64{-1, 4}}}}
	e := startDoor(t, httpdoor.Config{
		Config: door.Config{
			RequestTimeout: 300 * time.Millisecond,
			Ready:          ready.Load,
		},
		MaxBodyBytes: 1000,
	},
		served{name: "add", file: "add_f32"},
		served{name: "slow", predictor: blockingPredictor{release}, info: slowInfo},
		served{name: "full", info: slowInfo, noWorker: true, stream: mesh.StreamConfig{MaxMsgs: 1}},
	)
	tests := []struct {
		name, method, path, body string
		st                       int
		want                     string
	}{
		{"malformed JSON", "POST", "/predict", `{"instances":`, 400, `A valid request looks like {"instances":[{"x":[1.0,2.0,3.0,4.0]}]}`},
		{"no instances", "POST", "/predict", `{"records":[]}`, 400, `no "instances"`},
		{"wrong shape", "POST", "/predict", `{"instances":[{"x":[1,2,3]}]}`, 400, "shape [3] does not match model [-1 4]"},
		{"OIP wrong dtype", "POST", "/v2/models/add/infer", `{"inputs":[{"name":"x","datatype":"INT64","shape":[1,4],"data":[1,2,3,4]}]}`, 400, `datatype "INT64" does not match the model's FP32`},
		{"OIP wrong shape", "POST", "/v2/models/add/infer", `{"inputs":[{"name":"x","datatype":"FP32","shape":[2,4],"data":[1,2,3,4]}]}`, 400, "data has 4 elements"},
		{"OIP no inputs", "POST", "/v2/models/add/infer", `{"id":"a"}`, 400, `no "inputs"`},
		{"OIP unknown output", "POST", "/v2/models/add/infer", `{"inputs":[{"name":"x","datatype":"FP32","shape":[1,4],"data":[1,2,3,4]}],"outputs":[{"name":"z"}]}`, 400, `unknown output "z"`},
		{"unknown model", "POST", "/v2/models/nope/infer", `{}`, 404, `unknown model "nope"`},
		{"unknown version", "POST", "/models/add/versions/7/predict", `{}`, 404, `has no version "7"`},
		{"too large", "POST", "/predict", `{"instances":[{"x":[` + strings.Repeat("1,", 600) + `1]}]}`, 413, "larger than 1000 bytes"},
		{"timeout", "POST", "/v2/models/slow/infer", `{"inputs":[{"name":"x","datatype":"FP32","shape":[1,4],"data":[1,2,3,4]}]}`, 504, "timed out"},
		{"not ready", "GET", "/v2/health/ready", "", 503, "the server is not ready"},
		{"wrong method", "DELETE", "/predict", "", 405, "method DELETE not allowed on /predict: use POST"},
		{"wrong method, OIP", "POST", "/v2/health/live", "", 405, "use GET, HEAD"},
		{"OIP unknown input", "POST", "/v2/models/add/infer", `{"inputs":[{"name":"z","datatype":"FP32","shape":[1,4],"data":[1,2,3,4]}]}`, 400, `unknown input: the model's inputs are [x]`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			st, body := call(t, tt.method, e.url+tt.path, tt.body)
			if st != tt.st {
				t.Fatalf("got %d %s, want %d", st, body, tt.st)
			}
			if tt.want != "" && !strings.Contains(errorOf(t, body), tt.want) {
				t.Errorf("got %s, want an error containing %q", body, tt.want)
			}
		})
	}
	t.Run("queue full", func(t *testing.T) {
		// Nobody serves "full" and its queue holds one message: the first
		// request waits there (and times out), the second is refused.
		body := `{"instances":[{"x":[1,2,3,4]}]}`
		first := make(chan int, 1)
		go func() { st, _ := call(t, "POST", e.url+"/models/full/versions/1/predict", body); first <- st }()
		var st int
		var ans []byte
		for range 100 {
			st, ans = call(t, "POST", e.url+"/models/full/versions/1/predict", body)
			if st != http.StatusGatewayTimeout {
				break
			}
		}
		if st != http.StatusServiceUnavailable || !strings.Contains(errorOf(t, ans), "queue full") {
			t.Errorf("got %d %s, want 503 queue full", st, ans)
		}
		<-first
	})
	ready.Store(true)
	if st, body := call(t, "GET", e.url+"/v2/health/ready", ""); st != 200 {
		t.Errorf("ready: got %d %s, want 200", st, body)
	}
}

func TestTokenBucket(t *testing.T) {
	infertest.RequireLibrary(t)
	e := startDoor(t, httpdoor.Config{Config: door.Config{TokensPerSecond: 1, TokenAcquireTimeout: 10 * time.Millisecond}},
		served{name: "add", file: "add_f32"})
	var codes []int
	for range 3 {
		st, body := call(t, "POST", e.url+"/predict", `{"instances":[{"x":[1,2,3,4]}]}`)
		codes = append(codes, st)
		if st == http.StatusTooManyRequests && !strings.Contains(errorOf(t, body), "too many requests") {
			t.Errorf("429 says %s", body)
		}
	}
	if codes[0] != 200 || codes[1] != 429 || codes[2] != 429 {
		t.Errorf("got statuses %v, want [200 429 429]", codes)
	}
}

// TestConcurrentClients sends 2,000 requests from 200 clients and checks
// that each answer belongs to its own request.
func TestConcurrentClients(t *testing.T) {
	infertest.RequireLibrary(t)
	e := startDoor(t, httpdoor.Config{}, served{name: "add", file: "add_f32", engineCfg: infer.Config{MaxBatch: 32}})
	const clients, perClient = 200, 10
	var wg sync.WaitGroup
	var failures atomic.Int64
	for c := range clients {
		wg.Go(func() {
			for i := range perClient {
				v := float64(c*perClient + i)
				oip := i%2 == 1
				var st int
				var body []byte
				if oip {
					st, body = call(t, "POST", e.url+"/v2/models/add/infer",
						fmt.Sprintf(`{"id":"%v","inputs":[{"name":"x","datatype":"FP32","shape":[1,4],"data":[%v,1,2,3]}]}`, v, v))
				} else {
					st, body = call(t, "POST", e.url+"/predict", fmt.Sprintf(`{"instances":[{"x":[%v,1,2,3]}]}`, v))
				}
				if st != http.StatusOK {
					if failures.Add(1) < 5 {
						t.Errorf("request %v: got %d %s", v, st, body)
					}
					continue
				}
				var got float64
				if oip {
					var ans struct {
						ID      string `json:"id"`
						Outputs []struct{ Data []float64 }
					}
					if err := json.Unmarshal(body, &ans); err != nil || len(ans.Outputs) != 1 || ans.ID != fmt.Sprint(v) {
						t.Errorf("request %v: answer %s", v, body)
						continue
					}
					got = ans.Outputs[0].Data[0]
				} else {
					got = predictions(t, body)[0].Data[0]
				}
				if got != 2*v+1 {
					failures.Add(1)
					t.Errorf("request %v: got y[0] %v, want %v", v, got, 2*v+1)
				}
			}
		})
	}
	wg.Wait()
	if n := failures.Load(); n > 0 {
		t.Fatalf("%d of %d requests failed", n, clients*perClient)
	}
}

// TestGracefulShutdown stops the door while a request is in flight: the
// request still gets its answer.
func TestGracefulShutdown(t *testing.T) {
	infertest.RequireLibrary(t)
	release := make(chan struct{})
	info := infer.ModelInfo{Inputs: []infer.IO{{Name: "x", DType: infer.Float32, Shape: []int64{-1, 4}}}}
	e := startDoor(t, httpdoor.Config{}, served{name: "slow", predictor: blockingPredictor{release}, info: info})
	got := make(chan int, 1)
	go func() {
		st, _ := call(t, "POST", e.url+"/predict", `{"instances":[{"x":[1,2,3,4]}]}`)
		got <- st
	}()
	time.Sleep(200 * time.Millisecond) // let the request reach the worker
	stopped := make(chan struct{})
	go func() { e.stop(); close(stopped) }()
	select {
	case <-stopped:
		t.Fatal("door stopped with a request in flight")
	case <-time.After(200 * time.Millisecond):
	}
	close(release)
	if st := <-got; st != http.StatusOK {
		t.Errorf("in-flight request: got %d, want 200", st)
	}
	<-stopped
}

// TestWrongMethod: a route that exists answers another method with 405,
// the methods it takes in Allow and the JSON error body; a path no route
// has stays 404.
func TestWrongMethod(t *testing.T) {
	infertest.RequireLibrary(t)
	e := startDoor(t, httpdoor.Config{}, served{name: "add", file: "add_f32"})
	for _, tc := range []struct {
		method, path string
		st           int
		allow        string
	}{
		{"GET", "/predict", 405, "POST"},
		{"PUT", "/v2/models/add/infer", 405, "POST"},
		{"POST", "/v2/models/add", 405, "GET, HEAD"},
		{"DELETE", "/v2/health/ready", 405, "GET, HEAD"},
		{"GET", "/v2/nowhere", 404, ""},
	} {
		req, _ := http.NewRequest(tc.method, e.url+tc.path, nil)
		resp, err := httpClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != tc.st || resp.Header.Get("Allow") != tc.allow {
			t.Errorf("%s %s: got %d Allow %q, want %d Allow %q", tc.method, tc.path, resp.StatusCode, resp.Header.Get("Allow"), tc.st, tc.allow)
		}
		errorOf(t, body)
	}
}
