package prepost

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/cluster-serving/cluster-serving/infer"
	"github.com/cluster-serving/cluster-serving/infer/wire/kservepb"
)

// Parameter keys of a step's config.pbtxt. The step's own settings keep
// the names of the config.yaml keys (SPEC §4, §7), so a setting reads the
// same in both files.
const (
	ParamStep                   = "step"
	ParamImageResize            = "imageResize"
	ParamImageLayout            = "imageLayout"
	ParamImageChannels          = "imageChannels"
	ParamImageScale             = "imageScale"
	ParamImageMean              = "imageMean"
	ParamImageStd               = "imageStd"
	ParamImageMaxPixels         = "imageMaxPixels"
	ParamImageDecodeConcurrency = "imageDecodeConcurrency"
	ParamImageMemoryBudget      = "imageMemoryBudget"
	ParamPostProcessing         = "postProcessing"
)

// params reads a config's parameters{key: {string_value}}, noting every
// key a step asks for, so that a key no step asked for is reported by
// name (a misspelt imageResize must not silently keep the size).
type params struct {
	model string
	m     map[string]string
	asked []string
}

func newParams(cfg *kservepb.ModelConfig) *params {
	p := &params{model: cfg.GetName(), m: map[string]string{}}
	for k, v := range cfg.GetParameters() {
		p.m[k] = v.GetStringValue()
	}
	return p
}

// errorf is the error of parameter key.
func (p *params) errorf(key, format string, args ...any) error {
	return fieldError(p.model, "parameters "+key, format, args...)
}

// fieldError is ErrConfig wrapped with the model and the field at fault.
func fieldError(model, field, format string, args ...any) error {
	return fmt.Errorf("%w: model %q: %s: %s", ErrConfig, model, field, fmt.Sprintf(format, args...))
}

// str returns parameter key and whether it is set.
func (p *params) str(key string) (string, bool) {
	p.asked = append(p.asked, key)
	v, ok := p.m[key]
	return v, ok
}

// unknown reports the first parameter (in name order) that no step
// setting asked for, naming the ones step takes.
func (p *params) unknown(step string) error {
	keys := make([]string, 0, len(p.m))
	for k := range p.m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		if !slices.Contains(p.asked, k) {
			return p.errorf(k, "not a parameter of the %s step (its parameters: %s)", step, strings.Join(p.asked, ", "))
		}
	}
	return nil
}

// into parses parameter key, when set, as len(dst) comma-separated
// values (config.yaml's "h,w" and "a,b,c") into dst; unset leaves dst as
// it is. want says what the value should look like.
func into[T any](p *params, key string, parse func(string) (T, error), want string, dst ...*T) error {
	v, ok := p.str(key)
	if !ok {
		return nil
	}
	parts := strings.Split(v, ",")
	if len(parts) != len(dst) {
		return p.errorf(key, "got %q, want %s", v, want)
	}
	for i, s := range parts {
		x, err := parse(strings.TrimSpace(s))
		if err != nil {
			return p.errorf(key, "got %q, want %s", v, want)
		}
		*dst[i] = x
	}
	return nil
}

func parseFloat32(s string) (float32, error) {
	f, err := strconv.ParseFloat(s, 32)
	return float32(f), err
}

func parseInt64(s string) (int64, error) { return strconv.ParseInt(s, 10, 64) }

// imagePre reads the image step's parameters into an infer.ImagePre and
// checks it as infer checks an engine's image keys.
func imagePre(p *params) (infer.ImagePre, error) {
	var pre infer.ImagePre
	pre.Layout, _ = p.str(ParamImageLayout)
	pre.Channels, _ = p.str(ParamImageChannels)
	r, m, s := &pre.Resize, &pre.Mean, &pre.Std
	for _, err := range []error{
		into(p, ParamImageResize, strconv.Atoi, `"height,width"`, &r[0], &r[1]),
		into(p, ParamImageScale, parseFloat32, "a number", &pre.Scale),
		into(p, ParamImageMean, parseFloat32, `three numbers "a,b,c"`, &m[0], &m[1], &m[2]),
		into(p, ParamImageStd, parseFloat32, `three numbers "a,b,c"`, &s[0], &s[1], &s[2]),
		into(p, ParamImageMaxPixels, strconv.Atoi, "an integer", &pre.MaxPixels),
		into(p, ParamImageDecodeConcurrency, strconv.Atoi, "an integer", &pre.DecodeConcurrency),
		into(p, ParamImageMemoryBudget, parseInt64, "a number of bytes", &pre.MemoryBudget),
	} {
		if err != nil {
			return pre, err
		}
	}
	if key, err := pre.Validate(); err != nil {
		return pre, p.errorf(key, "%v", err)
	}
	return pre, nil
}

// topN reads the topN step's postProcessing: "topN(n)".
func topN(p *params) (int, error) {
	v, ok := p.str(ParamPostProcessing)
	if !ok {
		return 0, p.errorf(ParamPostProcessing, `required: "topN(n)", the best n scores`)
	}
	pp, err := infer.ParsePostProcessing(v)
	switch {
	case err != nil:
		return 0, p.errorf(ParamPostProcessing, "%v", err)
	case pp.Kind != "topN":
		return 0, p.errorf(ParamPostProcessing, `got %q, want "topN(n)": the topN step ranks scores (pickTopN prints a 2-D output's rows; use it in config.yaml)`, v)
	}
	return pp.N, nil
}
