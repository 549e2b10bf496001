package bench

import (
	"encoding/json"
	"reflect"
	"slices"
	"testing"

	"github.com/cluster-serving/cluster-serving/infer"
	"github.com/cluster-serving/cluster-serving/infer/wire"
)

// TestPathsCarryTheSameImage: the JSON, raw (gRPC), OIP binary and Redis
// Arrow bodies of the ResNet part decode, with the mesh's own decoders,
// to the same tensor, so the paths compared do the same work.
func TestPathsCarryTheSameImage(t *testing.T) {
	const h, w = 5, 7
	in := infer.IO{Name: "input", DType: infer.Float32, Shape: []int64{-1, 3, -1, -1}}
	img := imageTensor(h, w)
	want := img.Data.([]float32)

	recs, err := wire.DecodeInstances(imageRequest("input", h, w), []infer.IO{in}, false)
	if err != nil {
		t.Fatal(err)
	}
	if got := recs[0][0]; !slices.Equal(got.Shape, []int64{3, h, w}) || !reflect.DeepEqual(got.Data, want) {
		t.Errorf("JSON: got %v %v, want %v", got.Shape, got.Data, want)
	}

	raw, err := wire.DecodeRaw(wire.AppendRaw(nil, img), infer.Float32, img.Shape, "input")
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(raw.Data, want) {
		t.Errorf("raw: got %v, want %v", raw.Data, want)
	}

	body, headerLen, err := oipBinaryRequest("input", img)
	if err != nil {
		t.Fatal(err)
	}
	var header struct {
		Inputs []struct {
			Name       string
			Shape      []int64
			Datatype   string
			Parameters struct {
				BinaryDataSize int `json:"binary_data_size"`
			}
		}
		Parameters struct {
			BinaryDataOutput bool `json:"binary_data_output"`
		}
	}
	if err := json.Unmarshal(body[:headerLen], &header); err != nil {
		t.Fatal(err)
	}
	if len(header.Inputs) != 1 || header.Inputs[0].Name != "input" || header.Inputs[0].Datatype != "FP32" ||
		!slices.Equal(header.Inputs[0].Shape, img.Shape) || header.Inputs[0].Parameters.BinaryDataSize != len(body)-headerLen ||
		!header.Parameters.BinaryDataOutput {
		t.Errorf("OIP binary header %s", body[:headerLen])
	}
	bin, err := wire.DecodeRaw(body[headerLen:], infer.Float32, img.Shape, "input")
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(bin.Data, want) {
		t.Errorf("OIP binary: got %v, want %v", bin.Data, want)
	}

	arrow, err := arrowRecord("input", img)
	if err != nil {
		t.Fatal(err)
	}
	rec, err := wire.DecodeRedisArrow(arrow, infer.ModelInfo{Inputs: []infer.IO{in}}, false)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(rec[0].Shape, []int64{3, h, w}) || !reflect.DeepEqual(rec[0].Data, want) {
		t.Errorf("Arrow: got %v %v, want %v", rec[0].Shape, rec[0].Data, want)
	}
}

// TestMedian: odd and even counts.
func TestMedian(t *testing.T) {
	for _, tt := range []struct {
		in   []float64
		want float64
	}{{[]float64{3, 1, 2}, 2}, {[]float64{4, 1, 3, 2}, 2.5}, {[]float64{7}, 7}} {
		if got := median(tt.in); got != tt.want {
			t.Errorf("median(%v) = %v, want %v", tt.in, got, tt.want)
		}
	}
}
