package wire_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"image/jpeg"
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/cluster-serving/cluster-serving/infer"
	"github.com/cluster-serving/cluster-serving/infer/infertest"
	"github.com/cluster-serving/cluster-serving/infer/wire"
)

func ioInfo(ins ...infer.IO) infer.ModelInfo { return infer.ModelInfo{Inputs: ins} }

func TestDecodeRedisArrowFixtures(t *testing.T) {
	t.Run("ndarray-128 old framing", func(t *testing.T) {
		body := fixture(t, "payloads/ndarray-128-base64")
		rec, err := wire.DecodeRedisArrow(body, ioInfo(infer.IO{Name: "x", DType: infer.Float32, Shape: []int64{-1, 128}}), false)
		if err != nil {
			t.Fatalf("DecodeRedisArrow: %v", err)
		}
		got := rec[0]
		if !slices.Equal(got.Shape, []int64{128}) {
			t.Fatalf("shape: got %v, want [128]", got.Shape)
		}
		data := got.Data.([]float32)
		for i, want := range map[int]float32{0: 6, 1: 87, 2: 15, 31: 97, 126: 83, 127: 97} {
			if data[i] != want {
				t.Errorf("data[%d]: got %v, want %v", i, data[i], want)
			}
		}
	})
	t.Run("sparse old framing", func(t *testing.T) {
		body := fixture(t, "payloads/arrowBytes")
		rec, err := wire.DecodeRedisArrow(body, ioInfo(infer.IO{Name: "my-img", DType: infer.Float32, Shape: []int64{-1, 100, 10000}}), false)
		if err != nil {
			t.Fatalf("DecodeRedisArrow: %v", err)
		}
		got := rec[0]
		if !slices.Equal(got.Shape, []int64{100, 10000}) {
			t.Fatalf("shape: got %v, want [100 10000]", got.Shape)
		}
		data := got.Data.([]float32)
		want := map[int]float32{1*10000 + 1: 3, 2*10000 + 2: 4, 2*10000 + 3: 5}
		nonzero := 0
		for i, v := range data {
			if v != 0 {
				nonzero++
				if want[i] != v {
					t.Errorf("data[%d]: got %v, want %v", i, v, want[i])
				}
			}
		}
		if nonzero != len(want) {
			t.Errorf("non-zero values: got %d, want %d", nonzero, len(want))
		}
	})
	t.Run("image modern framing", func(t *testing.T) {
		body := fixture(t, "payloads/image-3_224_224-arrow-base64")
		rec, err := wire.DecodeRedisArrow(body, ioInfo(infer.IO{Name: "image", DType: infer.Float32, Shape: []int64{-1, 3, 224, 224}}), false)
		if err != nil {
			t.Fatalf("DecodeRedisArrow: %v", err)
		}
		got := rec[0]
		if !slices.Equal(got.Shape, []int64{3, 224, 224}) {
			t.Fatalf("shape: got %v, want [3 224 224]", got.Shape)
		}
		ref, err := jpeg.Decode(bytes.NewReader(fixtureJPEG(t)))
		if err != nil {
			t.Fatal(err)
		}
		data := got.Data.([]float32)
		for _, p := range [][2]int{{0, 0}, {100, 37}, {223, 223}} {
			want := bgrAt(ref, p[0], p[1])
			for c := range 3 {
				if v := data[c*224*224+p[1]*224+p[0]]; v != want[c] {
					t.Errorf("pixel %v channel %d: got %v, want %v (BGR, 0-255)", p, c, v, want[c])
				}
			}
		}
	})
}

// fixtureJPEG reads the JPEG inside the image fixture with arrow-go.
func fixtureJPEG(tb testing.TB) []byte {
	tb.Helper()
	raw, err := base64.StdEncoding.DecodeString(strings.TrimSpace(string(fixture(tb, "payloads/image-3_224_224-arrow-base64"))))
	if err != nil {
		tb.Fatal(err)
	}
	r, err := ipc.NewReader(bytes.NewReader(raw))
	if err != nil {
		tb.Fatal(err)
	}
	defer r.Release()
	if !r.Next() {
		tb.Fatalf("no batch: %v", r.Err())
	}
	img, err := base64.StdEncoding.DecodeString(r.RecordBatch().Column(0).(*array.String).Value(0))
	if err != nil {
		tb.Fatal(err)
	}
	return img
}

// arrowB64 writes cols (one record batch) as a base64 Arrow stream (see
// wire.EncodeArrowRecord).
func arrowB64(tb testing.TB, names []string, cols ...arrow.Array) []byte {
	tb.Helper()
	b, err := wire.EncodeArrowRecord(names, cols...)
	if err != nil {
		tb.Fatal(err)
	}
	return b
}

func utf8Col(v string) arrow.Array {
	b := array.NewStringBuilder(memory.DefaultAllocator)
	defer b.Release()
	b.Append(v)
	return b.NewArray()
}

func TestDecodeRedisArrowErrors(t *testing.T) {
	nd := fixture(t, "payloads/ndarray-128-base64")
	raw, _ := base64.StdEncoding.DecodeString(strings.TrimSpace(string(nd)))
	i64 := array.NewInt64Builder(memory.DefaultAllocator)
	i64.AppendValues([]int64{1, 2}, nil)
	intCol := i64.NewArray()
	defer intCol.Release()
	vec := infer.IO{Name: "x", DType: infer.Float32, Shape: []int64{-1, 128}}
	img := infer.IO{Name: "x", DType: infer.Float32, Shape: []int64{-1, 3, 224, 224}}
	tests := []struct {
		name string
		body []byte
		info infer.ModelInfo
		want string
	}{
		{"corrupt base64", []byte("not base64 at all!"), ioInfo(vec), "not base64"},
		{"not arrow", b64([]byte("hello world, not arrow")), ioInfo(vec), "Arrow"},
		{"truncated arrow", b64(raw[:len(raw)/2]), ioInfo(vec), "Arrow"},
		{"empty", nil, ioInfo(vec), "Arrow"},
		{"wrong shape", nd, ioInfo(infer.IO{Name: "x", DType: infer.Float32, Shape: []int64{-1, 64}}), "shape [128] does not match"},
		{"column count", nd, ioInfo(vec, vec), "got 1 columns"},
		{"unknown column type", arrowB64(t, []string{"x"}, intCol), ioInfo(vec), "unsupported column type int64"},
		{"undecodable image", arrowB64(t, []string{"x"}, utf8Col("aGVsbG8=")), ioInfo(img), "undecodable image"},
		{"string tensor", arrowB64(t, []string{"x"}, utf8Col("a|b")), ioInfo(img), "string tensors need a string (BYTES) input"},
		{"image for a vector", arrowB64(t, []string{"x"}, utf8Col("aGVsbG8=")), ioInfo(vec), "not an image"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := wire.DecodeRedisArrow(tt.body, tt.info, false)
			if !isInputError(err) || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("got error %v, want an *InputError containing %q", err, tt.want)
			}
		})
	}
}

// readRedisResult reads a result value the way the original Python client
// does: per batch, column 0 is the data and the non-null, non-zero entries
// of column 1 are the shape.
func readRedisResult(tb testing.TB, value []byte) (data [][]float32, shapes [][]int64) {
	tb.Helper()
	raw, err := base64.StdEncoding.DecodeString(string(value))
	if err != nil {
		tb.Fatalf("value %.40q is not base64: %v", value, err)
	}
	if !bytes.HasPrefix(raw, []byte{0xff, 0xff, 0xff, 0xff}) {
		tb.Errorf("value does not start with the continuation marker (modern framing)")
	}
	r, err := ipc.NewReader(bytes.NewReader(raw))
	if err != nil {
		tb.Fatalf("ipc.NewReader: %v", err)
	}
	defer r.Release()
	if got := r.Schema().String(); !strings.Contains(got, "data: type=float32") || !strings.Contains(got, "shape: type=int32") {
		tb.Errorf("schema: got %s, want data: float32, shape: int32", got)
	}
	for r.Next() {
		rec := r.RecordBatch()
		d := rec.Column(0).(*array.Float32)
		s := rec.Column(1).(*array.Int32)
		var vals []float32
		for i := range d.Len() {
			if d.IsValid(i) {
				vals = append(vals, d.Value(i))
			}
		}
		var shape []int64
		for i := range s.Len() {
			if s.IsValid(i) && s.Value(i) != 0 {
				shape = append(shape, int64(s.Value(i)))
			}
		}
		data, shapes = append(data, vals), append(shapes, shape)
	}
	if err := r.Err(); err != nil {
		tb.Fatalf("read batches: %v", err)
	}
	return data, shapes
}

func TestEncodeRedisArrowRoundTrip(t *testing.T) {
	outs := []infer.Tensor{
		{DType: infer.Float32, Shape: []int64{2, 3}, Data: []float32{1, 2, 3, 4, 5, 6.5}},
		{DType: infer.Int64, Shape: []int64{4}, Data: []int64{7, 8, 9, -10}},
		{DType: infer.Float64, Shape: []int64{1, 1, 1}, Data: []float64{0.25}},
	}
	value, err := wire.EncodeRedisArrow(outs)
	if err != nil {
		t.Fatalf("EncodeRedisArrow: %v", err)
	}
	data, shapes := readRedisResult(t, value)
	want := []struct {
		data  []float32
		shape []int64
	}{
		{[]float32{1, 2, 3, 4, 5, 6.5}, []int64{2, 3}},
		{[]float32{7, 8, 9, -10}, []int64{4}},
		{[]float32{0.25}, []int64{1, 1, 1}},
	}
	if len(data) != len(want) {
		t.Fatalf("batches: got %d, want %d", len(data), len(want))
	}
	for i, w := range want {
		if !slices.Equal(data[i], w.data) || !slices.Equal(shapes[i], w.shape) {
			t.Errorf("batch %d: got data %v shape %v, want %v %v", i, data[i], shapes[i], w.data, w.shape)
		}
	}
}

func TestPredictRedis(t *testing.T) {
	t.Run("ndarray fixture", func(t *testing.T) {
		body := fixture(t, "payloads/ndarray-128-base64")
		p := newPredictor(t, infer.Config{ModelPath: model("add_f32_128")})
		out, err := p.Predict(context.Background(), wire.MediaTypeRedisArrow, body)
		if err != nil {
			t.Fatalf("Predict: %v", err)
		}
		data, shapes := readRedisResult(t, out)
		if len(data) != 1 || !slices.Equal(shapes[0], []int64{128}) || len(data[0]) != 128 {
			t.Fatalf("got %d batches, shape %v, want 1 batch of shape [128]", len(data), shapes)
		}
		if data[0][0] != 13 || data[0][127] != 195 {
			t.Errorf("data[0], data[127]: got %v, %v, want 13, 195 (2x+1)", data[0][0], data[0][127])
		}
	})
	t.Run("topN string", func(t *testing.T) {
		body := fixture(t, "payloads/ndarray-128-base64")
		p := newPredictor(t, infer.Config{ModelPath: model("add_f32_128"), PostProcessing: "topN(1)"})
		out, err := p.Predict(context.Background(), wire.MediaTypeRedisArrow, body)
		if err != nil {
			t.Fatalf("Predict: %v", err)
		}
		if got := string(out); !strings.HasPrefix(got, "[[") || !strings.HasSuffix(got, ",201.0]]") {
			t.Errorf("got %q, want [[<index>,201.0]]", got)
		}
	})
	// The image model outputs per-channel means: BGR order and 0-255
	// values are checked against Go's own decoding of the JPEG.
	ref, err := jpeg.Decode(bytes.NewReader(fixtureJPEG(t)))
	if err != nil {
		t.Fatal(err)
	}
	var want [3]float64
	for y := range 224 {
		for x := range 224 {
			p := bgrAt(ref, x, y)
			for c := range 3 {
				want[c] += float64(p[c]) / (224 * 224)
			}
		}
	}
	jsonBody, _ := json.Marshal(map[string]any{"instances": []any{map[string]string{"x": base64.StdEncoding.EncodeToString(fixtureJPEG(t))}}})
	tests := []struct {
		name, mediaType string
		body            []byte
	}{
		{"image arrow", wire.MediaTypeRedisArrow, fixture(t, "payloads/image-3_224_224-arrow-base64")},
		{"image json", wire.MediaTypeRedisJSON, jsonBody},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := newPredictor(t, infer.Config{ModelPath: model("image_mean")})
			out, err := p.Predict(context.Background(), tt.mediaType, tt.body)
			if err != nil {
				t.Fatalf("Predict: %v", err)
			}
			data, shapes := readRedisResult(t, out)
			if len(data) != 1 || !slices.Equal(shapes[0], []int64{3}) {
				t.Fatalf("got %d batches, shapes %v, want 1 of shape [3]", len(data), shapes)
			}
			for c := range 3 {
				if math.Abs(float64(data[0][c])-want[c]) > 1e-3 {
					t.Errorf("channel %d mean: got %v, want %v (BGR, 0-255)", c, data[0][c], want[c])
				}
			}
		})
	}
	t.Run("two json instances", func(t *testing.T) {
		p := newPredictor(t, infer.Config{ModelPath: model("add_f32_128")})
		row := "[" + strings.Repeat("1,", 127) + "1]"
		_, err := p.Predict(context.Background(), wire.MediaTypeRedisJSON, []byte(`{"instances":[{"x":`+row+`},{"x":`+row+`}]}`))
		if !isInputError(err) {
			t.Fatalf("got %v, want an *InputError", err)
		}
	})
}

// TestDecodeDIENJSON decodes the DIEN serde=stream fixture against inputs
// shaped like it (int64, batch dim dynamic).
func TestDecodeDIENJSON(t *testing.T) {
	body := fixture(t, "payloads/dien_json_str.json")
	var doc struct{ Instances []map[string]any }
	if err := json.Unmarshal(body, &doc); err != nil || len(doc.Instances) != 1 {
		t.Fatalf("fixture: %v, %d instances", err, len(doc.Instances))
	}
	var ins []infer.IO
	wantShapes := map[string][]int64{}
	for name, v := range doc.Instances[0] {
		var shape []int64
		for {
			a, ok := v.([]any)
			if !ok {
				break
			}
			shape = append(shape, int64(len(a)))
			if len(a) == 0 {
				break
			}
			v = a[0]
		}
		wantShapes[name] = shape
		ins = append(ins, infer.IO{Name: name, DType: infer.Int64, Shape: append([]int64{-1}, shape...)})
	}
	recs, err := wire.DecodeInstances(body, ins, false)
	if err != nil {
		t.Fatalf("DecodeInstances: %v", err)
	}
	if len(recs) != 1 {
		t.Fatalf("records: got %d, want 1", len(recs))
	}
	for j, in := range ins {
		if got := recs[0][j].Shape; !slices.Equal(got, wantShapes[in.Name]) {
			t.Errorf("input %s: got shape %v, want %v", in.Name, got, wantShapes[in.Name])
		}
	}
	if a := recs[0][indexOf(ins, "a")].Data.([]int64); len(a) != 2 || a[0] != 8440 {
		t.Errorf("input a: got %v, want [8440 8440]", a)
	}
}

func indexOf(ins []infer.IO, name string) int {
	for i, in := range ins {
		if in.Name == name {
			return i
		}
	}
	return -1
}

func FuzzDecodeRedisArrow(f *testing.F) {
	for _, name := range []string{"ndarray-128-base64", "arrowBytes", "image-3_224_224-arrow-base64"} {
		f.Add(fixture(f, "payloads/"+name))
	}
	f.Add([]byte(""))
	f.Add([]byte("/////w=="))
	// scalars, zero-size dims, data that does not fill the shape
	for _, tc := range []struct {
		data  []float32
		shape []int32
	}{{[]float32{1}, []int32{}}, {[]float32{}, []int32{}}, {[]float32{}, []int32{0, 3}}, {[]float32{1, 2}, []int32{2, 3}}, {[]float32{1, 2, 3}, []int32{3, 0}}} {
		f.Add(arrowB64(f, []string{"t"}, wire.DenseTensorColumn(tc.data, tc.shape)))
	}
	infos := []infer.ModelInfo{
		ioInfo(infer.IO{Name: "t", DType: infer.Float32, Shape: []int64{-1, -1}}),
		ioInfo(infer.IO{Name: "my-img", DType: infer.Int64, Shape: []int64{-1, -1, -1}}),
		ioInfo(infer.IO{Name: "x", DType: infer.Uint8, Shape: []int64{-1, 3, -1, -1}}),
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		for _, info := range infos {
			for _, batched := range []bool{false, true} {
				rec, err := wire.DecodeRedisArrow(body, info, batched)
				if err != nil {
					if !isInputError(err) {
						t.Fatalf("got %T %v, want an *InputError", err, err)
					}
					continue
				}
				if len(rec) != 1 || rec[0].DType != info.Inputs[0].DType {
					t.Fatalf("got %d tensors of %v, want 1 of %v", len(rec), rec[0].DType, info.Inputs[0].DType)
				}
			}
		}
	})
}

// BenchmarkDecodeRedisArrow decodes a 3×224×224 float32 image as the
// original's Python client sends it: base64 of an Arrow stream holding a
// tensor struct (785 KB), the Redis door's binary path.
func BenchmarkDecodeRedisArrow(b *testing.B) {
	data := make([]float32, 3*224*224)
	for i := range data {
		data[i] = float32(i%255) / 255
	}
	payload := arrowB64(b, []string{"t"}, wire.DenseTensorColumn(data, []int32{3, 224, 224}))
	info := ioInfo(infer.IO{Name: "t", DType: infer.Float32, Shape: []int64{-1, 3, 224, 224}})
	b.SetBytes(int64(len(payload)))
	b.ReportAllocs()
	for b.Loop() {
		rec, err := wire.DecodeRedisArrow(payload, info, false)
		if err != nil {
			b.Fatal(err)
		}
		if len(rec[0].Data.([]float32)) != len(data) {
			b.Fatal("short tensor")
		}
	}
}

// TestPredictRedisEncrypted sends the fixture JPEG encrypted as the
// original's Python side did (recordEncrypted) in both Redis formats and
// checks the answer is the plain record's; a wrong key, a plain image and
// a tampered one are bad records (*InputError), and the tensors of an
// encrypted job stay plain.
func TestPredictRedisEncrypted(t *testing.T) {
	const secret, salt = "s3cr3t-of-the-test", "salt-of-the-test"
	jpg := fixtureJPEG(t)
	enc := infertest.EncryptLikeOriginal(t, "record", secret, salt, jpg)
	wrong := infertest.EncryptLikeOriginal(t, "record", "another-secret", salt, jpg)
	raw, _ := base64.StdEncoding.DecodeString(enc)
	raw[len(raw)-1] ^= 1
	tampered := base64.StdEncoding.EncodeToString(raw)
	arrowOf := func(img string) []byte { return arrowB64(t, []string{"x"}, utf8Col(img)) }
	jsonOf := func(img string) []byte {
		b, _ := json.Marshal(map[string]any{"instances": []any{map[string]string{"x": img}}})
		return b
	}
	key, err := infer.DeriveKey(secret, salt)
	if err != nil {
		t.Fatal(err)
	}
	plain := newPredictor(t, infer.Config{ModelPath: model("image_mean")})
	want, err := plain.Predict(context.Background(), wire.MediaTypeRedisArrow, arrowOf(base64.StdEncoding.EncodeToString(jpg)))
	if err != nil {
		t.Fatal(err)
	}
	p := newPredictor(t, infer.Config{ModelPath: model("image_mean"), RecordKey: key})
	for _, f := range []struct {
		mediaType string
		body      func(string) []byte
	}{{wire.MediaTypeRedisArrow, arrowOf}, {wire.MediaTypeRedisJSON, jsonOf}} {
		t.Run(f.mediaType, func(t *testing.T) {
			got, err := p.Predict(context.Background(), f.mediaType, f.body(enc))
			if err != nil {
				t.Fatalf("Predict: %v", err)
			}
			if !slices.Equal(got, want) {
				t.Errorf("got %.60q, want the plain record's %.60q", got, want)
			}
			for name, img := range map[string]string{"wrong key": wrong, "tampered": tampered, "plain image": base64.StdEncoding.EncodeToString(jpg)} {
				_, err := p.Predict(context.Background(), f.mediaType, f.body(img))
				if !isInputError(err) || !errors.Is(err, infer.ErrDecrypt) && !strings.Contains(err.Error(), "decrypt") {
					t.Errorf("%s: got %v, want an *InputError that it does not decrypt", name, err)
				}
				if err != nil && strings.Contains(err.Error(), secret) {
					t.Errorf("%s: the error shows the secret: %v", name, err)
				}
			}
		})
	}
	t.Run("tensors stay plain", func(t *testing.T) {
		p := newPredictor(t, infer.Config{ModelPath: model("add_f32_128"), RecordKey: key})
		if _, err := p.Predict(context.Background(), wire.MediaTypeRedisArrow, fixture(t, "payloads/ndarray-128-base64")); err != nil {
			t.Errorf("a tensor record of an encrypted job: got %v, want an answer", err)
		}
	})
	t.Run("other doors stay plain", func(t *testing.T) {
		_, err := p.Predict(context.Background(), wire.MediaTypeJSON, jsonOf(base64.StdEncoding.EncodeToString(jpg)))
		if err != nil {
			t.Errorf("a plain JSON image over HTTP: got %v, want an answer", err)
		}
	})
}
