package infer

import (
	"context"
	"fmt"
	"image"
	"image/color"
	"runtime"
	"sync"
	"time"

	"golang.org/x/sync/semaphore"
)

// The image budget: what an image may cost before any of its pixels is
// decoded. A PNG or JPEG of a few hundred KB can claim a 5792×5792 canvas
// (134 MB once decoded), so neither the payload's size nor a pixel cap
// alone bounds a process: the cap bounds one image, the decode slots and
// the memory budget bound how many decode at once.
const (
	// MaxImagePixels is the ceiling of every pixel cap, imageMaxPixels
	// included: 2^25 (a 5792×5792 image).
	MaxImagePixels = 1 << 25
	// DefaultImageMaxPixels is the pixel cap without imageResize: 2^22
	// (2048×2048). Each pixel of an image that keeps its size costs 16
	// bytes (4 decoded, 12 in the float tensor), 64 MiB at the cap.
	DefaultImageMaxPixels = 1 << 22
	// ImageResizeFactor and ImageResizeFloor make the pixel cap with
	// imageResize h,w: ImageResizeFactor×h×w (a 16× downscale on each
	// side), at least ImageResizeFloor (2^24: a 4096×4096 image, or a 12
	// MP photo) and at most 2^25.
	ImageResizeFactor = 256
	ImageResizeFloor  = 1 << 24
	// DefaultImageMemoryBudget is the bytes the images decoding at once
	// in a process may cost (imageMemoryBudget): 512 MiB.
	DefaultImageMemoryBudget = 512 << 20
)

// imageBudgetWait is how long an image waits for memory budget before it
// is refused with ErrImageBudget: long enough for a decode or two to end,
// short enough that a busy worker hands the record back instead of
// holding it. A variable so that tests can shorten it.
var imageBudgetWait = time.Second

// decodeHook, when set (tests), runs with an image's header while the
// image holds its decode slot and its memory budget, before its pixels are
// decoded.
var decodeHook func(image.Config)

// imageGate is one process's decode slots and memory budget, shared by
// every Engine configured alike (the keys are process-wide). Safe for
// concurrent use.
type imageGate struct {
	slots       *decodeSlots
	mem         *semaphore.Weighted
	concurrency int
	budget      int64
}

var gates struct {
	sync.Mutex
	m map[[2]int64]*imageGate
}

// sharedGate returns the process's gate of concurrency decode slots (0:
// GOMAXPROCS) and budget bytes (0: DefaultImageMemoryBudget), making it
// on first use; engines of equal settings share it.
func sharedGate(concurrency int, budget int64) *imageGate {
	if concurrency <= 0 {
		concurrency = runtime.GOMAXPROCS(0)
	}
	if budget <= 0 {
		budget = DefaultImageMemoryBudget
	}
	gates.Lock()
	defer gates.Unlock()
	key := [2]int64{int64(concurrency), budget}
	if g := gates.m[key]; g != nil {
		return g
	}
	if gates.m == nil {
		gates.m = map[[2]int64]*imageGate{}
	}
	g := &imageGate{slots: newDecodeSlots(concurrency), mem: semaphore.NewWeighted(budget),
		concurrency: concurrency, budget: budget}
	gates.m[key] = g
	return g
}

// acquire takes a decode slot (cheapest image first), waiting while ctx
// lasts, then cost bytes of the memory budget, waiting at most
// imageBudgetWait. It returns the function that gives both back. A cost over the whole budget is an
// *InputError (no wait can help); no budget in time is ErrImageBudget;
// ctx's end while waiting is ctx's error.
func (g *imageGate) acquire(ctx context.Context, cost int64, cfg image.Config) (release func(), err error) {
	if cost > g.budget {
		return nil, NewInputError(-1, "", "image is %dx%d: decoding it takes %d MiB, more than the %d MiB of imageMemoryBudget",
			cfg.Width, cfg.Height, mib(cost), mib(g.budget))
	}
	if err := g.slots.acquire(ctx, cost); err != nil {
		return nil, fmt.Errorf("wait for an image decode slot (imageDecodeConcurrency %d): %w", g.concurrency, err)
	}
	if !g.mem.TryAcquire(cost) {
		wctx, cancel := context.WithTimeout(ctx, imageBudgetWait)
		err := g.mem.Acquire(wctx, cost)
		cancel()
		if err != nil {
			g.slots.release()
			if ctx.Err() != nil {
				return nil, fmt.Errorf("wait for image memory budget: %w", ctx.Err())
			}
			return nil, fmt.Errorf("%w: image %dx%d needs %d MiB of imageMemoryBudget (%d MiB), taken by other images for %v; retry later",
				ErrImageBudget, cfg.Width, cfg.Height, mib(cost), mib(g.budget), imageBudgetWait)
		}
	}
	return func() {
		g.mem.Release(cost)
		g.slots.release()
	}, nil
}

func mib(n int64) int64 { return (n + 1<<20 - 1) >> 20 }

// maxPixels returns p's pixel cap: MaxPixels when set, else the rule of
// Resize (see ImageResizeFactor), else DefaultImageMaxPixels.
func (p ImagePre) maxPixels() int {
	switch {
	case p.MaxPixels > 0:
		return p.MaxPixels
	case p.Resize[0] > 0:
		return min(MaxImagePixels, max(ImageResizeFloor, ImageResizeFactor*p.Resize[0]*p.Resize[1]))
	}
	return DefaultImageMaxPixels
}

// MaxPixels returns the pixel cap of c's images (see ImagePre.MaxPixels).
func (c Config) MaxPixels() int { return c.imagePre().maxPixels() }

// decodeCost returns the bytes decoding an image of header cfg, whose
// decoder allocates bpp bytes a pixel (see bytesPerPixel), costs as p
// says: the decoded image, the NRGBA copy it is resized or converted into
// and the float32 tensor.
func decodeCost(cfg image.Config, bpp int64, p ImagePre) int64 {
	px := int64(cfg.Width) * int64(cfg.Height)
	out := px
	if p.Resize[0] > 0 {
		out = int64(p.Resize[0]) * int64(p.Resize[1])
	}
	return px*bpp + out*(4+3*4)
}

// bytesPerPixel returns what image/png and image/jpeg allocate per pixel
// for raw, an image of format and color model m (from its header). A
// JPEG's YCbCr counts at 3 bytes a pixel, its most (4:4:4); a progressive
// JPEG's decoder also keeps every DCT coefficient, an int32 a pixel per
// component: 15 bytes in all.
func bytesPerPixel(format string, m color.Model, raw []byte) int64 {
	if format == "jpeg" && jpegProgressive(raw) {
		return 3 + 3*4
	}
	switch m {
	case color.GrayModel, color.AlphaModel:
		return 1
	case color.Gray16Model, color.Alpha16Model:
		return 2
	case color.YCbCrModel:
		return 3
	case color.RGBA64Model, color.NRGBA64Model:
		return 8
	}
	if _, ok := m.(color.Palette); ok {
		return 1
	}
	return 4 // RGBA, NRGBA, CMYK
}

// jpegProgressive reports whether the JPEG raw's frame is progressive
// (SOF2), walking its marker segments up to the frame header.
func jpegProgressive(raw []byte) bool {
	for i := 2; i+4 <= len(raw) && raw[i] == 0xff; {
		marker := raw[i+1]
		switch {
		case marker == 0xff: // fill byte
			i++
			continue
		case marker == 0xc2:
			return true
		case marker >= 0xc0 && marker <= 0xcf && marker != 0xc4 && marker != 0xc8 && marker != 0xcc:
			return false // another frame type
		case marker == 0x01 || (marker >= 0xd0 && marker <= 0xd9):
			i += 2 // no length
			continue
		}
		i += 2 + (int(raw[i+2])<<8 | int(raw[i+3]))
	}
	return false
}
