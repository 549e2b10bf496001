package infer

import (
	"fmt"
	"strings"

	ort "github.com/yalue/onnxruntime_go"
)

// Execution providers (Config.ExecutionProvider): where ONNX Runtime runs
// a session's nodes. CPU is built into every library; the others exist
// only in libraries built with them (the onnxruntime-linux-x64-gpu
// release has CUDA and TensorRT; OpenVINO needs its own build). Nodes a
// provider cannot run fall back to the CPU, as ONNX Runtime does.
const (
	ProviderCPU      = "cpu"
	ProviderCUDA     = "cuda"
	ProviderTensorRT = "tensorrt"
	ProviderOpenVINO = "openvino"
)

// Providers lists the values Config.ExecutionProvider accepts.
var Providers = []string{ProviderCPU, ProviderCUDA, ProviderTensorRT, ProviderOpenVINO}

// providerORTName is the name ONNX Runtime gives each provider.
var providerORTName = map[string]string{
	ProviderCPU:      "CPUExecutionProvider",
	ProviderCUDA:     "CUDAExecutionProvider",
	ProviderTensorRT: "TensorrtExecutionProvider",
	ProviderOpenVINO: "OpenVINOExecutionProvider",
}

// appendProvider asks opts to run on provider ("" and "cpu" need
// nothing). A provider the library lacks (or cannot load: a GPU build
// without its CUDA libraries) returns an error wrapping
// ErrExecutionProvider that names what the library offers.
func appendProvider(opts *ort.SessionOptions, provider string) error {
	if provider == "" || provider == ProviderCPU {
		return nil
	}
	err := tryProvider(opts, provider)
	if err == nil {
		return nil
	}
	offers, _ := AvailableProviders()
	only := ""
	if len(offers) == 1 {
		only = " only"
	}
	hint := ""
	if provider == ProviderCUDA || provider == ProviderTensorRT {
		hint = fmt.Sprintf(" (%s needs a GPU build of ONNX Runtime, such as its release onnxruntime-linux-x64-gpu-%s, as onnxruntimeLib or $ONNXRUNTIME_LIB, with CUDA 12 and cuDNN 9 where the loader finds them)", provider, ORTVersion)
	}
	return fmt.Errorf("%w: executionProvider %q: this ONNX Runtime library (%s) offers %s%s: %v%s",
		ErrExecutionProvider, provider, libraryPath(), strings.Join(offers, ", "), only, err, hint)
}

// tryProvider appends provider to opts with ONNX Runtime's defaults
// (device 0).
func tryProvider(opts *ort.SessionOptions, provider string) error {
	switch provider {
	case ProviderCUDA:
		return appendWithOptions(ort.NewCUDAProviderOptions, opts.AppendExecutionProviderCUDA)
	case ProviderTensorRT:
		return appendWithOptions(ort.NewTensorRTProviderOptions, opts.AppendExecutionProviderTensorRT)
	case ProviderOpenVINO:
		return opts.AppendExecutionProviderOpenVINO(nil)
	}
	return fmt.Errorf("unknown execution provider %q: want one of %s", provider, strings.Join(Providers, ", "))
}

// appendWithOptions makes a provider's default options, appends the
// provider with them, and frees them.
func appendWithOptions[O interface{ Destroy() error }](newOptions func() (O, error), appendWith func(O) error) error {
	po, err := newOptions()
	if err != nil {
		return err
	}
	defer po.Destroy()
	return appendWith(po)
}

// AvailableProviders returns the ONNX Runtime names of the execution
// providers of Providers that the initialised library can use, CPU
// first. onnxruntime_go does not wrap OrtApi::GetAvailableProviders, so
// it asks: each provider is appended to a scratch session options, and
// one the library lacks (or cannot load) fails there. Init must have been
// called (else ErrNotInitialized).
func AvailableProviders() ([]string, error) {
	if !initialized() {
		return nil, ErrNotInitialized
	}
	// A provider the library lacks is the expected answer here, not an
	// error worth ONNX Runtime's log lines; Init's level comes back after.
	_ = ort.SetEnvironmentLogLevel(ort.LoggingLevelFatal)
	defer ort.SetEnvironmentLogLevel(ort.LoggingLevelError)
	out := []string{providerORTName[ProviderCPU]}
	for _, p := range Providers[1:] {
		opts, err := ort.NewSessionOptions()
		if err != nil {
			return out, fmt.Errorf("session options: %w", err)
		}
		if tryProvider(opts, p) == nil {
			out = append(out, providerORTName[p])
		}
		_ = opts.Destroy()
	}
	return out, nil
}

func libraryPath() string {
	initMu.Lock()
	defer initMu.Unlock()
	return initPath
}
