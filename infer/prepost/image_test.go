package prepost_test

import (
	"context"
	"encoding/base64"
	"errors"
	"image/color"
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/cluster-serving/cluster-serving/infer"
	"github.com/cluster-serving/cluster-serving/infer/infertest"
	"github.com/cluster-serving/cluster-serving/infer/wire"
)

// gradient is the pixels of the test PNGs: a gradient with some transparency.
func gradient(x, y int) color.NRGBA {
	return color.NRGBA{R: uint8(x * 7), G: uint8(y * 13), B: uint8(x*y + 5), A: uint8(255 - x)}
}

// redisDoorImage is the engine path: the tensor the Redis door's codec
// feeds a model whose input is FP32 shape for an Arrow record holding
// base64 of img, pre-processed as pre says.
func redisDoorImage(tb testing.TB, img []byte, pre infer.ImagePre, shape []int64) infer.Tensor {
	tb.Helper()
	return redisDoorInput(tb, img, pre, infer.IO{Name: "x", DType: infer.Float32, Shape: shape})
}

// redisPayload is a Redis record's data for an image: base64 of an Arrow
// stream whose utf8 column x holds base64 of img.
func redisPayload(tb testing.TB, img []byte) []byte {
	tb.Helper()
	b := array.NewStringBuilder(memory.DefaultAllocator)
	defer b.Release()
	b.Append(base64.StdEncoding.EncodeToString(img))
	col := b.NewArray()
	defer col.Release()
	payload, err := wire.EncodeArrowRecord([]string{"x"}, col)
	if err != nil {
		tb.Fatal(err)
	}
	return payload
}

// redisDoorInput is redisDoorImage for model input in.
func redisDoorInput(tb testing.TB, img []byte, pre infer.ImagePre, in infer.IO) infer.Tensor {
	tb.Helper()
	rec, err := wire.DecodeRedisArrow(redisPayload(tb, img), infer.ModelInfo{Inputs: []infer.IO{in}, Image: pre}, false)
	if err != nil {
		tb.Fatalf("Redis door decode: %v", err)
	}
	return rec[0]
}

// sameBits reports whether two tensors hold the same dtype, shape and
// bits.
func sameBits(a, b infer.Tensor) bool {
	if a.DType != b.DType || !slices.Equal(a.Shape, b.Shape) {
		return false
	}
	if x, ok := a.Data.([]float32); ok {
		y := b.Data.([]float32)
		return slices.EqualFunc(x, y, func(p, q float32) bool { return math.Float32bits(p) == math.Float32bits(q) })
	}
	return slices.Equal(a.Data.([]uint8), b.Data.([]uint8))
}

// stringTensor is a string tensor of shape holding vs.
func stringTensor(shape []int64, vs ...[]byte) infer.Tensor {
	data := make([]string, len(vs))
	for i, v := range vs {
		data[i] = string(v)
	}
	return infer.Tensor{DType: infer.String, Shape: shape, Data: data}
}

func TestImageMatchesRedisDoor(t *testing.T) {
	images := map[string][]byte{
		"cat1.jpeg":  infertest.Fixture(t, "images/cat1.jpeg"),
		"dog1.jpeg":  infertest.Fixture(t, "images/dog1.jpeg"),
		"fish1.jpeg": infertest.Fixture(t, "images/fish1.jpeg"),
		"alpha.png":  infertest.PNG(t, 37, 21, gradient),
	}
	tests := []struct {
		name   string
		params string
		pre    infer.ImagePre
		shape  []int64 // the engine's model input
	}{
		{"original default", "", infer.ImagePre{}, []int64{-1, 3, -1, -1}},
		{"resize", param("imageResize", "224,224"), infer.ImagePre{Resize: [2]int{224, 224}}, []int64{-1, 3, 224, 224}},
		{"imagenet RGB", param("imageResize", "64,48") + param("imageChannels", "RGB") + param("imageScale", "0.00392157") +
			param("imageMean", "0.485, 0.456, 0.406") + param("imageStd", "0.229,0.224,0.225"),
			infer.ImagePre{Resize: [2]int{64, 48}, Channels: "RGB", Scale: 0.00392157, Mean: [3]float32{0.485, 0.456, 0.406}, Std: [3]float32{0.229, 0.224, 0.225}},
			[]int64{-1, 3, 64, 48}},
		{"HWC", param("imageLayout", "HWC") + param("imageResize", "30,40"), infer.ImagePre{Layout: "HWC", Resize: [2]int{30, 40}}, []int64{-1, 30, 40, 3}},
	}
	for _, tt := range tests {
		s := newStep(t, imageHead+tt.params)
		for name, img := range images {
			t.Run(tt.name+"/"+name, func(t *testing.T) {
				want := redisDoorImage(t, img, tt.pre, tt.shape)
				for form, v := range map[string][]byte{"bytes": img, "base64": []byte(base64.StdEncoding.EncodeToString(img))} {
					out, err := s.Infer(context.Background(), [][]infer.Tensor{{stringTensor([]int64{1}, v)}})
					if err != nil {
						t.Fatalf("%s: Infer: %v", form, err)
					}
					if got := out[0][0]; !sameBits(got, want) {
						t.Errorf("%s: got %s %s, want the Redis door's %s %s, bit for bit", form, got.DType, infer.ShapeString(got.Shape), want.DType, infer.ShapeString(want.Shape))
					}
				}
			})
		}
	}
}

func TestImageUint8MatchesRedisDoor(t *testing.T) {
	img := infertest.Fixture(t, "images/dog1.jpeg")
	s := newStep(t, imageHead+param("imageResize", "16,16")+`output { name: "tensor" data_type: TYPE_UINT8 dims: [3, 16, 16] }`)
	out, err := s.Infer(context.Background(), [][]infer.Tensor{{stringTensor([]int64{1}, img)}})
	if err != nil {
		t.Fatal(err)
	}
	want := redisDoorInput(t, img, infer.ImagePre{Resize: [2]int{16, 16}}, infer.IO{Name: "x", DType: infer.Uint8, Shape: []int64{-1, 3, 16, 16}})
	if !sameBits(out[0][0], want) {
		t.Errorf("got %v, want the Redis door's uint8 tensor %v", out[0][0].Shape, want.Shape)
	}
}

func TestImageRecords(t *testing.T) {
	cat, fish := infertest.Fixture(t, "images/cat1.jpeg"), infertest.Fixture(t, "images/fish1.jpeg")
	pre := infer.ImagePre{Resize: [2]int{8, 8}}
	wantCat := redisDoorImage(t, cat, pre, []int64{-1, 3, 8, 8})
	wantFish := redisDoorImage(t, fish, pre, []int64{-1, 3, 8, 8})
	both := append(slices.Clone(wantCat.Data.([]float32)), wantFish.Data.([]float32)...)
	batched := newStep(t, imageHead+param("imageResize", "8,8"))
	whole := newStep(t, strings.Replace(imageHead, "max_batch_size: 8", "max_batch_size: 0", 1)+param("imageResize", "8,8"))
	tests := []struct {
		name string
		s    interface {
			Infer(context.Context, [][]infer.Tensor) ([][]infer.Tensor, error)
		}
		records [][]infer.Tensor
		want    []infer.Tensor
	}{
		{"rows", batched, [][]infer.Tensor{{stringTensor([]int64{1}, cat)}, {stringTensor([]int64{1}, fish)}}, []infer.Tensor{wantCat, wantFish}},
		{"whole with its batch dim", batched, [][]infer.Tensor{{stringTensor([]int64{2, 1}, cat, fish)}},
			[]infer.Tensor{{DType: infer.Float32, Shape: []int64{2, 3, 8, 8}, Data: both}}},
		{"max_batch_size 0", whole, [][]infer.Tensor{{stringTensor([]int64{2}, cat, fish)}},
			[]infer.Tensor{{DType: infer.Float32, Shape: []int64{2, 3, 8, 8}, Data: both}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, err := tt.s.Infer(context.Background(), tt.records)
			if err != nil {
				t.Fatal(err)
			}
			if len(out) != len(tt.want) {
				t.Fatalf("got %d records, want %d", len(out), len(tt.want))
			}
			for i := range out {
				if !sameBits(out[i][0], tt.want[i]) {
					t.Errorf("record %d: got %s, want %s of the Redis door's tensors", i, infer.ShapeString(out[i][0].Shape), infer.ShapeString(tt.want[i].Shape))
				}
			}
		})
	}
}

func TestImageErrors(t *testing.T) {
	s := newStep(t, imageHead)
	cat, png := infertest.Fixture(t, "images/cat1.jpeg"), infertest.PNG(t, 5, 5, gradient)
	tests := []struct {
		name    string
		records [][]infer.Tensor
		want    string
	}{
		{"not an image", [][]infer.Tensor{{stringTensor([]int64{1}, cat)}, {stringTensor([]int64{1}, []byte("\xffnot a jpeg"))}},
			`instance 1: input "image": undecodable image (want JPEG or PNG)`},
		{"not base64", [][]infer.Tensor{{stringTensor([]int64{1}, []byte("hello, world!"))}}, `instance 0: input "image": image is not base64`},
		{"empty", [][]infer.Tensor{{stringTensor([]int64{1}, nil)}}, `instance 0: input "image": undecodable image`},
		{"two sizes", [][]infer.Tensor{{stringTensor([]int64{2, 1}, cat, png)}}, "image 1 is [3 5 5], image 0 is [3 148 340]: the images of one tensor need one size; set imageResize"},
		{"bad second image", [][]infer.Tensor{{stringTensor([]int64{2, 1}, cat, []byte("\x89PNG"))}}, `instance 0: input "image": image 1: undecodable image`},
		{"no image", [][]infer.Tensor{{stringTensor([]int64{0, 1})}}, `instance 0: input "image": no image`},
		{"numbers", [][]infer.Tensor{{{DType: infer.Float32, Shape: []int64{1}, Data: []float32{1}}}}, `instance 0: input "image": wrong dtype: got float32, want string`},
		{"two a row", [][]infer.Tensor{{stringTensor([]int64{2}, cat, cat)}}, `instance 0: input "image": shape [2] does not match the step's [-1 1]`},
		{"two inputs", [][]infer.Tensor{{stringTensor([]int64{1}, cat), stringTensor([]int64{1}, cat)}}, "instance 0: got 2 inputs, the step has 1 (image)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := s.Infer(context.Background(), tt.records)
			var ie *infer.InputError
			if !errors.As(err, &ie) || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("got %v, want an *infer.InputError holding %q", err, tt.want)
			}
		})
	}
}

func TestImageOverBudget(t *testing.T) {
	s := newStep(t, imageHead+param("imageMaxPixels", "100"))
	_, err := s.Infer(context.Background(), [][]infer.Tensor{{stringTensor([]int64{1}, infertest.BombPNG(t, 20, 20))}})
	if !strings.Contains(err.Error(), "image is 20x20 (400 pixels), want at most 100 pixels") {
		t.Fatalf("got %v, want the pixel cap's error", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	records := [][]infer.Tensor{{stringTensor([]int64{1}, infertest.PNG(t, 4, 4, gradient))}, {stringTensor([]int64{1}, infertest.PNG(t, 4, 4, gradient))}}
	if _, err := newStep(t, imageHead).Infer(ctx, records); err != nil && !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled: got %v, want nil or context.Canceled", err)
	}
}

// FuzzImageStep feeds the image step arbitrary elements, as bytes and as
// base64: it must answer a tensor of the declared shape or an
// *infer.InputError, and never panic.
func FuzzImageStep(f *testing.F) {
	f.Add(infertest.Fixture(f, "images/fish1.jpeg"))
	f.Add(infertest.PNG(f, 3, 2, gradient))
	f.Add([]byte("\xff\xd8\xff\xe0"))
	f.Add([]byte("\x89PNG\r\n\x1a\n"))
	f.Add([]byte(base64.StdEncoding.EncodeToString(infertest.PNG(f, 2, 2, gradient))))
	f.Add([]byte("iVBORw0KGgo"))
	f.Add([]byte{})
	s := newStep(f, imageHead+param("imageResize", "4,4")+param("imageMaxPixels", "65536"))
	f.Fuzz(func(t *testing.T, v []byte) {
		out, err := s.Infer(context.Background(), [][]infer.Tensor{{stringTensor([]int64{1}, v)}})
		var ie *infer.InputError
		switch {
		case err != nil && !errors.As(err, &ie):
			t.Fatalf("got %v, want an *infer.InputError", err)
		case err == nil && !slices.Equal(out[0][0].Shape, []int64{3, 4, 4}):
			t.Fatalf("got shape %v, want [3 4 4]", out[0][0].Shape)
		}
	})
}

// BenchmarkImageStep decodes the quick-start cat (a 500×400 JPEG) to
// [3,224,224], sent as the file's bytes and as base64.
func BenchmarkImageStep(b *testing.B) {
	img := infertest.Fixture(b, "images/cat1.jpeg")
	s := newStep(b, imageHead+param("imageResize", "224,224"))
	for form, v := range map[string][]byte{"bytes": img, "base64": []byte(base64.StdEncoding.EncodeToString(img))} {
		b.Run(form, func(b *testing.B) {
			records := [][]infer.Tensor{{stringTensor([]int64{1}, v)}}
			b.SetBytes(int64(len(img)))
			for b.Loop() {
				if _, err := s.Infer(context.Background(), records); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
