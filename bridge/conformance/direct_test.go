package conformance

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime/debug"
	"strings"

	ort "github.com/yalue/onnxruntime_go"
	"google.golang.org/protobuf/encoding/protowire"

	"github.com/cluster-serving/cluster-serving/infer"
)

// direct is what a child reports of one case: whether ONNX Runtime, called
// directly with the case's test data, runs it (NA holds why not), and
// whether cluster-serving's infer loads it (Load holds its error).
type direct struct {
	Case  string     `json:"case"`
	NA    string     `json:"na,omitempty"`    // why the case is not applicable
	Load  string     `json:"load,omitempty"`  // infer.New's error, when ONNX Runtime runs the case
	Panic string     `json:"panic,omitempty"` // a panic in the harness or in infer.New
	Ins   []infer.IO `json:"ins,omitempty"`   // the inputs as infer reads them, for the door runs
}

// runDirect runs the case on ONNX Runtime through onnxruntime_go alone
// (no infer code: its own TensorProto reading, ort's own tensors), then,
// when that works, loads it with infer.New as a worker would.
func runDirect(dir string) (d direct) {
	d.Case = filepath.Base(dir)
	defer func() {
		if p := recover(); p != nil {
			d.Panic = fmt.Sprintf("%v\n%s", p, debug.Stack())
		}
	}()
	model := filepath.Join(dir, "model.onnx")
	ins, outs, err := ort.GetInputOutputInfo(model)
	if err != nil {
		d.NA = "ONNX Runtime cannot load it: " + err.Error()
		return d
	}
	for _, io := range append(append([]ort.InputOutputInfo{}, ins...), outs...) {
		if io.OrtValueType != ort.ONNXTypeTensor {
			d.NA = fmt.Sprintf("input or output is not a tensor: %q is a %v", io.Name, io.OrtValueType)
			return d
		}
	}
	inNames, outNames := ioNames(ins), ioNames(outs)
	sess, err := ort.NewDynamicAdvancedSession(model, inNames, outNames, nil)
	if err != nil {
		d.NA = "ONNX Runtime cannot load it: " + err.Error()
		return d
	}
	defer sess.Destroy()
	values, err := directInputs(dir)
	defer func() {
		for _, v := range values {
			_ = v.Destroy()
		}
	}()
	if err != nil {
		d.NA = "test data is not tensors: " + err.Error()
		return d
	}
	if len(values) != len(inNames) {
		d.NA = fmt.Sprintf("ONNX Runtime cannot run it: the test data has %d inputs, the model %d", len(values), len(inNames))
		return d
	}
	// Rank-0 outputs get a Scalar of their own, as infer does: ort cannot
	// wrap a rank-0 value it allocated itself.
	results := make([]ort.Value, len(outNames))
	for i, o := range outs {
		if len(o.Dimensions) == 0 {
			if results[i], err = emptyScalar(o.DataType); err != nil {
				d.NA = "ONNX Runtime cannot run it: rank-0 output: " + err.Error()
				return d
			}
		}
	}
	if err := sess.Run(values, results); err != nil {
		d.NA = "ONNX Runtime cannot run it: " + err.Error()
		return d
	}
	for _, v := range results {
		if v != nil {
			_ = v.Destroy()
		}
	}
	e, err := infer.New(infer.Config{ModelPath: model})
	if err != nil {
		d.Load = err.Error()
		return d
	}
	d.Ins = e.Info().Inputs
	_ = e.Close()
	return d
}

func ioNames(ios []ort.InputOutputInfo) []string {
	names := make([]string, len(ios))
	for i, io := range ios {
		names[i] = io.Name
	}
	return names
}

// directInputs reads test_data_set_0/input_N.pb as ort values.
func directInputs(dir string) ([]ort.Value, error) {
	var values []ort.Value
	for i := 0; ; i++ {
		b, err := os.ReadFile(filepath.Join(dir, "test_data_set_0", fmt.Sprintf("input_%d.pb", i)))
		if errors.Is(err, os.ErrNotExist) {
			return values, nil
		}
		if err != nil {
			return values, err
		}
		v, err := ortValue(b)
		if err != nil {
			return values, fmt.Errorf("input_%d.pb: %w", i, err)
		}
		values = append(values, v)
	}
}

// ONNX TensorProto fields and data types this reader knows; ONNX
// Runtime's element type enum is ONNX's, so a data_type goes to
// ort.NewCustomDataTensor as it is.
const (
	fieldDims       = 1
	fieldDataType   = 2
	fieldFloatData  = 4
	fieldInt32Data  = 5
	fieldStringData = 6
	fieldInt64Data  = 7
	fieldRawData    = 9
	fieldDoubleData = 10
	fieldUint64Data = 11
	dataTypeString  = 8
)

// ortValue makes an ort value of a serialized TensorProto: raw_data as it
// is (what numpy_helper.from_array writes for numbers), or string_data.
// Typed fields other than raw_data are refused by name: the node cases do
// not use them for inputs.
func ortValue(b []byte) (ort.Value, error) {
	var (
		dims     []int64
		dataType uint64
		raw      []byte
		hasRaw   bool
		strs     []string
		typed    string
	)
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return nil, protowire.ParseError(n)
		}
		b = b[n:]
		switch {
		case num == fieldDims && typ == protowire.VarintType:
			v, m := protowire.ConsumeVarint(b)
			if m < 0 {
				return nil, protowire.ParseError(m)
			}
			dims, b = append(dims, int64(v)), b[m:]
			continue
		case num == fieldDims && typ == protowire.BytesType:
			v, m := protowire.ConsumeBytes(b)
			if m < 0 {
				return nil, protowire.ParseError(m)
			}
			for len(v) > 0 {
				x, k := protowire.ConsumeVarint(v)
				if k < 0 {
					return nil, protowire.ParseError(k)
				}
				dims, v = append(dims, int64(x)), v[k:]
			}
			b = b[m:]
			continue
		case num == fieldDataType && typ == protowire.VarintType:
			v, m := protowire.ConsumeVarint(b)
			if m < 0 {
				return nil, protowire.ParseError(m)
			}
			dataType, b = v, b[m:]
			continue
		case num == fieldRawData && typ == protowire.BytesType:
			v, m := protowire.ConsumeBytes(b)
			if m < 0 {
				return nil, protowire.ParseError(m)
			}
			raw, hasRaw, b = v, true, b[m:]
			continue
		case num == fieldStringData && typ == protowire.BytesType:
			v, m := protowire.ConsumeBytes(b)
			if m < 0 {
				return nil, protowire.ParseError(m)
			}
			strs, b = append(strs, string(v)), b[m:]
			continue
		case num == fieldFloatData || num == fieldInt32Data || num == fieldInt64Data || num == fieldDoubleData || num == fieldUint64Data:
			typed = fmt.Sprintf("field %d", num)
		}
		m := protowire.ConsumeFieldValue(num, typ, b)
		if m < 0 {
			return nil, protowire.ParseError(m)
		}
		b = b[m:]
	}
	shape := ort.NewShape(dims...)
	switch {
	case dataType == dataTypeString:
		t, err := ort.NewStringTensor(shape)
		if err != nil {
			return nil, err
		}
		if err := t.SetContents(strs); err != nil {
			_ = t.Destroy()
			return nil, err
		}
		return t, nil
	case typed != "":
		return nil, fmt.Errorf("TensorProto data in %s, not raw_data: not read by this harness", typed)
	case dataType == 0:
		return nil, errors.New("not a TensorProto (no data_type): a sequence, map or optional")
	}
	if !hasRaw && shape.FlattenedSize() != 0 {
		return nil, errors.New("TensorProto without raw_data")
	}
	return rawValue(dims, ort.TensorElementDataType(dataType), raw)
}

// rawValue makes an ort value of little-endian raw data: typed, so that a
// rank-0 shape becomes an ort.Scalar and a zero-size one an empty tensor
// (ort.NewCustomDataTensor takes neither); float16 and bfloat16, which
// have no Go type, as custom data.
func rawValue(dims []int64, dt ort.TensorElementDataType, raw []byte) (ort.Value, error) {
	switch dt {
	case ort.TensorElementDataTypeFloat:
		return typedValue[float32](dims, raw)
	case ort.TensorElementDataTypeDouble:
		return typedValue[float64](dims, raw)
	case ort.TensorElementDataTypeInt8:
		return typedValue[int8](dims, raw)
	case ort.TensorElementDataTypeInt16:
		return typedValue[int16](dims, raw)
	case ort.TensorElementDataTypeInt32:
		return typedValue[int32](dims, raw)
	case ort.TensorElementDataTypeInt64:
		return typedValue[int64](dims, raw)
	case ort.TensorElementDataTypeUint8, ort.TensorElementDataTypeBool:
		v, err := typedValue[uint8](dims, raw)
		if err != nil || dt == ort.TensorElementDataTypeUint8 {
			return v, err
		}
		_ = v.Destroy()
		if len(raw) == 0 || len(dims) == 0 {
			return nil, errors.New("a rank-0 or empty bool tensor, which onnxruntime_go v1.27 cannot make")
		}
		return ort.NewCustomDataTensor(ort.NewShape(dims...), raw, dt)
	case ort.TensorElementDataTypeUint16:
		return typedValue[uint16](dims, raw)
	case ort.TensorElementDataTypeUint32:
		return typedValue[uint32](dims, raw)
	case ort.TensorElementDataTypeUint64:
		return typedValue[uint64](dims, raw)
	}
	return ort.NewCustomDataTensor(ort.NewShape(dims...), raw, dt)
}

// emptyScalar allocates a rank-0 output of element type dt.
func emptyScalar(dt ort.TensorElementDataType) (ort.Value, error) {
	switch dt {
	case ort.TensorElementDataTypeFloat:
		return ort.NewEmptyScalar[float32]()
	case ort.TensorElementDataTypeDouble:
		return ort.NewEmptyScalar[float64]()
	case ort.TensorElementDataTypeInt8:
		return ort.NewEmptyScalar[int8]()
	case ort.TensorElementDataTypeInt16:
		return ort.NewEmptyScalar[int16]()
	case ort.TensorElementDataTypeInt32:
		return ort.NewEmptyScalar[int32]()
	case ort.TensorElementDataTypeInt64:
		return ort.NewEmptyScalar[int64]()
	case ort.TensorElementDataTypeUint8:
		return ort.NewEmptyScalar[uint8]()
	case ort.TensorElementDataTypeUint16:
		return ort.NewEmptyScalar[uint16]()
	case ort.TensorElementDataTypeUint32:
		return ort.NewEmptyScalar[uint32]()
	case ort.TensorElementDataTypeUint64:
		return ort.NewEmptyScalar[uint64]()
	}
	return nil, fmt.Errorf("element type %v, which onnxruntime_go v1.27 cannot make a scalar of", dt)
}

func typedValue[T ort.TensorData](dims []int64, raw []byte) (ort.Value, error) {
	data := make([]T, len(raw)/binary.Size(*new(T)))
	if _, err := binary.Decode(raw, binary.LittleEndian, data); err != nil && len(data) > 0 {
		return nil, err
	}
	if len(dims) == 0 {
		if len(data) != 1 {
			return nil, fmt.Errorf("a scalar with %d elements", len(data))
		}
		return ort.NewScalar(data[0])
	}
	return ort.NewTensor(ort.NewShape(dims...), data)
}

// naCause counts a not-applicable reason under a short cause.
func naCause(msg string) string {
	for _, c := range [][2]string{
		{"not a tensor", "inputs or outputs are not tensors (sequence, optional, map)"},
		{"NOT_IMPLEMENTED", "ONNX Runtime has no kernel for it"},
		{"Could not find an implementation", "ONNX Runtime has no kernel for it"},
		{"ai.onnx.preview.training", "ONNX Runtime cannot load it: training op"},
		{"cannot load it", "ONNX Runtime cannot load it: other"},
		{"cannot run it", "ONNX Runtime cannot run it"},
	} {
		if strings.Contains(msg, c[0]) {
			return c[1]
		}
	}
	return "other: " + msg
}
