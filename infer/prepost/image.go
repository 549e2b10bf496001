package prepost

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"unicode/utf8"

	"github.com/cluster-serving/cluster-serving/infer"
	"github.com/cluster-serving/cluster-serving/infer/wire/kservepb"
)

// The image step's tensors.
const (
	// ImageInput is TYPE_STRING: encoded images, one a row.
	ImageInput = "image"
	// ImageOutput is the pre-processed image tensor, TYPE_FP32 unless the
	// config declares another type.
	ImageOutput = "tensor"
)

// imageStep decodes and pre-processes images with infer's image code:
// what the Redis door does to a base64 image before the model. A plain
// value, safe for concurrent use.
type imageStep struct {
	pre     infer.ImagePre
	out     infer.DType
	batched bool
}

// newImage returns the image step of cfg, whose parameters p holds.
func newImage(cfg *kservepb.ModelConfig, p *params) (*Step, error) {
	pre, err := imagePre(p)
	if err != nil {
		return nil, err
	}
	st := &imageStep{pre: pre, out: infer.Float32, batched: cfg.MaxBatchSize > 0}
	in := infer.IO{Name: ImageInput, DType: infer.String, Shape: []int64{-1}}
	if st.batched {
		in.Shape = []int64{1}
	}
	if d := declared(decls(cfg.Input), ImageInput); d != nil {
		if st.batched && !slices.Equal(d.dims, in.Shape) {
			return nil, fieldError(cfg.GetName(), fmt.Sprintf("input[%d]", d.index), "input %q: dims: got %s, want [1]: one image a row when max_batch_size > 0",
				d.name, infer.ShapeString(d.dims))
		}
		in.Shape = d.dims
	}
	if d := declared(decls(cfg.Output), ImageOutput); d != nil {
		st.out = dtypeOf(d.dtype)
		if _, err := infer.CastFloat32(infer.Tensor{DType: infer.Float32, Shape: []int64{0}, Data: []float32{}}, st.out); err != nil {
			return nil, fieldError(cfg.GetName(), fmt.Sprintf("output[%d]", d.index), "output %q: data_type: got %s, want TYPE_FP32, TYPE_FP64, TYPE_INT32, TYPE_INT64 or TYPE_UINT8",
				d.name, d.dtype)
		}
	}
	out := infer.IO{Name: ImageOutput, DType: st.out, Shape: imageDims(pre)}
	if !st.batched {
		out.Shape = append(slices.Clone(in.Shape), out.Shape...)
	}
	s := &Step{run: st.run, parallel: true}
	return s, s.describe(cfg, in, []infer.IO{out})
}

// imageDims is the shape infer.DecodeImage gives under p: [3,h,w], or
// [h,w,3] with layout HWC; h and w are -1 (any) without a resize.
func imageDims(p infer.ImagePre) []int64 {
	h, w := int64(-1), int64(-1)
	if p.Resize[0] > 0 {
		h, w = int64(p.Resize[0]), int64(p.Resize[1])
	}
	if p.Layout == "HWC" {
		return []int64{h, w, 3}
	}
	return []int64{3, h, w}
}

// run decodes every image of t and stacks them: a row ([1]) gives one
// image tensor, a whole record ([B,1]) B of them along dim 0, and a step
// that does not batch puts t's shape before the image's.
func (st *imageStep) run(ctx context.Context, i int, t infer.Tensor, _ bool) ([]infer.Tensor, error) {
	lead := t.Shape
	if st.batched {
		lead = lead[:len(lead)-1] // the row's one image
	}
	imgs := t.Data.([]string)
	if len(imgs) == 0 {
		return nil, infer.NewInputError(i, ImageInput, "no image: shape %s", infer.ShapeString(t.Shape))
	}
	parts := make([]infer.Tensor, len(imgs))
	for j, v := range imgs {
		img, err := st.decode(ctx, v)
		if err != nil {
			return nil, nth(err, j, len(imgs))
		}
		if j > 0 && !slices.Equal(img.Shape, parts[0].Shape[1:]) {
			return nil, infer.NewInputError(i, ImageInput, "image %d is %s, image 0 is %s: the images of one tensor need one size; set imageResize",
				j, infer.ShapeString(img.Shape), infer.ShapeString(parts[0].Shape[1:]))
		}
		if img, err = infer.CastFloat32(img, st.out); err != nil {
			return nil, err
		}
		img.Shape = append([]int64{1}, img.Shape...)
		parts[j] = img
	}
	out, err := infer.Stack(parts)
	if err != nil {
		return nil, err
	}
	out.Shape = append(slices.Clone(lead), out.Shape[1:]...)
	return []infer.Tensor{out}, nil
}

// decode decodes one element: base64 text when its first byte is ASCII
// (the Redis door's and JSON clients' form), else the file's own bytes
// (a JPEG starts with 0xFF, a PNG with 0x89).
func (st *imageStep) decode(ctx context.Context, v string) (infer.Tensor, error) {
	if len(v) > 0 && v[0] < utf8.RuneSelf {
		return infer.DecodeImage(ctx, []byte(v), st.pre)
	}
	return infer.DecodeImageBytes(ctx, []byte(v), st.pre)
}

// nth says which image of n an *infer.InputError is about, when n > 1.
func nth(err error, j, n int) error {
	var ie *infer.InputError
	if n > 1 && errors.As(err, &ie) && ie.Instance < 0 && ie.Input == "" {
		return infer.NewInputError(-1, "", "image %d: %s", j, ie.Msg)
	}
	return err
}
