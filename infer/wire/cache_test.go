package wire_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"math"
	"regexp"
	"strconv"
	"sync"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/cluster-serving/cluster-serving/infer"
	"github.com/cluster-serving/cluster-serving/infer/wire"
	"github.com/cluster-serving/cluster-serving/infer/wire/kservepb"
)

// memCache is a wire.Cache in memory.
type memCache struct {
	mu sync.Mutex
	m  map[string][]byte
}

func newMemCache() *memCache { return &memCache{m: map[string][]byte{}} }

func (c *memCache) Lookup(_ context.Context, key string) ([]byte, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	v, ok := c.m[key]
	return v, ok
}

func (c *memCache) Store(_ context.Context, key string, value []byte) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.m[key] = value
}

// only returns the one key and value in c, failing unless there is
// exactly one.
func (c *memCache) only(tb testing.TB) (string, []byte) {
	tb.Helper()
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.m) != 1 {
		tb.Fatalf("cache holds %d entries, want 1", len(c.m))
	}
	for k, v := range c.m {
		return k, v
	}
	return "", nil
}

// cacheSpec is a model "m" version "1" with input x of dtype dt and
// shape [-1,-1] and outputs y and z.
func cacheSpec(dt infer.DType) wire.Spec {
	return wire.Spec{Model: wire.Model{Name: "m", Version: "1"}, Info: infer.ModelInfo{
		Inputs:  []infer.IO{{Name: "x", DType: dt, Shape: []int64{-1, -1}}},
		Outputs: []infer.IO{{Name: "y", DType: infer.Float32, Shape: []int64{-1, -1}}, {Name: "z", DType: infer.Float32, Shape: []int64{-1, -1}}},
	}}
}

// le32 is v as little-endian FP32 raw data.
func le32(v ...float32) []byte {
	var b []byte
	for _, f := range v {
		b = binary.LittleEndian.AppendUint32(b, math.Float32bits(f))
	}
	return b
}

// binaryBody is an OIP binary body (framed, see wire.FrameOIPBinary)
// whose JSON header is header and whose raw data follows.
func binaryBody(header string, raw []byte) []byte {
	return wire.FrameOIPBinary(len(header), append([]byte(header), raw...))
}

// grpcBody is a proto ModelInferRequest of x, raw or typed.
func grpcBody(tb testing.TB, id, datatype string, shape []int64, raw bool, v ...float32) []byte {
	tb.Helper()
	in := &kservepb.ModelInferRequest_InferInputTensor{Name: "x", Datatype: datatype, Shape: shape}
	req := &kservepb.ModelInferRequest{ModelName: "m", Id: id, Inputs: []*kservepb.ModelInferRequest_InferInputTensor{in}}
	if raw {
		req.RawInputContents = [][]byte{le32(v...)}
	} else {
		in.Contents = &kservepb.InferTensorContents{Fp32Contents: v}
	}
	b, err := proto.Marshal(req)
	if err != nil {
		tb.Fatal(err)
	}
	return b
}

func cacheKeyOf(tb testing.TB, s wire.Spec, contentType string, body []byte) string {
	tb.Helper()
	r, err := wire.NewCacheRequest(context.Background(), contentType, body, s)
	if err != nil {
		tb.Fatalf("NewCacheRequest(%s): %v", contentType, err)
	}
	return r.Key
}

// TestCacheKey checks what the key covers: the same tensors under
// another id or in another wire format give the same key; the same bytes
// in another shape or dtype, other data, other requested outputs or
// another version give another.
func TestCacheKey(t *testing.T) {
	fp32, i32 := cacheSpec(infer.Float32), cacheSpec(infer.Int32)
	v2 := fp32
	v2.Model.Version = "2"
	const (
		oip     = wire.MediaTypeOIP
		bin     = wire.MediaTypeOIPBinary
		grpcRaw = wire.MediaTypeKServeGRPC
	)
	base := cacheKeyOf(t, fp32, oip, []byte(`{"id":"a","inputs":[{"name":"x","datatype":"FP32","shape":[1,4],"data":[1,2,3,4]}]}`))
	if !regexp.MustCompile(`^[-_A-Za-z0-9]{43}$`).MatchString(base) {
		t.Errorf("key %q: want 43 base64url characters, valid NATS key-value key", base)
	}
	tests := []struct {
		name        string
		spec        wire.Spec
		contentType string
		body        []byte
		same        bool
	}{
		{"another id", fp32, oip, []byte(`{"id":"b","inputs":[{"name":"x","datatype":"FP32","shape":[1,4],"data":[1,2,3,4]}]}`), true},
		{"no id, nested data", fp32, oip, []byte(`{"inputs":[{"name":"x","datatype":"FP32","shape":[1,4],"data":[[1,2,3,4]]}]}`), true},
		{"all outputs named", fp32, oip, []byte(`{"inputs":[{"name":"x","datatype":"FP32","shape":[1,4],"data":[1,2,3,4]}],"outputs":[{"name":"z"},{"name":"y"}]}`), true},
		{"binary input", fp32, bin, binaryBody(`{"id":"c","inputs":[{"name":"x","datatype":"FP32","shape":[1,4],"parameters":{"binary_data_size":16}}]}`, le32(1, 2, 3, 4)), true},
		{"binary outputs", fp32, bin, binaryBody(`{"inputs":[{"name":"x","datatype":"FP32","shape":[1,4],"data":[1,2,3,4]}],"parameters":{"binary_data_output":true}}`, nil), true},
		{"gRPC raw", fp32, grpcRaw, grpcBody(t, "d", "FP32", []int64{1, 4}, true, 1, 2, 3, 4), true},
		{"gRPC contents", fp32, grpcRaw, grpcBody(t, "", "FP32", []int64{1, 4}, false, 1, 2, 3, 4), true},
		{"other shape, same bytes", fp32, oip, []byte(`{"inputs":[{"name":"x","datatype":"FP32","shape":[2,2],"data":[1,2,3,4]}]}`), false},
		{"other shape over gRPC", fp32, grpcRaw, grpcBody(t, "", "FP32", []int64{4, 1}, true, 1, 2, 3, 4), false},
		{"other dtype, same bytes", i32, bin, binaryBody(`{"inputs":[{"name":"x","datatype":"INT32","shape":[1,4],"parameters":{"binary_data_size":16}}]}`, le32(1, 2, 3, 4)), false},
		{"other data", fp32, oip, []byte(`{"inputs":[{"name":"x","datatype":"FP32","shape":[1,4],"data":[1,2,3,5]}]}`), false},
		{"one output named", fp32, oip, []byte(`{"inputs":[{"name":"x","datatype":"FP32","shape":[1,4],"data":[1,2,3,4]}],"outputs":[{"name":"y"}]}`), false},
		{"other version", v2, oip, []byte(`{"inputs":[{"name":"x","datatype":"FP32","shape":[1,4],"data":[1,2,3,4]}]}`), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := cacheKeyOf(t, tt.spec, tt.contentType, tt.body)
			if (got == base) != tt.same {
				t.Errorf("key %s, base %s: got same %v, want %v", got, base, got == base, tt.same)
			}
		})
	}
}

func TestNewCacheRequestRefuses(t *testing.T) {
	s := cacheSpec(infer.Float32)
	if _, err := wire.NewCacheRequest(context.Background(), wire.MediaTypeJSON, []byte(`{"instances":[{"x":[1,2,3,4]}]}`), s); !errors.Is(err, wire.ErrNotCacheable) {
		t.Errorf("JSON instances: got %v, want ErrNotCacheable", err)
	}
	if _, err := wire.NewCacheRequest(context.Background(), wire.MediaTypeOIP, []byte(`{"inputs":[]}`), s); !isInputError(err) {
		t.Errorf("bad body: got %v, want an *infer.InputError", err)
	}
}

// TestPredictorCacheRoundTrip runs requests of add_f32 (batching: split
// into rows) through a Predictor with a cache, and checks that a door's
// CacheRequest of the same tensors, in another format and with another
// id, finds the key it stored and answers what the Predictor would have.
func TestPredictorCacheRoundTrip(t *testing.T) {
	requireORT(t)
	for _, batched := range []bool{false, true} {
		t.Run("inputAlreadyBatched="+strconv.FormatBool(batched), func(t *testing.T) {
			e := newEngine(t, infer.Config{ModelPath: model("add_f32"), MaxBatch: 8, InputAlreadyBatched: batched})
			cache := newMemCache()
			p := wire.NewPredictor(e, wire.Model{Name: "add", Version: "1"}).WithCache(cache)
			body := []byte(`{"id":"first","inputs":[{"name":"x","datatype":"FP32","shape":[2,4],"data":[1,2,3,4,5,6,7,8]}]}`)
			if _, err := p.Predict(context.Background(), wire.MediaTypeOIP, body); err != nil {
				t.Fatal(err)
			}
			key, value := cache.only(t)
			door := wire.Spec{Model: wire.Model{Name: "add"}, Info: e.Info()} // what a door knows
			for _, tc := range []struct {
				name, contentType string
				body              []byte
			}{
				{"OIP JSON", wire.MediaTypeOIP, []byte(`{"id":"second","inputs":[{"name":"x","datatype":"FP32","shape":[2,4],"data":[[1,2,3,4],[5,6,7,8]]}]}`)},
				{"OIP binary", wire.MediaTypeOIPBinary, binaryBody(`{"id":"third","inputs":[{"name":"x","datatype":"FP32","shape":[2,4],"parameters":{"binary_data_size":32}}],"parameters":{"binary_data_output":true}}`, le32(1, 2, 3, 4, 5, 6, 7, 8))},
				{"gRPC", wire.MediaTypeKServeGRPC, grpcAddBody(t, "fourth", 1, 2, 3, 4, 5, 6, 7, 8)},
			} {
				r, err := wire.NewCacheRequest(context.Background(), tc.contentType, tc.body, door)
				if err != nil {
					t.Fatal(err)
				}
				if r.Key != key {
					t.Errorf("%s: key %s, the Predictor stored %s", tc.name, r.Key, key)
				}
				got, err := r.Answer(value)
				if err != nil {
					t.Fatal(err)
				}
				want, err := wire.NewPredictor(e, wire.Model{Name: "add", Version: "1"}).Predict(context.Background(), tc.contentType, tc.body)
				if err != nil {
					t.Fatal(err)
				}
				if !bytes.Equal(got, want) {
					t.Errorf("%s: the cached answer is\n%q\nthe model's\n%q", tc.name, got, want)
				}
			}
		})
	}
}

// grpcAddBody is a raw ModelInferRequest of add_f32's x, shape [2,4].
func grpcAddBody(tb testing.TB, id string, v ...float32) []byte {
	tb.Helper()
	req := &kservepb.ModelInferRequest{ModelName: "add", Id: id, RawInputContents: [][]byte{le32(v...)},
		Inputs: []*kservepb.ModelInferRequest_InferInputTensor{{Name: "x", Datatype: "FP32", Shape: []int64{2, 4}}}}
	b, err := proto.Marshal(req)
	if err != nil {
		tb.Fatal(err)
	}
	return b
}

// TestPredictorCacheOnlyOIP checks that a Predictor stores nothing for
// a format the cache does not keep, nor for a request that failed.
func TestPredictorCacheOnlyOIP(t *testing.T) {
	requireORT(t)
	cache := newMemCache()
	p := newPredictor(t, infer.Config{ModelPath: model("add_f32"), MaxBatch: 8}).WithCache(cache)
	if _, err := p.Predict(context.Background(), wire.MediaTypeJSON, []byte(`{"instances":[{"x":[1,2,3,4]}]}`)); err != nil {
		t.Fatal(err)
	}
	if _, err := p.Predict(context.Background(), wire.MediaTypeOIP, []byte(`{"inputs":[{"name":"x","datatype":"FP32","shape":[1,3],"data":[1,2,3]}]}`)); err == nil {
		t.Fatal("a [1,3] x: got no error")
	}
	if len(cache.m) != 0 {
		t.Errorf("cache holds %d entries, want none", len(cache.m))
	}
}

// TestCacheAnswerRefusesBadValues checks that a value that is not the
// model's reads as an error (a miss for the door), never as an answer.
func TestCacheAnswerRefusesBadValues(t *testing.T) {
	requireORT(t)
	e := newEngine(t, infer.Config{ModelPath: model("add_f32"), MaxBatch: 8})
	cache := newMemCache()
	p := wire.NewPredictor(e, wire.Model{Name: "add"}).WithCache(cache)
	body := []byte(`{"inputs":[{"name":"x","datatype":"FP32","shape":[1,4],"data":[1,2,3,4]}]}`)
	if _, err := p.Predict(context.Background(), wire.MediaTypeOIP, body); err != nil {
		t.Fatal(err)
	}
	_, value := cache.only(t)
	r, err := wire.NewCacheRequest(context.Background(), wire.MediaTypeOIP, body, wire.Spec{Model: wire.Model{Name: "add"}, Info: e.Info()})
	if err != nil {
		t.Fatal(err)
	}
	other := cacheSpec(infer.Float32)
	rOther, err := wire.NewCacheRequest(context.Background(), wire.MediaTypeOIP, body, other)
	if err != nil {
		t.Fatal(err)
	}
	for name, tc := range map[string]struct {
		r     *wire.CacheRequest
		value []byte
	}{
		"cut short":     {r, value[:len(value)-1]},
		"trailing byte": {r, append(append([]byte(nil), value...), 0)},
		"empty":         {r, nil},
		"another model": {rOther, value},
	} {
		if got, err := tc.r.Answer(tc.value); err == nil {
			t.Errorf("%s: got answer %q, want an error", name, got)
		}
	}
}
