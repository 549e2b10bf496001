package infer_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"image"
	"image/color"
	"image/png"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cluster-serving/cluster-serving/infer"
	"github.com/cluster-serving/cluster-serving/infer/infertest"
)

// smallPNG returns an opaque w×h PNG.
func smallPNG(tb testing.TB, w, h int) []byte {
	return infertest.PNG(tb, w, h, func(x, y int) color.NRGBA {
		k := 4 * (y*w + x)
		return color.NRGBA{R: uint8(k), G: uint8(k + 1), B: uint8(k + 2), A: 255}
	})
}

// TestDecodeImageBombRefusedBeforeDecode: a 5792×5792 PNG of about 130 KB
// fits under the old 2^25 cap; with imageResize 224,224 its header is
// refused before its 134 MB are allocated.
func TestDecodeImageBombRefusedBeforeDecode(t *testing.T) {
	bomb := b64(infertest.BombPNG(t, 5792, 5792))
	pre := infer.ImagePre{Resize: [2]int{224, 224}}
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	_, err := infer.DecodeImage(context.Background(), bomb, pre)
	runtime.ReadMemStats(&after)
	var ie *infer.InputError
	if !errors.As(err, &ie) {
		t.Fatalf("got %v, want an *InputError", err)
	}
	for _, want := range []string{"5792x5792", fmt.Sprint(1 << 24), "imageMaxPixels"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q: want it to name %q", err, want)
		}
	}
	// The base64 decode of the payload is all it may cost: far from the
	// 134 MB of the canvas.
	if alloc := after.TotalAlloc - before.TotalAlloc; alloc > 8<<20 {
		t.Errorf("refusing the bomb allocated %d bytes, want under 8 MiB", alloc)
	}
}

// TestBombPNG checks the test's bomb: a valid PNG of its size.
func TestBombPNG(t *testing.T) {
	img, err := png.Decode(bytes.NewReader(infertest.BombPNG(t, 300, 200)))
	if err != nil || img.Bounds() != image.Rect(0, 0, 300, 200) {
		t.Fatalf("got %v, %v; want a 300x200 image", err, img)
	}
	if size := len(infertest.BombPNG(t, 5792, 5792)); size > 400<<10 {
		t.Errorf("5792x5792 bomb: %d bytes, want a few hundred KB", size)
	}
}

func TestImageMaxPixels(t *testing.T) {
	tests := []struct {
		name string
		cfg  infer.Config
		want int
	}{
		{"no resize", infer.Config{}, 1 << 22},
		{"224x224: the floor", infer.Config{ImageResize: [2]int{224, 224}}, 1 << 24},
		{"299x299: 256 times", infer.Config{ImageResize: [2]int{299, 299}}, 256 * 299 * 299},
		{"512x512: the ceiling", infer.Config{ImageResize: [2]int{512, 512}}, 1 << 25},
		{"explicit", infer.Config{ImageResize: [2]int{224, 224}, ImageMaxPixels: 1000}, 1000},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.cfg.MaxPixels(); got != tt.want {
				t.Errorf("MaxPixels: got %d, want %d", got, tt.want)
			}
		})
	}
	// A 12 MP photo passes with imageResize 224,224; the bomb does not.
	if photo, c := 4032*3024, (infer.Config{ImageResize: [2]int{224, 224}}).MaxPixels(); photo > c || 5792*5792 <= c {
		t.Errorf("cap %d of 224x224: want a 12 MP photo (%d) in, 5792x5792 out", c, photo)
	}
	// The cap is enforced from the header: 40x30 over a cap of 1000.
	raw := b64(smallPNG(t, 40, 30))
	_, err := infer.DecodeImage(context.Background(), raw, infer.ImagePre{Resize: [2]int{8, 8}, MaxPixels: 1000})
	if !strings.Contains(fmt.Sprint(err), "40x30") || !strings.Contains(fmt.Sprint(err), "at most 1000 pixels") {
		t.Errorf("40x30 with a cap of 1000: got %v, want a refusal naming both", err)
	}
	if _, err := infer.DecodeImage(context.Background(), raw, infer.ImagePre{Resize: [2]int{8, 8}, MaxPixels: 1200}); err != nil {
		t.Errorf("40x30 with a cap of 1200: got %v, want nil", err)
	}
}

// holdDecodes makes every decode block in the decode hook until the
// returned release is called; entered receives the width of each image
// that got its slot and budget, and peak is the most seen at once.
func holdDecodes(t *testing.T) (entered chan int, peak *atomic.Int32, release func()) {
	entered = make(chan int, 64)
	gate := make(chan struct{})
	var cur atomic.Int32
	peak = new(atomic.Int32)
	infer.SetDecodeHook(t, func(cfg image.Config) {
		n := cur.Add(1)
		for p := peak.Load(); n > p && !peak.CompareAndSwap(p, n); p = peak.Load() {
		}
		entered <- cfg.Width
		<-gate
		cur.Add(-1)
	})
	var once sync.Once
	release = func() { once.Do(func() { close(gate) }) }
	t.Cleanup(release)
	return entered, peak, release
}

func TestImageDecodeConcurrency(t *testing.T) {
	entered, peak, release := holdDecodes(t)
	pre := infer.ImagePre{Resize: [2]int{8, 8}, DecodeConcurrency: 2, MemoryBudget: 64 << 20}
	raw := b64(smallPNG(t, 16, 16))
	errs := make(chan error, 6)
	var wg sync.WaitGroup
	for range 6 {
		wg.Go(func() {
			_, err := infer.DecodeImage(context.Background(), raw, pre)
			errs <- err
		})
	}
	<-entered
	<-entered
	// Both slots are held: a decode waits for one while its ctx lasts.
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if _, err := infer.DecodeImage(ctx, raw, pre); !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "imageDecodeConcurrency 2") {
		t.Errorf("with both slots held: got %v, want the ctx's deadline while waiting for a slot", err)
	}
	release()
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Errorf("DecodeImage: %v", err)
		}
	}
	if got := peak.Load(); got != 2 {
		t.Errorf("decodes at once: got %d, want 2 (imageDecodeConcurrency)", got)
	}
}

func TestImageMemoryBudget(t *testing.T) {
	infer.SetImageBudgetWait(t, 20*time.Millisecond)
	raw := b64(smallPNG(t, 64, 64))
	pre := infer.ImagePre{Resize: [2]int{8, 8}, DecodeConcurrency: 4}
	cost := infer.DecodeCost(image.Config{ColorModel: color.RGBAModel, Width: 64, Height: 64}, 4, pre)
	pre.MemoryBudget = cost + cost/2 // one image fits, two do not

	t.Run("over the whole budget", func(t *testing.T) {
		_, err := infer.DecodeImage(context.Background(), b64(smallPNG(t, 128, 128)), pre)
		var ie *infer.InputError
		if !errors.As(err, &ie) || !strings.Contains(err.Error(), "imageMemoryBudget") || !strings.Contains(err.Error(), "128x128") {
			t.Fatalf("got %v, want an *InputError naming the size and imageMemoryBudget", err)
		}
	})
	t.Run("budget taken", func(t *testing.T) {
		entered, _, release := holdDecodes(t)
		first := make(chan error, 1)
		go func() {
			_, err := infer.DecodeImage(context.Background(), raw, pre)
			first <- err
		}()
		<-entered
		_, err := infer.DecodeImage(context.Background(), raw, pre)
		if !errors.Is(err, infer.ErrImageBudget) || !strings.Contains(err.Error(), "busy: image decode memory budget") ||
			!strings.Contains(err.Error(), "imageMemoryBudget") {
			t.Errorf("second image while the first holds the budget: got %v, want ErrImageBudget", err)
		}
		release()
		if err := <-first; err != nil {
			t.Errorf("first image: %v", err)
		}
		// The budget came back: the same image decodes now.
		if _, err := infer.DecodeImage(context.Background(), raw, pre); err != nil {
			t.Errorf("after the first ended: got %v, want nil", err)
		}
	})
}

func TestConfigValidateImageBudget(t *testing.T) {
	tests := []struct {
		cfg infer.Config
		key string
	}{
		{infer.Config{ImageMaxPixels: -1}, "imageMaxPixels"},
		{infer.Config{ImageMaxPixels: 1<<25 + 1}, "imageMaxPixels"},
		{infer.Config{ImageDecodeConcurrency: -1}, "imageDecodeConcurrency"},
		{infer.Config{ImageMemoryBudget: -1}, "imageMemoryBudget"},
	}
	for _, tt := range tests {
		t.Run(tt.key, func(t *testing.T) {
			tt.cfg.ModelPath = "m.onnx"
			wantValidate(t, tt.cfg, tt.key)
		})
	}
}

func TestImageBytesPerPixel(t *testing.T) {
	// Segments up to the frame header: an APP0 of length 0x12, then SOF0
	// (baseline) or SOF2 (progressive).
	app0 := append([]byte{0xff, 0xd8, 0xff, 0xe0, 0x00, 0x12}, make([]byte, 16)...)
	sof := func(marker byte) []byte { return append(slices.Clone(app0), 0xff, marker, 0x00, 0x11) }
	tests := []struct {
		name   string
		format string
		model  color.Model
		raw    []byte
		want   int64
	}{
		{"baseline JPEG", "jpeg", color.YCbCrModel, fixture(t, "images/cat1.jpeg"), 3},
		{"baseline header", "jpeg", color.YCbCrModel, sof(0xc0), 3},
		{"progressive JPEG", "jpeg", color.YCbCrModel, sof(0xc2), 15},
		{"RGBA PNG", "png", color.RGBAModel, nil, 4},
		{"16-bit PNG", "png", color.NRGBA64Model, nil, 8},
		{"gray PNG", "png", color.GrayModel, nil, 1},
		{"paletted PNG", "png", color.Palette{color.Black}, nil, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := infer.BytesPerPixel(tt.format, tt.model, tt.raw); got != tt.want {
				t.Errorf("got %d bytes a pixel, want %d", got, tt.want)
			}
		})
	}
}

// TestImageDecodeCheapestFirst: with the one slot taken, a big image and
// then a small one wait; the freed slot goes to the small one.
func TestImageDecodeCheapestFirst(t *testing.T) {
	entered, _, release := holdDecodes(t)
	pre := infer.ImagePre{Resize: [2]int{8, 8}, DecodeConcurrency: 1, MemoryBudget: 32 << 20}
	decode := func(raw []byte) error {
		_, err := infer.DecodeImage(context.Background(), raw, pre)
		return err
	}
	var wg sync.WaitGroup
	errs := make([]error, 3)
	wg.Go(func() { errs[0] = decode(b64(smallPNG(t, 20, 20))) })
	<-entered
	wg.Go(func() { errs[1] = decode(b64(smallPNG(t, 512, 512))) })
	for infer.ImageSlotWaiters(1, 32<<20) < 1 {
		runtime.Gosched()
	}
	wg.Go(func() { errs[2] = decode(b64(smallPNG(t, 16, 16))) })
	for infer.ImageSlotWaiters(1, 32<<20) < 2 {
		runtime.Gosched()
	}
	release()
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("decode %d: %v", i, err)
		}
	}
	close(entered)
	var order []int
	for w := range entered {
		order = append(order, w)
	}
	if want := []int{16, 512}; !slices.Equal(order, want) {
		t.Errorf("widths of the waiting images in decode order: got %v, want %v (cheapest first)", order, want)
	}
}
