package infer

import (
	"fmt"
)

// Batching modes (Config.Batching): whether the Engine stacks the records
// of concurrent requests along dim 0 into one run.
const (
	// BatchingAuto (the default, "") batches when dim 0 of every input and
	// every output is dynamic: only then do stacked records fit the model
	// and its answer split back into one per record.
	BatchingAuto = "auto"
	// BatchingOn batches even when an output's dim 0 is fixed or unknown
	// in the graph (a model exported without output shapes). Refused, with
	// ErrBatching, when an input is a scalar or has a fixed dim 0: ONNX
	// Runtime rejects stacked records there. A run whose output dim 0 is
	// not the stacked row count fails that batch's requests.
	BatchingOn = "on"
	// BatchingOff runs every record alone.
	BatchingOff = "off"
)

// Batchings lists the values Config.Batching accepts ("" is auto).
var Batchings = []string{BatchingAuto, BatchingOn, BatchingOff}

// Reasons DecideBatching gives when it batches.
const (
	reasonDynamic = "dim 0 of every input and output is dynamic"
	reasonOn      = "config batching: on"
	reasonOff     = "config batching: off"
)

// DecideBatching sets info.DynamicBatch and info.BatchReason from the
// model's shapes and mode (a Batchings value, "" = auto) and returns
// info. It returns an error wrapping ErrBatching when mode is "on" and an
// input cannot be stacked, and one wrapping ErrConfigValidation for an
// unknown mode.
func DecideBatching(info ModelInfo, mode string) (ModelInfo, error) {
	switch mode {
	case "", BatchingAuto:
		info.DynamicBatch, info.BatchReason = true, reasonDynamic
		if why := stackBlocker(info.Inputs, "input"); why != "" {
			info.DynamicBatch, info.BatchReason = false, why
		} else if why := stackBlocker(info.Outputs, "output"); why != "" {
			info.DynamicBatch, info.BatchReason = false, why
		}
	case BatchingOn:
		if why := stackBlocker(info.Inputs, "input"); why != "" {
			return ModelInfo{}, fmt.Errorf("%w: batching %q: %s, so records cannot be stacked along it", ErrBatching, mode, why)
		}
		info.DynamicBatch, info.BatchReason = true, reasonOn
	case BatchingOff:
		info.DynamicBatch, info.BatchReason = false, reasonOff
	default:
		return ModelInfo{}, fmt.Errorf("%w: batching: got %q, want auto, on or off", ErrConfigValidation, mode)
	}
	return info, nil
}

// stackBlocker says why records cannot stack along dim 0 of ios (kind is
// "input" or "output"), or "" when they can.
func stackBlocker(ios []IO, kind string) string {
	if len(ios) == 0 {
		return "model has no " + kind + "s"
	}
	for _, io := range ios {
		switch {
		case len(io.Shape) == 0:
			return fmt.Sprintf("%s %q is a scalar", kind, io.Name)
		case io.Shape[0] >= 0:
			return fmt.Sprintf("%s %q has fixed dim 0 = %d", kind, io.Name, io.Shape[0])
		}
	}
	return ""
}
