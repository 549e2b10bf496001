package wire_test

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/cluster-serving/cluster-serving/infer"
	"github.com/cluster-serving/cluster-serving/infer/infertest"
	"github.com/cluster-serving/cluster-serving/infer/wire"
)

func TestPredict(t *testing.T) {
	tests := []struct {
		name string
		cfg  infer.Config
		body string
		want []string // decoded value strings
	}{
		{
			name: "single output",
			cfg:  infer.Config{ModelPath: model("add_f32")},
			body: `{"instances":[{"x":[1,2,3,4]},{"x":[0.5,0,0,0]}]}`,
			want: []string{`{"data":[3,5,7,9],"shape":[4]}`, `{"data":[2,1,1,1],"shape":[4]}`},
		},
		{
			name: "two outputs, keys by position",
			cfg:  infer.Config{ModelPath: model("two_io")},
			body: `{"instances":[{"p":[1,2,3],"q":[1,1,2]}]}`,
			want: []string{`[{"data":[2,3,5],"shape":[3]},{"data":[1,2,6],"shape":[3]}]`},
		},
		{
			name: "int64",
			cfg:  infer.Config{ModelPath: model("add_i64")},
			body: `{"instances":[{"x":[1,2,3,40000000000]}]}`,
			want: []string{`{"data":[3,5,7,80000000001],"shape":[4]}`},
		},
		{
			name: "sparse",
			cfg:  infer.Config{ModelPath: model("add_f32")},
			body: `{"instances":[{"x":{"shape":[4],"data":[1],"indices":[[2]]}}]}`,
			want: []string{`{"data":[1,1,3,1],"shape":[4]}`},
		},
		{
			name: "pickTopN",
			cfg:  infer.Config{ModelPath: model("matmul_dyn"), PostProcessing: "pickTopN(1)"},
			body: `{"instances":[{"x":[[0,0,0,8],[8,0,0,0]]}]}`,
			want: []string{`[[6.0,7.0]]`},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := newPredictor(t, tt.cfg)
			body, err := p.Predict(context.Background(), "application/json; charset=utf-8", []byte(tt.body))
			if err != nil {
				t.Fatal(err)
			}
			if got := decodePredictions(t, body); !reflect.DeepEqual(got, tt.want) {
				t.Errorf("Predict: got %q, want %q", got, tt.want)
			}
		})
	}
}

func TestPredictTopN(t *testing.T) {
	e := newEngine(t, infer.Config{ModelPath: model("classifier"), PostProcessing: "topN(2)"})
	p := wire.NewPredictor(e, wire.Model{})
	x := []float32{1, -1, 0.5, 2, 0, 0, 1, -2}
	body := fmt.Sprintf(`{"instances":[{"x":%s}]}`, strings.Join(strings.Fields(fmt.Sprint(x)), ","))
	resp, err := p.Predict(context.Background(), "", []byte(body))
	if err != nil {
		t.Fatal(err)
	}
	out, err := e.Infer(context.Background(), [][]infer.Tensor{{f32([]int64{8}, x...)}})
	if err != nil {
		t.Fatal(err)
	}
	want, err := infer.TopN(out[0][0], 2)
	if err != nil {
		t.Fatal(err)
	}
	got := decodePredictions(t, resp)
	if len(got) != 1 || got[0] != want {
		t.Errorf("Predict topN: got %q, want [%q]", got, want)
	}
	if !strings.HasPrefix(want, "[[") || strings.Count(want, "][") != 1 {
		t.Errorf("topN string %q: want two pairs with no comma between them", want)
	}
}

func TestPredictErrors(t *testing.T) {
	p := newPredictor(t, infer.Config{ModelPath: model("add_f32")})
	tests := []struct {
		name, ct, body, want string
	}{
		{"content type", "application/x-arrow", `{}`, "unsupported content type"},
		{"bad JSON", "application/json", `{"instances":`, "invalid JSON"},
		{"wrong shape", "", `{"instances":[{"x":[1,2,3]}]}`, `instance 0: input "x": shape [3] does not match model [-1 4]`},
		{"string in tensor", "", `{"instances":[{"x":[1,2,"a",4]}]}`, `instance 0: input "x": wrong dtype: a string where a float32 is expected`},
		{"object in tensor", "", `{"instances":[{"x":[1,2,3,{}]}]}`, "invalid JSON"},
		{"unknown input", "", `{"instances":[{"y":[1,2,3,4],"x":[1,2,3,4]}]}`, `input "y": unknown input; model inputs: x`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			wantPredictInputError(t, p, tt.ct, []byte(tt.body), tt.want)
		})
	}
}

// channelMeans returns the per-channel means of a [3,h,w] float32 tensor.
func channelMeans(t infer.Tensor) [3]float64 {
	d := t.Data.([]float32)
	n := len(d) / 3
	var m [3]float64
	for c := range 3 {
		for _, v := range d[c*n : (c+1)*n] {
			m[c] += float64(v)
		}
		m[c] /= float64(n)
	}
	return m
}

// predictionTensor decodes the one {"data":[...],"shape":[...]} of a
// {"predictions":[...]} answer.
func predictionTensor(tb testing.TB, body []byte) ([]float64, []int64) {
	tb.Helper()
	var resp struct{ Predictions []string }
	if err := json.Unmarshal(body, &resp); err != nil || len(resp.Predictions) != 1 {
		tb.Fatalf("answer %s: got %d predictions (%v), want 1", body, len(resp.Predictions), err)
	}
	var v struct{ Value string }
	if err := json.Unmarshal([]byte(resp.Predictions[0]), &v); err != nil {
		tb.Fatalf("prediction %q: %v", resp.Predictions[0], err)
	}
	var ten struct {
		Data  []float64
		Shape []int64
	}
	if err := json.Unmarshal([]byte(v.Value), &ten); err != nil {
		tb.Fatalf("value %q: %v", v.Value, err)
	}
	return ten.Data, ten.Shape
}

func TestPredictJSONImage(t *testing.T) {
	raw := fixture(t, "images/fish1.jpeg")
	tests := []struct {
		name string
		cfg  infer.Config
		pre  infer.ImagePre
	}{
		{"BGR default", infer.Config{ImageResize: [2]int{224, 224}}, infer.ImagePre{Resize: [2]int{224, 224}}},
		{"RGB scaled", infer.Config{ImageResize: [2]int{224, 224}, ImageChannels: "RGB", ImageScale: 1.0 / 255},
			infer.ImagePre{Resize: [2]int{224, 224}, Channels: "RGB", Scale: 1.0 / 255}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.cfg.ModelPath = model("image_mean")
			p := newPredictor(t, tt.cfg)
			img, err := infer.DecodeImage(context.Background(), b64(raw), tt.pre)
			if err != nil {
				t.Fatal(err)
			}
			want := channelMeans(img)
			body := `{"instances":[{"x":"` + string(b64(raw)) + `"}]}`
			out, err := p.Predict(context.Background(), "", []byte(body))
			if err != nil {
				t.Fatalf("Predict: %v", err)
			}
			data, shape := predictionTensor(t, out)
			if !slices.Equal(shape, []int64{3}) {
				t.Fatalf("shape: got %v, want [3]", shape)
			}
			for c := range 3 {
				if math.Abs(data[c]-want[c]) > 1e-3*max(1, want[c]) {
					t.Errorf("channel %d mean: got %v, want %v", c, data[c], want[c])
				}
			}
		})
	}
	t.Run("no resize: shape error", func(t *testing.T) {
		p := newPredictor(t, infer.Config{ModelPath: model("image_mean")})
		body := `{"instances":[{"x":"` + string(b64(raw)) + `"}]}`
		_, err := p.Predict(context.Background(), "", []byte(body))
		if !isInputError(err) || !strings.Contains(err.Error(), "imageResize") {
			t.Fatalf("got %v, want an *InputError suggesting imageResize", err)
		}
	})
	t.Run("string tensor", func(t *testing.T) {
		p := newPredictor(t, infer.Config{ModelPath: model("image_mean")})
		_, err := p.Predict(context.Background(), "", []byte(`{"instances":[{"x":"a|b|c"}]}`))
		if !isInputError(err) || !strings.Contains(err.Error(), "string tensors need a string (BYTES) input") {
			t.Fatalf("got %v, want an *InputError about string tensors", err)
		}
	})
}

// TestPredictOIPLargerThanQueue sends one OIP request of 3,000 rows, more
// than the engine's queue holds (1,024 by default, 100 here), to a model
// that batches at most 32 rows: it is served in chunks, and its answer is
// the rows' answers, in order, as each row alone gets them.
func TestPredictOIPLargerThanQueue(t *testing.T) {
	const rows = 3000
	e := newEngine(t, infer.Config{ModelPath: model("add_f32"), MaxBatch: 32, QueueSize: 100, Parallelism: 2})
	p := wire.NewPredictor(e, wire.Model{Name: "m"})
	x := make([]float32, rows*4)
	for i := range x {
		x[i] = float32(i%1000) / 8
	}
	data, _ := json.Marshal(x)
	body := fmt.Sprintf(`{"inputs":[{"name":"x","datatype":"FP32","shape":[%d,4],"data":%s}]}`, rows, data)
	answer, err := p.Predict(context.Background(), wire.MediaTypeOIP, []byte(body))
	if err != nil {
		t.Fatalf("Predict: %v", err)
	}
	var resp infertest.OIPResponse
	if err := json.Unmarshal(answer, &resp); err != nil {
		t.Fatal(err)
	}
	var got []float32
	if err := json.Unmarshal(resp.Outputs[0].Data, &got); err != nil {
		t.Fatal(err)
	}
	if shape := resp.Outputs[0].Shape; !reflect.DeepEqual(shape, []int64{rows, 4}) {
		t.Fatalf("got shape %v, want [%d 4]", shape, rows)
	}
	for r := range rows {
		row := infer.Tensor{DType: infer.Float32, Shape: []int64{4}, Data: x[r*4 : r*4+4]}
		one, err := e.Infer(context.Background(), [][]infer.Tensor{{row}})
		if err != nil {
			t.Fatalf("row %d alone: %v", r, err)
		}
		if want := one[0][0].Data.([]float32); !reflect.DeepEqual(got[r*4:r*4+4], want) {
			t.Fatalf("row %d: got %v, want %v (alone)", r, got[r*4:r*4+4], want)
		}
	}
}
