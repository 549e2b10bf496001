package wire

import (
	"bytes"
	"encoding/json"
	"slices"

	"github.com/cluster-serving/cluster-serving/infer"
)

// Example requests of a model (`cluster-serving predict -fill` and the
// banner of `start`): one instance of its inputs with every value the
// same.

// FillValue is what -fill sets: 0.5 when every input is a float, else 1,
// which every dtype takes (integers, uint8, bool).
func FillValue(info infer.ModelInfo) string {
	for _, in := range info.Inputs {
		if in.DType != infer.Float32 && in.DType != infer.Float64 {
			return "1"
		}
	}
	return "0.5"
}

// FillShape is the instance shape of a model's single input, dynamic
// dimensions set to 1 (what FillRequest uses without an override), for a
// reader to see which numbers to change. None for several inputs: an
// override would set all of them.
func FillShape(info infer.ModelInfo, batched bool) []int64 {
	if len(info.Inputs) != 1 {
		return nil
	}
	shape := slices.Clone(InstanceShape(info.Inputs[0], batched))
	for i, d := range shape {
		if d < 0 {
			shape[i] = 1
		}
	}
	return shape
}

// FillRequest is the JSON instances request of one instance of info's
// inputs with every value set to value (as a JSON string for a string input): each input's
// shape without its batch dimension (unless batched), dynamic dimensions
// set to 1, or override for every input.
func FillRequest(info infer.ModelInfo, batched bool, value string, override []int64) []byte {
	var b bytes.Buffer
	b.WriteString(`{"instances":[{`)
	for i, in := range info.Inputs {
		if i > 0 {
			b.WriteByte(',')
		}
		name, _ := json.Marshal(in.Name)
		b.Write(name)
		b.WriteByte(':')
		shape := InstanceShape(in, batched)
		if override != nil {
			shape = override
		}
		v := value
		if in.DType == infer.String {
			q, _ := json.Marshal(value)
			v = string(q)
		}
		writeFilled(&b, shape, v)
	}
	b.WriteString(`}]}`)
	return b.Bytes()
}

// InstanceShape is in's shape as one instance carries it: without the
// batch dimension (unless batched); writeFilled makes dynamic ones 1.
func InstanceShape(in infer.IO, batched bool) []int64 {
	if !batched && len(in.Shape) > 0 {
		return in.Shape[1:]
	}
	return in.Shape
}

// writeFilled writes shape's nested arrays of value, a dynamic
// dimension (negative) as 1.
func writeFilled(b *bytes.Buffer, shape []int64, value string) {
	if len(shape) == 0 {
		b.WriteString(value)
		return
	}
	n := max(shape[0], 1)
	b.WriteByte('[')
	for i := int64(0); i < n; i++ {
		if i > 0 {
			b.WriteByte(',')
		}
		writeFilled(b, shape[1:], value)
	}
	b.WriteByte(']')
}
