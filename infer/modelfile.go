package infer

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

// foreignFormat is a model layout of a framework the original Cluster Serving
// ran and we do not: how to spot it and how to get an ONNX model from it.
type foreignFormat struct {
	name   string
	detect func(names map[string]bool, exts map[string][]string) []string // files that identify it, or nil
	howTo  string
}

var foreignFormats = []foreignFormat{
	{
		name: "TensorFlow",
		detect: func(names map[string]bool, exts map[string][]string) []string {
			var found []string
			if names["saved_model.pb"] {
				found = append(found, "saved_model.pb")
			}
			if names["variables/"] {
				found = append(found, "variables/")
			}
			found = append(found, exts[".pb"]...)
			return dedup(found)
		},
		howTo: "export it with tf2onnx: python -m tf2onnx.convert --saved-model DIR --output model.onnx (or --graphdef model.pb)",
	},
	{
		name: "PyTorch",
		detect: func(_ map[string]bool, exts map[string][]string) []string {
			return append(append([]string(nil), exts[".pt"]...), exts[".pth"]...)
		},
		howTo: "export it with torch.onnx.export(model, example_input, \"model.onnx\")",
	},
	{
		name: "Caffe",
		detect: func(_ map[string]bool, exts map[string][]string) []string {
			return append(append([]string(nil), exts[".prototxt"]...), exts[".caffemodel"]...)
		},
		howTo: "convert the .prototxt and .caffemodel with caffe2onnx (python -m caffe2onnx.convert)",
	},
	{
		name: "OpenVINO",
		detect: func(_ map[string]bool, exts map[string][]string) []string {
			if len(exts[".xml"]) == 0 || len(exts[".bin"]) == 0 {
				return nil
			}
			return append(append([]string(nil), exts[".xml"]...), exts[".bin"]...)
		},
		howTo: "OpenVINO IR has no direct ONNX export: re-export the original model from its source framework to ONNX",
	},
	{
		name: "BigDL",
		detect: func(_ map[string]bool, exts map[string][]string) []string {
			return exts[".model"]
		},
		howTo: "BigDL models cannot be converted: export the source model (e.g. with torch.onnx.export or tf2onnx) to ONNX",
	},
}

func dedup(s []string) []string {
	seen := map[string]bool{}
	var out []string
	for _, x := range s {
		if !seen[x] {
			seen[x] = true
			out = append(out, x)
		}
	}
	return out
}

// ModelFile resolves a model path to the one .onnx file to load. path is an
// .onnx file, or a directory holding exactly one *.onnx file. A directory
// holding another framework's files returns an error wrapping
// ErrUnsupportedFormat that names the format and how to export it to ONNX;
// no .onnx file returns ErrNoModel, several ErrManyModels. Other file system
// errors are returned wrapped.
func ModelFile(path string) (string, error) {
	st, err := os.Stat(path)
	if err != nil {
		return "", fmt.Errorf("model path %q: %w", path, err)
	}
	if !st.IsDir() {
		if strings.EqualFold(filepath.Ext(path), ".onnx") {
			return path, nil
		}
		if f := detectForeign(filepath.Dir(path), []string{filepath.Base(path)}, nil); f != nil {
			return "", f
		}
		return "", fmt.Errorf("%w: %q is not an .onnx file", ErrNoModel, path)
	}
	entries, err := os.ReadDir(path)
	if err != nil {
		return "", fmt.Errorf("model path %q: %w", path, err)
	}
	var onnx, files, dirs []string
	for _, e := range entries {
		if e.IsDir() {
			dirs = append(dirs, e.Name())
			continue
		}
		files = append(files, e.Name())
		if strings.EqualFold(filepath.Ext(e.Name()), ".onnx") {
			onnx = append(onnx, e.Name())
		}
	}
	switch {
	case len(onnx) == 1:
		return filepath.Join(path, onnx[0]), nil
	case len(onnx) > 1:
		sort.Strings(onnx)
		return "", fmt.Errorf("%w in %q: %s; keep exactly one", ErrManyModels, path, strings.Join(onnx, ", "))
	}
	if err := detectForeign(path, files, dirs); err != nil {
		return "", err
	}
	return "", fmt.Errorf("%w in %q: want exactly one *.onnx file", ErrNoModel, path)
}

func detectForeign(dir string, files, dirs []string) error {
	names := map[string]bool{}
	exts := map[string][]string{}
	for _, f := range files {
		names[f] = true
		ext := strings.ToLower(filepath.Ext(f))
		exts[ext] = append(exts[ext], f)
	}
	for _, d := range dirs {
		names[d+"/"] = true
	}
	for _, f := range foreignFormats {
		if found := f.detect(names, exts); len(found) > 0 {
			return fmt.Errorf("%w: %q holds a %s model (%s), not ONNX; %s",
				ErrUnsupportedFormat, dir, f.name, strings.Join(found, ", "), f.howTo)
		}
	}
	return nil
}
