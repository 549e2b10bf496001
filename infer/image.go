package infer

import (
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"image"
	stddraw "image/draw"
	_ "image/jpeg" // JPEG images
	_ "image/png"  // PNG images
	"math"

	"golang.org/x/image/draw"
)

// ImagePre is how an image input is pre-processed: decode (JPEG or PNG),
// optional bilinear resize, channel order, scale and normalisation, layout.
// The zero value is the original Cluster Serving's default: keep the size,
// BGR, 0-255 values, CHW. A plain value, safe to share.
type ImagePre struct {
	// Resize is the (height, width) to resize to; zero keeps the size.
	Resize [2]int
	// Layout is "CHW" (default) or "HWC".
	Layout string
	// Channels is "BGR" (default) or "RGB".
	Channels string
	// Scale multiplies each 0-255 value; 0 means 1.
	Scale float32
	// Mean and Std normalise each channel, in Channels order:
	// (v*Scale - Mean[c]) / Std[c]. A zero Std means 1.
	Mean, Std [3]float32
	// Key, when set, decrypts the image bytes after base64 (Key.Open: the
	// original's recordEncrypted records); nil means plain images. The
	// Redis codecs set it from Engine.RecordKey.
	Key *Key
	// MaxPixels bounds width×height, read from the image's header before
	// any pixel is decoded; 0 means the rule of Resize (see
	// ImageResizeFactor), or DefaultImageMaxPixels without it. At most
	// 2^25. Config key: imageMaxPixels.
	MaxPixels int
	// DecodeConcurrency bounds the images decoding at once in the process;
	// 0 means runtime.GOMAXPROCS(0). Config key: imageDecodeConcurrency.
	DecodeConcurrency int
	// MemoryBudget bounds the bytes (decoded image, its resized copy and
	// its tensor) of the images decoding at once in the process; 0 means
	// DefaultImageMemoryBudget. Config key: imageMemoryBudget.
	MemoryBudget int64
}

// validate reports the config key of the first bad setting.
func (p ImagePre) validate() (string, error) {
	switch {
	case p.Resize[0] < 0 || p.Resize[1] < 0 || (p.Resize[0] == 0) != (p.Resize[1] == 0):
		return "imageResize", fmt.Errorf("got %d,%d, want two positive sizes h,w or none", p.Resize[0], p.Resize[1])
	case p.Resize[0]*p.Resize[1] > MaxImagePixels:
		return "imageResize", fmt.Errorf("got %d,%d, want at most %d pixels", p.Resize[0], p.Resize[1], MaxImagePixels)
	case p.MaxPixels < 0 || p.MaxPixels > MaxImagePixels:
		return "imageMaxPixels", fmt.Errorf("got %d, want 1 to %d, or 0 for the default", p.MaxPixels, MaxImagePixels)
	case p.DecodeConcurrency < 0:
		return "imageDecodeConcurrency", fmt.Errorf("got %d, want >= 0", p.DecodeConcurrency)
	case p.MemoryBudget < 0:
		return "imageMemoryBudget", fmt.Errorf("got %d, want >= 0 bytes", p.MemoryBudget)
	case p.Layout != "" && p.Layout != "CHW" && p.Layout != "HWC":
		return "imageLayout", fmt.Errorf("got %q, want CHW or HWC", p.Layout)
	case p.Channels != "" && p.Channels != "BGR" && p.Channels != "RGB":
		return "imageChannels", fmt.Errorf("got %q, want BGR or RGB", p.Channels)
	case p.Scale < 0 || isBad(p.Scale):
		return "imageScale", fmt.Errorf("got %v, want a positive number", p.Scale)
	}
	for c := range 3 {
		if isBad(p.Mean[c]) {
			return "imageMean", fmt.Errorf("got %v, want finite numbers", p.Mean)
		}
		if p.Std[c] < 0 || isBad(p.Std[c]) {
			return "imageStd", fmt.Errorf("got %v, want positive numbers (0 means 1)", p.Std)
		}
	}
	return "", nil
}

func isBad(f float32) bool { return math.IsNaN(float64(f)) || math.IsInf(float64(f), 0) }

// DecodeImage decodes b64, base64 (standard alphabet, padded or not) of a
// JPEG or PNG image (encrypted when p.Key is set), into a float32 tensor [3,h,w] (or [h,w,3] with Layout
// HWC) pre-processed as p says. The image's header is checked against
// p's pixel cap before any pixel is decoded; the decode then waits for a
// slot of p.DecodeConcurrency while ctx lasts and for its cost in
// p.MemoryBudget a short while. A bad encoding, an image over the cap or
// over the whole budget is an *InputError; no budget in time is
// ErrImageBudget (transient); ctx's end is ctx's error. Safe for
// concurrent use; it does not retain b64.
func DecodeImage(ctx context.Context, b64 []byte, p ImagePre) (Tensor, error) {
	raw, err := DecodeBase64(b64)
	if err != nil {
		return Tensor{}, NewInputError(-1, "", "image is not base64: %v", err)
	}
	return DecodeImageBytes(ctx, raw, p)
}

// DecodeImageBytes is DecodeImage of raw, the encoded JPEG or PNG itself
// rather than its base64 (an OIP BYTES element carries the file's bytes):
// the same header check, budget, decode and pre-processing, the same
// errors. It does not retain raw.
func DecodeImageBytes(ctx context.Context, raw []byte, p ImagePre) (Tensor, error) {
	var err error
	if p.Key != nil {
		if raw, err = p.Key.Open(raw); err != nil {
			return Tensor{}, NewInputError(-1, "", "encrypted image (recordEncrypted): %v", err)
		}
	}
	cfg, format, err := image.DecodeConfig(bytes.NewReader(raw))
	if err != nil {
		return Tensor{}, NewInputError(-1, "", "undecodable image (want JPEG or PNG): %v", err)
	}
	if limit := p.maxPixels(); cfg.Width <= 0 || cfg.Height <= 0 || int64(cfg.Width)*int64(cfg.Height) > int64(limit) {
		return Tensor{}, NewInputError(-1, "", "image is %dx%d (%d pixels), want at most %d pixels (imageMaxPixels; imageResize sets the default)",
			cfg.Width, cfg.Height, int64(cfg.Width)*int64(cfg.Height), limit)
	}
	release, err := sharedGate(p.DecodeConcurrency, p.MemoryBudget).acquire(ctx, decodeCost(cfg, bytesPerPixel(format, cfg.ColorModel, raw), p), cfg)
	if err != nil {
		return Tensor{}, err
	}
	defer release()
	if decodeHook != nil {
		decodeHook(cfg)
	}
	img, _, err := image.Decode(bytes.NewReader(raw))
	if err != nil {
		return Tensor{}, NewInputError(-1, "", "undecodable image (want JPEG or PNG): %v", err)
	}
	return imageTensor(img, p), nil
}

// imageTensor converts img as p says. Alpha is dropped, as OpenCV's
// IMREAD_COLOR does.
func imageTensor(img image.Image, p ImagePre) Tensor {
	b := img.Bounds()
	h, w := b.Dy(), b.Dx()
	var px *image.NRGBA
	if p.Resize[0] > 0 {
		h, w = p.Resize[0], p.Resize[1]
		px = image.NewNRGBA(image.Rect(0, 0, w, h))
		draw.BiLinear.Scale(px, px.Bounds(), img, b, draw.Src, nil)
	} else if n, ok := img.(*image.NRGBA); ok && n.Rect.Min == (image.Point{}) {
		px = n
	} else {
		px = image.NewNRGBA(image.Rect(0, 0, w, h))
		stddraw.Draw(px, px.Bounds(), img, b.Min, stddraw.Src)
	}
	// order[c] is the NRGBA byte offset of output channel c.
	order := [3]int{2, 1, 0}
	if p.Channels == "RGB" {
		order = [3]int{0, 1, 2}
	}
	scale := p.Scale
	if scale == 0 {
		scale = 1
	}
	var mul, add [3]float32 // v*mul + add == (v*scale - mean) / std
	for c := range 3 {
		std := p.Std[c]
		if std == 0 {
			std = 1
		}
		mul[c] = scale / std
		add[c] = -p.Mean[c] / std
	}
	plain := mul == [3]float32{1, 1, 1} && add == [3]float32{}
	data := make([]float32, 3*h*w)
	hwc := p.Layout == "HWC"
	for y := range h {
		row := px.Pix[y*px.Stride : y*px.Stride+4*w]
		for x := range w {
			for c := range 3 {
				v := float32(row[4*x+order[c]])
				if !plain {
					v = v*mul[c] + add[c]
				}
				if hwc {
					data[(y*w+x)*3+c] = v
				} else {
					data[c*h*w+y*w+x] = v
				}
			}
		}
	}
	shape := []int64{3, int64(h), int64(w)}
	if hwc {
		shape = []int64{int64(h), int64(w), 3}
	}
	return Tensor{DType: Float32, Shape: shape, Data: data}
}

// ImageInput decodes b64 as an image for model input in, pre-processed as
// p says: the input must be of rank 3 without its batch dim. With batched
// the tensor gets a batch dim of 1. The result has the input's dtype. A
// bad image, or one that does not fit the input, is an *InputError; it
// waits for the image budget and fails as DecodeImage does.
func ImageInput(ctx context.Context, b64 []byte, in IO, batched bool, p ImagePre) (Tensor, error) {
	want := in.Shape
	if !batched && len(want) > 0 {
		want = want[1:]
	} else if batched && len(want) == 4 {
		want = want[1:]
	} else {
		want = nil
	}
	if len(want) != 3 {
		return Tensor{}, NewInputError(-1, "", "got a string (image), but model input %s is not an image (want rank 3 without the batch dim)", ShapeString(in.Shape))
	}
	t, err := DecodeImage(ctx, b64, p)
	if err != nil {
		return Tensor{}, err
	}
	if !FitsShape(t.Shape, want) {
		return Tensor{}, NewInputError(-1, "", "image tensor %s does not fit model input %s; set imageResize (h,w) or imageLayout", ShapeString(t.Shape), ShapeString(in.Shape))
	}
	if batched {
		t.Shape = append([]int64{1}, t.Shape...)
	}
	return CastFloat32(t, in.DType)
}

// CastFloat32 converts a float32 tensor to dtype dt (integers round, uint8
// saturates). A dtype it cannot feed is an *InputError.
func CastFloat32(t Tensor, dt DType) (Tensor, error) {
	src := t.Data.([]float32)
	var data any
	switch dt {
	case Float32:
		return t, nil
	case Float64:
		d := make([]float64, len(src))
		for i, v := range src {
			d[i] = float64(v)
		}
		data = d
	case Int32:
		d := make([]int32, len(src))
		for i, v := range src {
			d[i] = int32(max(math.MinInt32, min(math.MaxInt32, math.Round(float64(v)))))
		}
		data = d
	case Int64:
		d := make([]int64, len(src))
		for i, v := range src {
			d[i] = int64(max(-1<<62, min(1<<62, math.Round(float64(v)))))
		}
		data = d
	case Uint8:
		d := make([]uint8, len(src))
		for i, v := range src {
			d[i] = uint8(max(0, min(255, math.Round(float64(v)))))
		}
		data = d
	default:
		return Tensor{}, NewInputError(-1, "", "cannot feed float values to a %s input", dt)
	}
	return Tensor{DType: dt, Shape: t.Shape, Data: data}, nil
}

var errBase64 = errors.New("invalid base64")

// DecodeBase64 decodes standard base64, padded or not, with line breaks,
// as the original's Python clients write images and Arrow payloads.
func DecodeBase64(b []byte) ([]byte, error) {
	b = bytes.TrimSpace(b)
	// Two IndexByte scans (vectorised): ContainsAny walked an image's
	// 785 KB byte by byte, a quarter of a Redis Arrow decode.
	if bytes.IndexByte(b, '\n') >= 0 || bytes.IndexByte(b, '\r') >= 0 {
		b = bytes.Map(func(r rune) rune {
			if r == '\r' || r == '\n' {
				return -1
			}
			return r
		}, b)
	}
	enc := base64.StdEncoding
	if len(b)%4 != 0 {
		enc = base64.RawStdEncoding
		b = bytes.TrimRight(b, "=")
	}
	out := make([]byte, enc.DecodedLen(len(b)))
	n, err := enc.Decode(out, b)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", errBase64, err)
	}
	return out[:n], nil
}
