package conformance

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime/debug"

	ort "github.com/yalue/onnxruntime_go"
	"google.golang.org/protobuf/encoding/protowire"

	"github.com/cluster-serving/cluster-serving/infer"
	"github.com/cluster-serving/cluster-serving/infer/infertest/onnxnode"
)

// direct is what a child reports of one case: whether ONNX Runtime, called
// directly with the case's test data, runs it (NA holds why not) and
// matches the expected outputs (Differs holds how not), and whether
// cluster-serving's infer loads it (Load holds its error).
type direct struct {
	Case    string     `json:"case"`
	NA      string     `json:"na,omitempty"`      // why the case is not applicable
	Differs string     `json:"differs,omitempty"` // how ONNX Runtime's own outputs differ from the expected ones
	Load    string     `json:"load,omitempty"`    // infer.New's error, when ONNX Runtime runs the case
	Panic   string     `json:"panic,omitempty"`   // a panic in the harness or in infer.New
	Ins     []infer.IO `json:"ins,omitempty"`     // the inputs as infer reads them, for the door runs
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
	if msg, na := runORT(dir, model, ins, outs); na {
		d.NA = msg
		return d
	} else {
		d.Differs = msg
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

// runORT runs the model on the case's inputs. It returns why the case is
// not applicable (na true), or how ONNX Runtime's outputs differ from the
// expected ones ("" when they match).
func runORT(dir, model string, ins, outs []ort.InputOutputInfo) (msg string, na bool) {
	sess, err := ort.NewDynamicAdvancedSession(model, ioNames(ins), ioNames(outs), nil)
	if err != nil {
		return "ONNX Runtime cannot load it: " + err.Error(), true
	}
	defer sess.Destroy()
	if len(ins) == 0 {
		// onnxruntime_go cannot Run a session without inputs (it indexes
		// the first); the case stays applicable, the doors decide.
		return "", false
	}
	values, err := directValues(dir, "input", ins)
	defer destroy(values)
	if err != nil {
		return "test data is not tensors: " + err.Error(), true
	}
	if len(values) != len(ins) {
		return fmt.Sprintf("ONNX Runtime cannot run it: the test data has %d inputs, the model %d", len(values), len(ins)), true
	}
	// Rank-0 outputs get a Scalar of their own and float16 or bfloat16
	// ones a buffer of the expected shape, as infer does: onnxruntime_go
	// can wrap neither when ONNX Runtime allocates it.
	results := make([]ort.Value, len(outs))
	defer destroy(results)
	expected, err := directShapes(dir)
	if err != nil {
		return "test data is not tensors: " + err.Error(), true
	}
	for i, o := range outs {
		switch {
		case len(o.Dimensions) == 0:
			results[i], err = emptyScalar(o.DataType)
		case (o.DataType == ort.TensorElementDataTypeFloat16 || o.DataType == ort.TensorElementDataTypeBFloat16) && i < len(expected):
			shape := ort.NewShape(expected[i]...)
			results[i], err = ort.NewCustomDataTensor(shape, make([]byte, 2*max(1, shape.FlattenedSize())), o.DataType)
		}
		if err != nil {
			return "ONNX Runtime cannot run it: output " + o.Name + ": " + err.Error(), true
		}
	}
	if err := sess.Run(values, results); err != nil {
		return "ONNX Runtime cannot run it: " + err.Error(), true
	}
	got := make([]onnxnode.Output, len(outs))
	for i, v := range results {
		got[i] = ortOutput(outs[i], v)
	}
	return onnxnode.Compare(dir, got), false
}

func destroy(vs []ort.Value) {
	for _, v := range vs {
		if v != nil {
			_ = v.Destroy()
		}
	}
}

func ioNames(ios []ort.InputOutputInfo) []string {
	names := make([]string, len(ios))
	for i, io := range ios {
		names[i] = io.Name
	}
	return names
}

// directValues reads test_data_set_0/<kind>_N.pb as ort values; the model
// inputs ios say when a uint16 file holds bfloat16 bits (onnx 1.12 writes
// them so, as numpy has no bfloat16).
func directValues(dir, kind string, ios []ort.InputOutputInfo) ([]ort.Value, error) {
	var values []ort.Value
	for i := 0; ; i++ {
		b, err := os.ReadFile(filepath.Join(dir, "test_data_set_0", fmt.Sprintf("%s_%d.pb", kind, i)))
		if errors.Is(err, os.ErrNotExist) {
			return values, nil
		}
		if err != nil {
			return values, err
		}
		p, err := parseTensor(b)
		if err == nil && p.dataType == uint64(ort.TensorElementDataTypeUint16) && i < len(ios) && ios[i].DataType == ort.TensorElementDataTypeBFloat16 {
			p.dataType = uint64(ort.TensorElementDataTypeBFloat16)
		}
		var v ort.Value
		if err == nil {
			v, err = p.value()
		}
		if err != nil {
			return values, fmt.Errorf("%s_%d.pb: %w", kind, i, err)
		}
		values = append(values, v)
	}
}

// directShapes reads the shapes of test_data_set_0/output_N.pb.
func directShapes(dir string) ([][]int64, error) {
	var shapes [][]int64
	for i := 0; ; i++ {
		b, err := os.ReadFile(filepath.Join(dir, "test_data_set_0", fmt.Sprintf("output_%d.pb", i)))
		if errors.Is(err, os.ErrNotExist) {
			return shapes, nil
		}
		if err != nil {
			return nil, err
		}
		p, err := parseTensor(b)
		if err != nil {
			return nil, fmt.Errorf("output_%d.pb: %w", i, err)
		}
		shapes = append(shapes, p.dims)
	}
}

// ortOutput reads an output value as onnxnode compares it.
func ortOutput(io ort.InputOutputInfo, v ort.Value) onnxnode.Output {
	o := onnxnode.Output{Name: io.Name}
	if v == nil {
		return o
	}
	o.Shape = []int64(v.GetShape())
	var t infer.Tensor
	switch x := v.(type) {
	case *ort.StringTensor:
		o.Datatype = "BYTES"
		o.Strings, _ = x.GetContents()
		return o
	case *ort.CustomDataTensor:
		raw := x.GetData()
		h := make([]uint16, len(raw)/2)
		_, _ = binary.Decode(raw, binary.LittleEndian, h)
		if io.DataType == ort.TensorElementDataTypeFloat16 {
			t = infer.Tensor{DType: infer.Float16, Data: asHalf[infer.F16](h)}
		} else {
			t = infer.Tensor{DType: infer.BFloat16, Data: asHalf[infer.BF16](h)}
		}
	default:
		t = tensorOf(v)
	}
	o.Values, _ = infer.Float64s(t)
	return o
}

// asHalf reads float16 or bfloat16 bits as infer's type of them.
func asHalf[T infer.F16 | infer.BF16](bits []uint16) []T {
	out := make([]T, len(bits))
	for i, b := range bits {
		out[i] = T(b)
	}
	return out
}

// tensorOf reads an ort tensor or scalar of a Go element type as an
// infer.Tensor, whose Float64s the comparison uses.
func tensorOf(v ort.Value) infer.Tensor {
	for _, e := range elementTypes {
		if t, ok := e.read(v); ok {
			return t
		}
	}
	return infer.Tensor{}
}

// ONNX TensorProto fields this reader knows. ONNX Runtime's element type
// enum is ONNX's, so a data_type goes to ort as it is.
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
)

// tensorProto is what this reader takes of a serialized TensorProto.
type tensorProto struct {
	dims     []int64
	dataType uint64
	raw      []byte
	hasRaw   bool
	strs     []string
	typed    string // a typed data field other than raw_data, which is refused
}

func parseTensor(b []byte) (*tensorProto, error) {
	p := &tensorProto{}
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return nil, protowire.ParseError(n)
		}
		b = b[n:]
		var m int
		switch {
		case num == fieldDims && typ == protowire.VarintType:
			var v uint64
			v, m = protowire.ConsumeVarint(b)
			p.dims = append(p.dims, int64(v))
		case num == fieldDims && typ == protowire.BytesType:
			var v []byte
			v, m = protowire.ConsumeBytes(b)
			for len(v) > 0 {
				x, k := protowire.ConsumeVarint(v)
				if k < 0 {
					return nil, protowire.ParseError(k)
				}
				p.dims, v = append(p.dims, int64(x)), v[k:]
			}
		case num == fieldDataType && typ == protowire.VarintType:
			p.dataType, m = protowire.ConsumeVarint(b)
		case num == fieldRawData && typ == protowire.BytesType:
			p.raw, m = protowire.ConsumeBytes(b)
			p.hasRaw = true
		case num == fieldStringData && typ == protowire.BytesType:
			var v []byte
			v, m = protowire.ConsumeBytes(b)
			p.strs = append(p.strs, string(v))
		default:
			if num == fieldFloatData || num == fieldInt32Data || num == fieldInt64Data || num == fieldDoubleData || num == fieldUint64Data {
				p.typed = fmt.Sprintf("field %d", num)
			}
			m = protowire.ConsumeFieldValue(num, typ, b)
		}
		if m < 0 {
			return nil, protowire.ParseError(m)
		}
		b = b[m:]
	}
	if p.dataType == 0 {
		return nil, errors.New("not a TensorProto (no data_type): a sequence, map or optional")
	}
	return p, nil
}

// value makes the ort value: raw_data as it is (what
// numpy_helper.from_array writes for numbers), or string_data. Typed
// fields other than raw_data are refused by name: the node cases do not
// use them for inputs.
func (p *tensorProto) value() (ort.Value, error) {
	switch {
	case p.dataType == uint64(ort.TensorElementDataTypeString):
		t, err := ort.NewStringTensor(ort.NewShape(p.dims...))
		if err != nil {
			return nil, err
		}
		if err := t.SetContents(p.strs); err != nil {
			_ = t.Destroy()
			return nil, err
		}
		return t, nil
	case p.typed != "":
		return nil, fmt.Errorf("TensorProto data in %s, not raw_data: not read by this harness", p.typed)
	case !p.hasRaw && ort.NewShape(p.dims...).FlattenedSize() != 0:
		return nil, errors.New("TensorProto without raw_data")
	}
	return rawValue(p.dims, ort.TensorElementDataType(p.dataType), p.raw)
}

// rawValue makes an ort value of little-endian raw data: typed, so that a
// rank-0 shape becomes an ort.Scalar and a zero-size one an empty tensor
// (ort.NewCustomDataTensor takes neither); float16 and bfloat16, which
// have no Go type, as custom data.
func rawValue(dims []int64, dt ort.TensorElementDataType, raw []byte) (ort.Value, error) {
	if e, ok := elementTypes[dt]; ok {
		return e.value(dims, raw)
	}
	return ort.NewCustomDataTensor(ort.NewShape(dims...), raw, dt)
}

// emptyScalar allocates a rank-0 output of element type dt.
func emptyScalar(dt ort.TensorElementDataType) (ort.Value, error) {
	if e, ok := elementTypes[dt]; ok && e.scalar != nil {
		return e.scalar()
	}
	return nil, fmt.Errorf("element type %v, which onnxruntime_go v1.27 cannot make a scalar of", dt)
}

// elementType makes the ort values of one element type that has a Go
// type: a tensor or scalar of raw data, and an empty scalar output (none
// for bool); and reads such a value back as an infer.Tensor.
type elementType struct {
	value  func(dims []int64, raw []byte) (ort.Value, error)
	scalar func() (ort.Value, error)
	read   func(ort.Value) (infer.Tensor, bool)
}

func typedElement[T ort.TensorData](dt infer.DType) elementType {
	return elementType{value: typedValue[T], scalar: func() (ort.Value, error) { return ort.NewEmptyScalar[T]() }, read: readTyped[T](dt)}
}

// readTyped reads an ort tensor or scalar of T as an infer.Tensor of dt;
// false for a value of another type.
func readTyped[T ort.TensorData](dt infer.DType) func(ort.Value) (infer.Tensor, bool) {
	return func(v ort.Value) (infer.Tensor, bool) {
		switch x := v.(type) {
		case *ort.Tensor[T]:
			return infer.Tensor{DType: dt, Data: x.GetData()}, true
		case *ort.Scalar[T]:
			return infer.Tensor{DType: dt, Data: []T{x.GetData()}}, true
		}
		return infer.Tensor{}, false
	}
}

// elementTypes are the element types with a Go type; float16 and bfloat16
// are not among them.
var elementTypes = map[ort.TensorElementDataType]elementType{
	ort.TensorElementDataTypeFloat:  typedElement[float32](infer.Float32),
	ort.TensorElementDataTypeDouble: typedElement[float64](infer.Float64),
	ort.TensorElementDataTypeInt8:   typedElement[int8](infer.Int8),
	ort.TensorElementDataTypeInt16:  typedElement[int16](infer.Int16),
	ort.TensorElementDataTypeInt32:  typedElement[int32](infer.Int32),
	ort.TensorElementDataTypeInt64:  typedElement[int64](infer.Int64),
	ort.TensorElementDataTypeUint8:  typedElement[uint8](infer.Uint8),
	ort.TensorElementDataTypeUint16: typedElement[uint16](infer.Uint16),
	ort.TensorElementDataTypeUint32: typedElement[uint32](infer.Uint32),
	ort.TensorElementDataTypeUint64: typedElement[uint64](infer.Uint64),
	ort.TensorElementDataTypeBool:   {value: typedValue[bool], read: readTyped[bool](infer.Bool)},
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
	return causeOf(msg, "other: "+msg, [][2]string{
		{"not a tensor", "inputs or outputs are not tensors (sequence, optional, map)"},
		{"NOT_IMPLEMENTED", "ONNX Runtime has no kernel for it"},
		{"Could not find an implementation", "ONNX Runtime has no kernel for it"},
		{"ai.onnx.preview.training", "ONNX Runtime cannot load it: training op"},
		{"cannot load it", "ONNX Runtime cannot load it: other"},
		{"cannot run it", "ONNX Runtime cannot run it"},
	})
}
