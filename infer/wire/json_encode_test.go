package wire_test

import (
	"encoding/json"
	"math"
	"reflect"
	"testing"

	"github.com/cluster-serving/cluster-serving/infer"
	"github.com/cluster-serving/cluster-serving/infer/wire"
)

// decodePredictions undoes the three JSON layers of a /predict answer.
func decodePredictions(t testing.TB, body []byte) []string {
	t.Helper()
	var outer struct {
		Predictions []string `json:"predictions"`
	}
	if err := json.Unmarshal(body, &outer); err != nil {
		t.Fatalf("predictions %s: %v", body, err)
	}
	values := make([]string, len(outer.Predictions))
	for i, p := range outer.Predictions {
		var mid struct {
			Value *string `json:"value"`
		}
		if err := json.Unmarshal([]byte(p), &mid); err != nil || mid.Value == nil {
			t.Fatalf("prediction %d %q: %v", i, p, err)
		}
		values[i] = *mid.Value
	}
	return values
}

func TestEncodePredictions(t *testing.T) {
	nan := float32(math.NaN())
	tests := []struct {
		name    string
		outputs []infer.Tensor
		want    string
	}{
		{"float32", []infer.Tensor{{DType: infer.Float32, Shape: []int64{2, 2}, Data: []float32{1, 0.1, nan, 1e20}}}, `{"data":[1,0.1,null,1e+20],"shape":[2,2]}`},
		{"ints and bools", []infer.Tensor{
			{DType: infer.Int64, Shape: []int64{2}, Data: []int64{-1, 2}},
			{DType: infer.Bool, Shape: []int64{1}, Data: []bool{true}},
		}, `[{"data":[-1,2],"shape":[2]},{"data":[true],"shape":[1]}]`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			v := wire.RecordValue(tt.outputs)
			if v != tt.want {
				t.Errorf("RecordValue: got %s, want %s", v, tt.want)
			}
			got := decodePredictions(t, wire.EncodePredictions([]string{v, "[[4,5.0][3,4.0]]"}))
			if want := []string{tt.want, "[[4,5.0][3,4.0]]"}; !reflect.DeepEqual(got, want) {
				t.Errorf("round trip: got %q, want %q", got, want)
			}
			var check struct {
				Data  []any   `json:"data"`
				Shape []int64 `json:"shape"`
			}
			if len(tt.outputs) == 1 {
				if err := json.Unmarshal([]byte(got[0]), &check); err != nil {
					t.Errorf("value %s is not JSON: %v", got[0], err)
				}
			}
		})
	}
}
