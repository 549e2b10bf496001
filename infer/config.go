package infer

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"
	"time"
)

// Config configures an Engine. The zero value of every field but ModelPath
// means its default.
type Config struct {
	// ModelPath is a model directory holding exactly one *.onnx file, or an
	// .onnx file. Required. Config key: modelPath.
	ModelPath string
	// Parallelism is the number of sessions (runners) that run batches
	// concurrently. Default 1. Config key: modelParallelism.
	Parallelism int
	// Threads is the number of ONNX Runtime intra-op threads per session.
	// Default 1. Config key: threadPerModel.
	Threads int
	// MaxBatch is the most records stacked into one run. Default 16.
	MaxBatch int
	// MaxWait is how long a busy-then-free runner may wait, counted from the
	// oldest queued record's arrival, to fill a batch. Default 0: never
	// wait. An idle runner never waits.
	MaxWait time.Duration
	// QueueSize bounds the records waiting for a runner; when full, calls
	// fail with ErrQueueFull instead of blocking. A request of more records
	// than MaxBatch goes in chunks, so it need not fit (see Engine.Infer).
	// Default 1024.
	QueueSize int
	// PostProcessing is "", "topN(n)" or "pickTopN(n)". Config key:
	// postProcessing.
	PostProcessing string
	// InputAlreadyBatched means each record already carries its batch dim.
	// Config key: inputAlreadyBatched.
	InputAlreadyBatched bool
	// HoldIdle makes MaxWait hold a record that finds a runner idle too
	// (see BatcherConfig.HoldIdle): Triton's dynamic_batching with
	// max_queue_delay_microseconds, from a model's config.pbtxt.
	HoldIdle bool
	// PreferredBatch are the batch sizes (rows) a batch runs at as soon
	// as the queue reaches one (see BatcherConfig.Preferred): Triton's
	// preferred_batch_size, from a model's config.pbtxt.
	PreferredBatch []int
	// MaxRequestBatch is the most rows a record may carry along dim 0
	// (Triton's max_batch_size, from a model's config.pbtxt): a record
	// with more is an *InputError naming it. 0: no limit.
	MaxRequestBatch int
	// ImageResize is the (height, width) images are resized to (bilinear)
	// before they feed the model; zero keeps their size. Config key:
	// imageResize ("h,w").
	ImageResize [2]int
	// ImageLayout is "CHW" (default, the original's) or "HWC". Config key:
	// imageLayout.
	ImageLayout string
	// ImageChannels is the channel order, "BGR" (default, the original's) or
	// "RGB". Config key: imageChannels.
	ImageChannels string
	// ImageScale multiplies every 0-255 pixel value; default 1. Config key:
	// imageScale.
	ImageScale float32
	// ImageMean and ImageStd normalise each channel, in ImageChannels
	// order, after scaling: (v*scale - mean) / std. Zero mean and zero std
	// (taken as 1) leave values as they are. Config keys: imageMean,
	// imageStd.
	ImageMean, ImageStd [3]float32
	// ImageMaxPixels bounds an image's width×height, read from its header
	// before any pixel is decoded. 0: 256×h×w of ImageResize, at least
	// 2^24 and at most 2^25 (ImageResizeFactor); without ImageResize 2^22
	// (DefaultImageMaxPixels). At most 2^25. Config key: imageMaxPixels.
	ImageMaxPixels int
	// ImageDecodeConcurrency bounds the images decoding at once in the
	// process (shared by the engines configured alike); a decode waits for
	// a slot while its ctx lasts. 0: runtime.GOMAXPROCS(0). Config key:
	// imageDecodeConcurrency.
	ImageDecodeConcurrency int
	// ImageMemoryBudget bounds the bytes, decoded image plus float tensor,
	// of the images decoding at once in the process; an image that gets
	// no room within a second fails with ErrImageBudget (503). 0: 512 MiB
	// (DefaultImageMemoryBudget). Config key: imageMemoryBudget.
	ImageMemoryBudget int64
	// ModelKey, when set, means the model file is encrypted the original's
	// way (OpenModel) and is decrypted into memory with it; the plain model
	// never touches the disk. Nil: the file is plain. Config key:
	// modelEncrypted (the key itself comes from the environment).
	ModelKey *Key
	// RecordKey, when set, means the images of Redis records are encrypted
	// (Key.Open after base64); the Redis codecs decrypt them. Nil: plain.
	// Config key: recordEncrypted.
	RecordKey *Key
	// ExecutionProvider is where the sessions run: "cpu" (default, ""),
	// "cuda", "tensorrt" or "openvino" (see Providers). A provider the
	// ONNX Runtime library lacks fails New with ErrExecutionProvider,
	// naming what the library offers. Config key: executionProvider.
	ExecutionProvider string
	// ThreadSpinning lets ONNX Runtime's intra-op threads spin-wait for
	// work between parallel sections (its allow_spinning). Off by default:
	// the threads share the cores with decoding, NATS and the doors, and
	// the CPU they spin away is theirs. ResNet-50 on 2 cores (bench -only
	// resnet, 2 interleaved pairs, 2026-11-25): CPU per image 94.5 and 92.3
	// ms off, against 102.3 and 98.6 ms on, raw and served alike. Config
	// key: threadSpinning.
	ThreadSpinning bool
	// Batching is "auto" (default, ""), "on" or "off": whether records of
	// concurrent requests are stacked along dim 0 (see DecideBatching).
	// Config key: batching.
	Batching string
	// Reshape maps an input or output name to its reshape (Triton's
	// config.pbtxt reshape, see Reshape): clients send and receive its
	// Dims, which Info shows, and the graph takes and gives its Shape. A
	// name the model lacks, or a Shape that does not fit its graph, fails
	// New. Nil: none.
	Reshape map[string]Reshape
	// Hooks observe the engine (metrics); nil fields are skipped.
	Hooks Hooks
}

// Defaults for the zero-valued Config fields.
const (
	DefaultParallelism = 1
	DefaultThreads     = 1
	DefaultMaxBatch    = 16
	DefaultQueueSize   = 1024
)

// Validate checks c, naming the bad key in an error that wraps
// ErrConfigValidation. It does not touch the file system.
func (c Config) Validate() error {
	bad := func(key, format string, args ...any) error {
		return fmt.Errorf("%w: %s: %s", ErrConfigValidation, key, fmt.Sprintf(format, args...))
	}
	switch {
	case c.ModelPath == "":
		return bad("modelPath", "required")
	case c.Parallelism < 0:
		return bad("modelParallelism", "got %d, want >= 0", c.Parallelism)
	case c.Threads < 0:
		return bad("threadPerModel", "got %d, want >= 0", c.Threads)
	case c.MaxBatch < 0:
		return bad("maxBatch", "got %d, want >= 0", c.MaxBatch)
	case c.MaxWait < 0:
		return bad("maxWait", "got %v, want >= 0", c.MaxWait)
	case c.QueueSize < 0:
		return bad("queueSize", "got %d, want >= 0", c.QueueSize)
	}
	if c.ExecutionProvider != "" && !slices.Contains(Providers, c.ExecutionProvider) {
		return bad("executionProvider", "got %q, want one of %s", c.ExecutionProvider, strings.Join(Providers, ", "))
	}
	if c.Batching != "" && !slices.Contains(Batchings, c.Batching) {
		return bad("batching", "got %q, want one of %s", c.Batching, strings.Join(Batchings, ", "))
	}
	if _, err := ParsePostProcessing(c.PostProcessing); err != nil {
		return bad("postProcessing", "%v", err)
	}
	if key, err := c.imagePre().validate(); err != nil {
		return bad(key, "%v", err)
	}
	return nil
}

// imagePre returns the image pre-processing settings of c.
func (c Config) imagePre() ImagePre {
	return ImagePre{
		Resize:   c.ImageResize,
		Layout:   c.ImageLayout,
		Channels: c.ImageChannels,
		Scale:    c.ImageScale,
		Mean:     c.ImageMean,
		Std:      c.ImageStd,

		MaxPixels:         c.ImageMaxPixels,
		DecodeConcurrency: c.ImageDecodeConcurrency,
		MemoryBudget:      c.ImageMemoryBudget,
	}
}

func (c Config) withDefaults() Config {
	c.Parallelism = cmp.Or(c.Parallelism, DefaultParallelism)
	c.Threads = cmp.Or(c.Threads, DefaultThreads)
	c.MaxBatch = cmp.Or(c.MaxBatch, DefaultMaxBatch)
	c.QueueSize = cmp.Or(c.QueueSize, DefaultQueueSize)
	return c
}

// Hooks let a caller observe an Engine without infer knowing how the
// figures are kept (cmd feeds them to OpenTelemetry metrics). Each may be
// called from many goroutines at once and must not block.
type Hooks struct {
	// Stage reports the time one request (decode, encode) or one batch
	// (infer) spent in a stage: "decode", "infer" or "encode".
	Stage func(ctx context.Context, stage string, d time.Duration)
	// Batch reports the records and rows of each run.
	Batch func(items, rows int)
}

// Stage names reported through Hooks.Stage.
const (
	StageDecode = "decode"
	StageInfer  = "infer"
	StageEncode = "encode"
)
