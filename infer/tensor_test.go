package infer_test

import (
	"reflect"
	"strings"
	"testing"

	"github.com/cluster-serving/cluster-serving/infer"
)

// TestStackSplitEveryDType stacks a 1-row and a 2-row tensor of each dtype
// and splits them back: the Batcher does this with concurrent requests.
func TestStackSplitEveryDType(t *testing.T) {
	for _, dt := range []infer.DType{
		infer.Float32, infer.Float64, infer.Int32, infer.Int64, infer.Uint8, infer.Bool,
		infer.Int8, infer.Int16, infer.Uint16, infer.Uint32, infer.Uint64, infer.Float16, infer.BFloat16,
		infer.String,
	} {
		t.Run(dt.String(), func(t *testing.T) {
			a, b := infer.NewTensor(dt, []int64{1, 2}), infer.NewTensor(dt, []int64{2, 2})
			// Distinct elements: set through reflection, one value per index.
			for k, x := range []infer.Tensor{a, b} {
				v := reflect.ValueOf(x.Data)
				for i := range v.Len() {
					e := v.Index(i)
					switch e.Kind() {
					case reflect.Bool:
						e.SetBool((i+k)%2 == 0)
					case reflect.Float32, reflect.Float64:
						e.SetFloat(float64(10*k + i))
					case reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
						e.SetInt(int64(10*k + i))
					case reflect.String:
						e.SetString(strings.Repeat("é|", 10*k+i))
					default:
						e.SetUint(uint64(10*k + i + 1))
					}
				}
			}
			s, err := infer.Stack([]infer.Tensor{a, b})
			if err != nil || s.DType != dt || !reflect.DeepEqual(s.Shape, []int64{3, 2}) || s.Check() != nil {
				t.Fatalf("Stack: got %+v, %v; want a [3 2] %s tensor", s, err, dt)
			}
			parts, err := infer.Split(s, []int64{1, 2})
			if err != nil || !reflect.DeepEqual(parts, []infer.Tensor{a, b}) {
				t.Errorf("Split: got %+v, %v; want %+v", parts, err, []infer.Tensor{a, b})
			}
		})
	}
}
