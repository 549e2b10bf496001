package infer_test

import (
	"context"

	"bytes"
	"encoding/base64"
	"errors"
	"image"
	"image/color"
	"image/jpeg"
	"image/png"
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/cluster-serving/cluster-serving/infer"
	"github.com/cluster-serving/cluster-serving/infer/infertest"
)

// fixture reads a file of infer/testdata/fixtures (see infertest.Fixture).
func fixture(tb testing.TB, rel string) []byte { return infertest.Fixture(tb, rel) }

// bgrAt returns the B, G, R values (0-255) of img at (x, y), computed through
// image.Image.At, independently of infer's conversion.
func bgrAt(img image.Image, x, y int) [3]float32 {
	c := color.NRGBAModel.Convert(img.At(img.Bounds().Min.X+x, img.Bounds().Min.Y+y)).(color.NRGBA)
	return [3]float32{float32(c.B), float32(c.G), float32(c.R)}
}

func b64(b []byte) []byte { return []byte(base64.StdEncoding.EncodeToString(b)) }

func TestDecodeImagePNG(t *testing.T) {
	// 2x2 image with known colours: exact values in every layout.
	img := image.NewNRGBA(image.Rect(0, 0, 2, 2))
	img.SetNRGBA(0, 0, color.NRGBA{R: 10, G: 20, B: 30, A: 255})
	img.SetNRGBA(1, 0, color.NRGBA{R: 40, G: 50, B: 60, A: 255})
	img.SetNRGBA(0, 1, color.NRGBA{R: 70, G: 80, B: 90, A: 255})
	img.SetNRGBA(1, 1, color.NRGBA{R: 255, G: 0, B: 128, A: 255})
	var buf bytes.Buffer
	if err := png.Encode(&buf, img); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name      string
		pre       infer.ImagePre
		wantShape []int64
		want      []float32
	}{
		{"default BGR CHW", infer.ImagePre{}, []int64{3, 2, 2},
			[]float32{30, 60, 90, 128, 20, 50, 80, 0, 10, 40, 70, 255}},
		{"RGB", infer.ImagePre{Channels: "RGB"}, []int64{3, 2, 2},
			[]float32{10, 40, 70, 255, 20, 50, 80, 0, 30, 60, 90, 128}},
		{"HWC", infer.ImagePre{Layout: "HWC"}, []int64{2, 2, 3},
			[]float32{30, 20, 10, 60, 50, 40, 90, 80, 70, 128, 0, 255}},
		{"scale mean std", infer.ImagePre{Channels: "RGB", Scale: 0.5, Mean: [3]float32{5, 0, 0}, Std: [3]float32{2, 1, 0}}, []int64{3, 2, 2},
			[]float32{0, 7.5, 15, 61.25, 10, 25, 40, 0, 15, 30, 45, 64}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := infer.DecodeImage(context.Background(), b64(buf.Bytes()), tt.pre)
			if err != nil {
				t.Fatalf("DecodeImage: %v", err)
			}
			if !slices.Equal(got.Shape, tt.wantShape) {
				t.Fatalf("shape: got %v, want %v", got.Shape, tt.wantShape)
			}
			data := got.Data.([]float32)
			for i := range tt.want {
				if data[i] != tt.want[i] {
					t.Fatalf("data: got %v, want %v", data, tt.want)
				}
			}
		})
	}
}

func TestDecodeImageJPEG(t *testing.T) {
	raw := fixture(t, "images/cat1.jpeg")
	ref, err := jpeg.Decode(bytes.NewReader(raw))
	if err != nil {
		t.Fatal(err)
	}
	h, w := ref.Bounds().Dy(), ref.Bounds().Dx()
	got, err := infer.DecodeImage(context.Background(), b64(raw), infer.ImagePre{})
	if err != nil {
		t.Fatalf("DecodeImage: %v", err)
	}
	if want := []int64{3, int64(h), int64(w)}; !slices.Equal(got.Shape, want) {
		t.Fatalf("shape: got %v, want %v", got.Shape, want)
	}
	data := got.Data.([]float32)
	for _, p := range [][2]int{{0, 0}, {w / 2, h / 3}, {w - 1, h - 1}} {
		want := bgrAt(ref, p[0], p[1])
		for c := range 3 {
			if v := data[c*h*w+p[1]*w+p[0]]; v != want[c] {
				t.Errorf("pixel %v channel %d: got %v, want %v (BGR, 0-255)", p, c, v, want[c])
			}
		}
	}
	resized, err := infer.DecodeImage(context.Background(), b64(raw), infer.ImagePre{Resize: [2]int{224, 200}})
	if err != nil {
		t.Fatalf("DecodeImage resized: %v", err)
	}
	if want := []int64{3, 224, 200}; !slices.Equal(resized.Shape, want) {
		t.Fatalf("resized shape: got %v, want %v", resized.Shape, want)
	}
}

func TestDecodeImageErrors(t *testing.T) {
	raw := fixture(t, "images/dog1.jpeg")
	tests := []struct {
		name string
		b64  string
		want string
	}{
		{"corrupt base64", "@@@@", "not base64"},
		{"not an image", base64.StdEncoding.EncodeToString([]byte("hello")), "undecodable image"},
		{"truncated jpeg", base64.StdEncoding.EncodeToString(raw[:len(raw)/3]), "undecodable image"},
		{"empty", "", "undecodable image"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := infer.DecodeImage(context.Background(), []byte(tt.b64), infer.ImagePre{})
			var ie *infer.InputError
			if !errors.As(err, &ie) || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("got error %v, want an *InputError containing %q", err, tt.want)
			}
		})
	}
}

func TestConfigValidateImage(t *testing.T) {
	tests := []struct {
		name string
		cfg  infer.Config
		key  string
	}{
		{"half resize", infer.Config{ImageResize: [2]int{224, 0}}, "imageResize"},
		{"negative resize", infer.Config{ImageResize: [2]int{-1, 2}}, "imageResize"},
		{"layout", infer.Config{ImageLayout: "NCHW"}, "imageLayout"},
		{"channels", infer.Config{ImageChannels: "bgr"}, "imageChannels"},
		{"scale", infer.Config{ImageScale: -1}, "imageScale"},
		{"mean", infer.Config{ImageMean: [3]float32{float32(math.NaN()), 0, 0}}, "imageMean"},
		{"std", infer.Config{ImageStd: [3]float32{1, -1, 1}}, "imageStd"},
		{"ok", infer.Config{ImageResize: [2]int{224, 224}, ImageLayout: "HWC", ImageChannels: "RGB", ImageScale: 1.0 / 255}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.cfg.ModelPath = "m.onnx"
			wantValidate(t, tt.cfg, tt.key)
		})
	}
}
