package infer_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cluster-serving/cluster-serving/infer"
)

func TestModelFile(t *testing.T) {
	tests := []struct {
		name    string
		files   []string // a trailing "/" makes a directory
		want    string   // file name of the result, when no error
		wantErr error
		wantMsg []string // substrings of the error
	}{
		{"one onnx", []string{"model.onnx", "README.md"}, "model.onnx", nil, nil},
		{"no files", nil, "", infer.ErrNoModel, []string{"exactly one *.onnx"}},
		{"two onnx", []string{"a.onnx", "b.onnx"}, "", infer.ErrManyModels, []string{"a.onnx, b.onnx"}},
		{"tensorflow saved model", []string{"saved_model.pb", "variables/"}, "", infer.ErrUnsupportedFormat, []string{"TensorFlow", "tf2onnx"}},
		{"tensorflow frozen graph", []string{"frozen.pb"}, "", infer.ErrUnsupportedFormat, []string{"TensorFlow", "frozen.pb", "tf2onnx"}},
		{"pytorch", []string{"model.pt"}, "", infer.ErrUnsupportedFormat, []string{"PyTorch", "torch.onnx.export"}},
		{"pytorch pth", []string{"weights.pth"}, "", infer.ErrUnsupportedFormat, []string{"PyTorch", "torch.onnx.export"}},
		{"caffe", []string{"deploy.prototxt", "net.caffemodel"}, "", infer.ErrUnsupportedFormat, []string{"Caffe", "caffe2onnx"}},
		{"openvino", []string{"model.xml", "model.bin"}, "", infer.ErrUnsupportedFormat, []string{"OpenVINO", "no direct ONNX export", "source framework"}},
		{"bigdl", []string{"resnet.model"}, "", infer.ErrUnsupportedFormat, []string{"BigDL", "export the source model"}},
		{"onnx beside foreign files", []string{"model.onnx", "model.pt"}, "model.onnx", nil, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			for _, f := range tt.files {
				p := filepath.Join(dir, f)
				var err error
				if strings.HasSuffix(f, "/") {
					err = os.Mkdir(p, 0o755)
				} else {
					err = os.WriteFile(p, []byte("x"), 0o644)
				}
				if err != nil {
					t.Fatal(err)
				}
			}
			got, err := infer.ModelFile(dir)
			if tt.wantErr == nil {
				if err != nil {
					t.Fatalf("ModelFile: got error %v, want nil", err)
				}
				if want := filepath.Join(dir, tt.want); got != want {
					t.Errorf("ModelFile: got %q, want %q", got, want)
				}
				return
			}
			if !errors.Is(err, tt.wantErr) {
				t.Fatalf("ModelFile: got error %v, want %v", err, tt.wantErr)
			}
			for _, s := range tt.wantMsg {
				if !strings.Contains(err.Error(), s) {
					t.Errorf("ModelFile: got error %q, want it to contain %q", err, s)
				}
			}
		})
	}
}

func TestModelFileOnnxPath(t *testing.T) {
	p := model("add_f32")
	if got, err := infer.ModelFile(p); err != nil || got != p {
		t.Errorf("ModelFile(%q) = %q, %v; want %q, nil", p, got, err, p)
	}
	if _, err := infer.ModelFile(filepath.Join(t.TempDir(), "missing")); err == nil {
		t.Error("ModelFile(missing path): got nil error, want one")
	}
}
