package infer

import (
	"fmt"
	"path/filepath"
	"reflect"
	"strings"
	"sync"

	ort "github.com/yalue/onnxruntime_go"
)

// Session is one ONNX Runtime session with a fixed number of intra-op
// threads. It does no batching: Run hands its tensors to ONNX Runtime as they
// are, which makes it the raw baseline benchmarks compare the Engine to.
// Run is safe for concurrent use (ONNX Runtime sessions are); Close waits for
// running calls and is idempotent.
type Session struct {
	info ModelInfo
	dims map[string][]string // dim_params, for float16/bfloat16 outputs (halfDims)

	mu     sync.RWMutex // Run holds it shared, Close exclusive
	sess   *ort.DynamicAdvancedSession
	closed bool
}

// NewSession loads modelFile (an .onnx file) with threads intra-op threads
// (<= 0 means 1). Init must have been called (else ErrNotInitialized). A
// model with an input or output of a dtype infer does not handle returns
// ErrUnsupportedDType.
func NewSession(modelFile string, threads int) (*Session, error) {
	return openSession(modelFile, nil, threads, "", false)
}

// NewSessionFromData is NewSession for a model held in memory (a decrypted
// one): data is the .onnx bytes, name the file they came from, which names
// the model and its errors. A model whose weights sit in external files
// cannot load from memory.
func NewSessionFromData(name string, data []byte, threads int) (*Session, error) {
	if data == nil {
		data = []byte{}
	}
	return openSession(name, data, threads, "", false)
}

// openSession loads data, or modelFile when data is nil, on provider (see
// Config.ExecutionProvider; "" is the CPU), its intra-op threads
// spin-waiting between parallel sections only when spin is set (see
// Config.ThreadSpinning).
func openSession(modelFile string, data []byte, threads int, provider string, spin bool) (*Session, error) {
	if !initialized() {
		return nil, ErrNotInitialized
	}
	if threads <= 0 {
		threads = 1
	}
	opts, err := ort.NewSessionOptions()
	if err != nil {
		return nil, fmt.Errorf("session options: %w", err)
	}
	defer opts.Destroy()
	if err := opts.SetIntraOpNumThreads(threads); err != nil {
		return nil, fmt.Errorf("set intra-op threads %d: %w", threads, err)
	}
	if err := opts.SetInterOpNumThreads(1); err != nil {
		return nil, fmt.Errorf("set inter-op threads: %w", err)
	}
	if !spin {
		if err := opts.AddSessionConfigEntry("session.intra_op.allow_spinning", "0"); err != nil {
			return nil, fmt.Errorf("turn intra-op spinning off: %w", err)
		}
	}
	if err := appendProvider(opts, provider); err != nil {
		return nil, fmt.Errorf("load model %q: %w", modelFile, err)
	}
	var ins, outs []ort.InputOutputInfo
	if data != nil {
		ins, outs, err = ort.GetInputOutputInfoWithONNXData(data)
	} else {
		ins, outs, err = ort.GetInputOutputInfoWithOptions(modelFile, opts)
	}
	if err != nil {
		return nil, fmt.Errorf("load model %q: %w", modelFile, err)
	}
	info, err := modelInfo(modelFile, ins, outs)
	if err != nil {
		return nil, err
	}
	var sess *ort.DynamicAdvancedSession
	if data != nil {
		sess, err = ort.NewDynamicAdvancedSessionWithONNXData(data, info.InputNames(), info.OutputNames(), opts)
	} else {
		sess, err = ort.NewDynamicAdvancedSession(modelFile, info.InputNames(), info.OutputNames(), opts)
	}
	if err != nil {
		return nil, fmt.Errorf("load model %q: %w", modelFile, err)
	}
	return &Session{info: info, sess: sess, dims: halfDims(modelFile, data, info)}, nil
}

// modelInfo describes the model of modelFile from its inputs and outputs.
func modelInfo(modelFile string, ins, outs []ort.InputOutputInfo) (ModelInfo, error) {
	info := ModelInfo{
		Name: strings.TrimSuffix(filepath.Base(modelFile), filepath.Ext(modelFile)),
		Path: modelFile,
	}
	var err error
	if info.Inputs, err = convertIO(ins, "input"); err != nil {
		return ModelInfo{}, fmt.Errorf("load model %q: %w", modelFile, err)
	}
	if info.Outputs, err = convertIO(outs, "output"); err != nil {
		return ModelInfo{}, fmt.Errorf("load model %q: %w", modelFile, err)
	}
	return DecideBatching(info, BatchingAuto)
}

func convertIO(infos []ort.InputOutputInfo, kind string) ([]IO, error) {
	out := make([]IO, len(infos))
	for i, in := range infos {
		if in.OrtValueType != ort.ONNXTypeTensor {
			return nil, fmt.Errorf("%w: %s %q is a %v, not a tensor", ErrUnsupportedDType, kind, in.Name, in.OrtValueType)
		}
		dt := fromORT(in.DataType)
		if dt == Invalid {
			return nil, fmt.Errorf("%w: %s %q has element type %v", ErrUnsupportedDType, kind, in.Name, in.DataType)
		}
		if len(in.Dimensions) == 0 && (isHalf(dt) || dt == String && kind == "input") {
			return nil, fmt.Errorf("%w: %s %q is a rank-0 %s, which onnxruntime_go v1.27 cannot make", ErrUnsupportedDType, kind, in.Name, dt)
		}
		shape := make([]int64, len(in.Dimensions))
		for j, d := range in.Dimensions {
			if d < 0 {
				d = -1
			}
			shape[j] = d
		}
		out[i] = IO{Name: in.Name, DType: dt, Shape: shape}
	}
	return out, nil
}

func fromORT(t ort.TensorElementDataType) DType {
	switch t {
	case ort.TensorElementDataTypeFloat:
		return Float32
	case ort.TensorElementDataTypeDouble:
		return Float64
	case ort.TensorElementDataTypeInt32:
		return Int32
	case ort.TensorElementDataTypeInt64:
		return Int64
	case ort.TensorElementDataTypeUint8:
		return Uint8
	case ort.TensorElementDataTypeBool:
		return Bool
	case ort.TensorElementDataTypeInt8:
		return Int8
	case ort.TensorElementDataTypeInt16:
		return Int16
	case ort.TensorElementDataTypeUint16:
		return Uint16
	case ort.TensorElementDataTypeUint32:
		return Uint32
	case ort.TensorElementDataTypeUint64:
		return Uint64
	case ort.TensorElementDataTypeFloat16:
		return Float16
	case ort.TensorElementDataTypeBFloat16:
		return BFloat16
	case ort.TensorElementDataTypeString:
		return String
	}
	return Invalid
}

// Info returns the model's inputs and outputs. Safe for concurrent use.
func (s *Session) Info() ModelInfo { return s.info }

// Run runs the model once on inputs, one tensor per model input in model
// order, and returns one tensor per output. Scalar (rank-0) inputs and
// outputs and zero-size dims are handled. A wrong count or dtype returns
// an *InputError; a model without inputs returns ErrNoInputs (the Go
// binding cannot run one); ONNX Runtime failures (e.g. a shape the model
// rejects) are returned wrapped. After Close it returns ErrClosed.
func (s *Session) Run(inputs []Tensor) ([]Tensor, error) {
	if len(s.info.Inputs) == 0 {
		return nil, fmt.Errorf("run model %q: %w", s.info.Name, ErrNoInputs)
	}
	if len(inputs) != len(s.info.Inputs) {
		return nil, NewInputError(-1, "", "got %d inputs, want %d (%s)", len(inputs), len(s.info.Inputs), strings.Join(s.info.InputNames(), ", "))
	}
	vals := make([]ort.Value, len(inputs))
	defer destroyAll(vals)
	for i, t := range inputs {
		in := s.info.Inputs[i]
		if t.DType != in.DType {
			return nil, NewInputError(-1, in.Name, "wrong dtype: got %s, want %s", t.DType, in.DType)
		}
		if err := t.Check(); err != nil {
			return nil, NewInputError(-1, in.Name, "%v", err)
		}
		if d, ok := t.Data.([]string); ok {
			if err := checkStrings(in.Name, d); err != nil {
				return nil, err
			}
		}
		v, err := toORT(t)
		if err != nil {
			return nil, fmt.Errorf("input %q: %w", in.Name, err)
		}
		vals[i] = v
	}
	outs, err := s.presetOutputs(inputs)
	defer destroyAll(outs)
	if err != nil {
		return nil, err
	}
	s.mu.RLock()
	if s.closed {
		s.mu.RUnlock()
		return nil, ErrClosed
	}
	err = s.sess.Run(vals, outs)
	s.mu.RUnlock()
	if err != nil {
		return nil, fmt.Errorf("run model %q: %w", s.info.Name, err)
	}
	res := make([]Tensor, len(outs))
	for i, v := range outs {
		t, err := fromORTValue(v)
		if err != nil {
			return nil, fmt.Errorf("output %q: %w", s.info.Outputs[i].Name, err)
		}
		res[i] = t
	}
	return res, nil
}

// presetOutputs returns the output values Run hands ONNX Runtime: nil
// (allocated by it) except for rank-0 outputs, which get a Scalar of
// their own because the binding cannot wrap a rank-0 numeric value it
// allocated, and float16/bfloat16 outputs, which the binding cannot read
// back (see session_half.go). String outputs, rank-0 too, are always
// allocated by ONNX Runtime (see session_string.go).
func (s *Session) presetOutputs(inputs []Tensor) ([]ort.Value, error) {
	outs := make([]ort.Value, len(s.info.Outputs))
	for i, o := range s.info.Outputs {
		var shape []int64
		switch {
		case o.DType == String:
			continue
		case len(o.Shape) == 0:
		case isHalf(o.DType):
			var err error
			if shape, err = s.halfOutputShape(o, inputs); err != nil {
				return outs, fmt.Errorf("run model %q: %w", s.info.Name, err)
			}
		default:
			continue
		}
		v, err := toORT(NewTensor(o.DType, shape))
		if err != nil {
			return outs, fmt.Errorf("output %q: %w", o.Name, err)
		}
		outs[i] = v
	}
	return outs, nil
}

// destroyAll destroys the values that exist. The binding may leave a typed
// nil in a Value when it fails to wrap an output, so nil pointers inside
// the interface are skipped too.
func destroyAll(vals []ort.Value) {
	for _, v := range vals {
		if v == nil {
			continue
		}
		if rv := reflect.ValueOf(v); rv.Kind() == reflect.Pointer && rv.IsNil() {
			continue
		}
		_ = v.Destroy()
	}
}

// Close destroys the ONNX Runtime session. It waits for running calls, is
// idempotent and always returns nil or the destroy error of the first call.
func (s *Session) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil
	}
	s.closed = true
	return s.sess.Destroy()
}

// toORT wraps t's data in an ONNX Runtime value (no copy, except for
// strings, which the binding copies into C).
func toORT(t Tensor) (ort.Value, error) {
	switch d := t.Data.(type) {
	case []float32:
		return newValue(t.Shape, d)
	case []float64:
		return newValue(t.Shape, d)
	case []int32:
		return newValue(t.Shape, d)
	case []int64:
		return newValue(t.Shape, d)
	case []uint8:
		return newValue(t.Shape, d)
	case []bool:
		return newValue(t.Shape, d)
	case []int8:
		return newValue(t.Shape, d)
	case []int16:
		return newValue(t.Shape, d)
	case []uint16:
		return newValue(t.Shape, d)
	case []uint32:
		return newValue(t.Shape, d)
	case []uint64:
		return newValue(t.Shape, d)
	case []F16:
		return newHalfValue(t.Shape, halfBytes(d), ort.TensorElementDataTypeFloat16)
	case []BF16:
		return newHalfValue(t.Shape, halfBytes(d), ort.TensorElementDataTypeBFloat16)
	case []string:
		return newStringValue(t.Shape, d)
	}
	return nil, fmt.Errorf("%w: %T", ErrUnsupportedDType, t.Data)
}

// newValue makes a rank-0 shape a Scalar: the binding's NewTensor rejects
// an empty shape.
func newValue[T ort.TensorData](shape []int64, d []T) (ort.Value, error) {
	if len(shape) == 0 {
		if len(d) != 1 {
			return nil, fmt.Errorf("scalar has %d elements", len(d))
		}
		return ort.NewScalar(d[0])
	}
	return ort.NewTensor(ort.NewShape(shape...), d)
}

// fromORTValue takes the data of an output ONNX Runtime allocated. The
// library already copied it into Go memory, so the slice outlives Destroy.
func fromORTValue(v ort.Value) (Tensor, error) {
	shape := []int64(v.GetShape().Clone())
	switch x := v.(type) {
	case *ort.Tensor[float32]:
		return Tensor{DType: Float32, Shape: shape, Data: x.GetData()}, nil
	case *ort.Tensor[float64]:
		return Tensor{DType: Float64, Shape: shape, Data: x.GetData()}, nil
	case *ort.Tensor[int32]:
		return Tensor{DType: Int32, Shape: shape, Data: x.GetData()}, nil
	case *ort.Tensor[int64]:
		return Tensor{DType: Int64, Shape: shape, Data: x.GetData()}, nil
	case *ort.Tensor[uint8]:
		return Tensor{DType: Uint8, Shape: shape, Data: x.GetData()}, nil
	case *ort.Tensor[bool]:
		return Tensor{DType: Bool, Shape: shape, Data: x.GetData()}, nil
	case *ort.Tensor[int8]:
		return Tensor{DType: Int8, Shape: shape, Data: x.GetData()}, nil
	case *ort.Tensor[int16]:
		return Tensor{DType: Int16, Shape: shape, Data: x.GetData()}, nil
	case *ort.Tensor[uint16]:
		return Tensor{DType: Uint16, Shape: shape, Data: x.GetData()}, nil
	case *ort.Tensor[uint32]:
		return Tensor{DType: Uint32, Shape: shape, Data: x.GetData()}, nil
	case *ort.Tensor[uint64]:
		return Tensor{DType: Uint64, Shape: shape, Data: x.GetData()}, nil
	case *ort.CustomDataTensor:
		return fromHalfValue(x)
	case *ort.StringTensor:
		return fromStringValue(x)
	}
	return fromORTScalar(v)
}

// fromORTScalar reads a rank-0 output Run allocated as an *ort.Scalar[T]
// (any T infer handles): GetData returns its one element.
func fromORTScalar(v ort.Value) (Tensor, error) {
	get := reflect.ValueOf(v).MethodByName("GetData")
	if !get.IsValid() || get.Type().NumIn() != 0 || get.Type().NumOut() != 1 {
		return Tensor{}, fmt.Errorf("%w: %T", ErrUnsupportedDType, v)
	}
	x := get.Call(nil)[0]
	data := reflect.Append(reflect.MakeSlice(reflect.SliceOf(x.Type()), 0, 1), x).Interface()
	dt := dtypeOf(data)
	if dt == Invalid {
		return Tensor{}, fmt.Errorf("%w: %T", ErrUnsupportedDType, v)
	}
	return Tensor{DType: dt, Shape: []int64{}, Data: data}, nil
}
