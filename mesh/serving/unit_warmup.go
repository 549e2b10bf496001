package serving

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"github.com/cluster-serving/cluster-serving/infer"
	"github.com/cluster-serving/cluster-serving/infer/modelconfig"
	"github.com/cluster-serving/cluster-serving/infer/wire/kservepb"
)

// warmUp runs the model_warmup samples of completed (the model's
// completed config.pbtxt; nil: none) on e before the unit is made, as
// Triton warms a model up before it is ready: a model whose warmup fails
// does not serve, and the repository index shows it UNAVAILABLE with the
// error, which wraps ErrModelConfig and names the sample and its cause.
// Input files are read from the model directory's warmup/ folder (see
// modelDir). It logs one line per sample, with its runs and duration.
func warmUp(e *infer.Engine, completed *kservepb.ModelConfig, m Model, log *slog.Logger) error {
	samples, err := modelconfig.Warmups(completed)
	if err != nil {
		return fmt.Errorf("%w: model %q: config.pbtxt: %w", ErrModelConfig, m.Name, err)
	}
	dir := modelDir(m.Path)
	for _, s := range samples {
		began := time.Now()
		runs, err := e.Warmup(context.Background(), dir, s)
		if err != nil {
			return fmt.Errorf("%w: model %q: config.pbtxt: %w", ErrModelConfig, m.Name, err)
		}
		log.Info("model warmed up", "name", m.Name, "version", m.Version, "sample", s.Name, "batch_size", s.Rows,
			"runs", runs, "took", time.Since(began).Round(time.Microsecond))
	}
	return nil
}

// modelDir is the model directory of a model file in Triton's layout,
// <model>/<version>/model.onnx (or of a version directory, when path is
// one): the directory that holds config.pbtxt and warmup/.
func modelDir(path string) string {
	if st, err := os.Stat(path); err == nil && st.IsDir() {
		return filepath.Dir(filepath.Clean(path))
	}
	return filepath.Dir(filepath.Dir(path))
}
