package prepost

import (
	"fmt"
	"slices"
	"strings"

	"github.com/cluster-serving/cluster-serving/infer"
	"github.com/cluster-serving/cluster-serving/infer/modelconfig"
	"github.com/cluster-serving/cluster-serving/infer/wire/kservepb"
)

// decl is an input or output as a config lists it.
type decl struct {
	index   int // in the config's list
	name    string
	dtype   kservepb.DataType
	dims    []int64
	reshape bool
}

// tensorConfig is what kservepb.ModelInput and ModelOutput share.
type tensorConfig interface {
	GetName() string
	GetDataType() kservepb.DataType
	GetDims() []int64
	GetReshape() *kservepb.ModelTensorReshape
}

func decls[T tensorConfig](list []T) []decl {
	out := make([]decl, len(list))
	for i, t := range list {
		out[i] = decl{index: i, name: t.GetName(), dtype: t.GetDataType(), dims: t.GetDims(), reshape: t.GetReshape() != nil}
	}
	return out
}

// declared returns the decl named name, or nil.
func declared(ds []decl, name string) *decl {
	for i := range ds {
		if ds[i].name == name {
			return &ds[i]
		}
	}
	return nil
}

// agree returns the step's tensors of kind ("input" or "output") as a
// config lists them: ios when ds is empty, else the ios ds names, in ds's
// order, each of the same data type and dims. all means the config must
// list every one (inputs; Triton lets a config leave outputs out).
func agree(model, kind string, ds []decl, ios []infer.IO, all bool) ([]infer.IO, error) {
	if len(ds) == 0 {
		return ios, nil
	}
	names := make([]string, len(ios))
	for i, io := range ios {
		names[i] = io.Name
	}
	if all && len(ds) != len(ios) {
		return nil, fieldError(model, kind, "the config lists %d, the step has %d (%s)", len(ds), len(ios), strings.Join(names, ", "))
	}
	out := make([]infer.IO, 0, len(ds))
	for _, d := range ds {
		field := fmt.Sprintf("%s[%d]", kind, d.index)
		j := slices.Index(names, d.name)
		switch {
		case j < 0:
			return nil, fieldError(model, field, "unexpected %s %q, the step's %ss are: %s", kind, d.name, kind, strings.Join(names, ", "))
		case slices.ContainsFunc(out, func(io infer.IO) bool { return io.Name == d.name }):
			return nil, fieldError(model, field, "%s %q is listed twice", kind, d.name)
		case d.dtype != dataType(ios[j].DType):
			return nil, fieldError(model, field, "%s %q: data_type: got %s, want %s", kind, d.name, d.dtype, dataType(ios[j].DType))
		case !slices.Equal(d.dims, ios[j].Shape):
			return nil, fieldError(model, field, "%s %q: dims: got %s, want %s", kind, d.name, infer.ShapeString(d.dims), infer.ShapeString(ios[j].Shape))
		case d.reshape:
			return nil, fieldError(model, field, "%s %q: reshape: a %s step takes none", kind, d.name, Backend)
		}
		out = append(out, ios[j])
	}
	return out, nil
}

// dataType is Triton's data type of d.
func dataType(d infer.DType) kservepb.DataType { return modelconfig.DataType(d) }

// dtypeOf is infer's element type of Triton's dt; infer.Invalid for one
// infer does not handle.
func dtypeOf(dt kservepb.DataType) infer.DType {
	for d := infer.Float32; d <= infer.String; d++ {
		if dt != kservepb.DataType_TYPE_INVALID && modelconfig.DataType(d) == dt {
			return d
		}
	}
	return infer.Invalid
}
