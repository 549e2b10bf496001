package serving

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/cluster-serving/cluster-serving/infer"
	"github.com/cluster-serving/cluster-serving/mesh"
)

// ErrRepositoryLayout is wrapped by the errors of a model directory of a
// model repository that cannot serve: a bad name, no numeric version
// directory, or a version directory without exactly one .onnx file.
var ErrRepositoryLayout = errors.New("serving: model repository layout")

// RepoEntry is one model directory of a model repository as ScanRepository
// found it, Triton's layout: <repository>/<name>/<version>/model.onnx,
// version a positive integer.
type RepoEntry struct {
	// Name is the directory's name, the model's name.
	Name string
	// Version is the highest numeric version directory, the one that
	// serves; 0 when there is none.
	Version int64
	// Path is the model file of Version: model.onnx, or the one .onnx
	// file of the version directory.
	Path string
	// Err says why the model cannot serve (wrapping ErrRepositoryLayout
	// or a model file error of infer); nil when Path is set.
	Err error
}

// ScanRepository lists the model directories of dir, by name. Files and
// hidden entries at the top level are skipped, as are non-numeric
// sub-directories of a model (Triton's rule). A model whose layout is
// wrong is listed with Err, so that the repository index can say why; the
// error returned is only for dir itself (missing, not a directory).
func ScanRepository(dir string) ([]RepoEntry, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("model repository: %w", err)
	}
	var out []RepoEntry
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), ".") || !isDir(dir, e) {
			continue
		}
		out = append(out, scanModel(filepath.Join(dir, e.Name()), e.Name()))
	}
	slices.SortFunc(out, func(a, b RepoEntry) int { return strings.Compare(a.Name, b.Name) })
	return out, nil
}

// isDir follows a symbolic link, as deployments link versions in.
func isDir(dir string, e os.DirEntry) bool {
	if e.IsDir() {
		return true
	}
	st, err := os.Stat(filepath.Join(dir, e.Name()))
	return err == nil && st.IsDir()
}

// scanModel reads one model directory.
func scanModel(path, name string) RepoEntry {
	m := RepoEntry{Name: name}
	if err := mesh.ValidateJob(name); err != nil {
		m.Err = fmt.Errorf("%w: model directory %q: a model name may hold only letters, digits, '_' and '-' (it names a URL path and a NATS subject)",
			ErrRepositoryLayout, name)
		return m
	}
	entries, err := os.ReadDir(path)
	if err != nil {
		m.Err = fmt.Errorf("%w: %w", ErrRepositoryLayout, err)
		return m
	}
	for _, e := range entries {
		v, err := strconv.ParseInt(e.Name(), 10, 64)
		if err != nil || v <= 0 || strconv.FormatInt(v, 10) != e.Name() || !isDir(path, e) {
			continue
		}
		m.Version = max(m.Version, v)
	}
	if m.Version == 0 {
		m.Err = fmt.Errorf("%w: model %q has no version directory: want %s/1/model.onnx (versions are positive integers; the highest serves)",
			ErrRepositoryLayout, name, path)
		return m
	}
	vdir := filepath.Join(path, strconv.FormatInt(m.Version, 10))
	if file := filepath.Join(vdir, "model.onnx"); fileExists(file) {
		m.Path = file
		return m
	}
	file, err := infer.ModelFile(vdir)
	if err != nil {
		m.Err = fmt.Errorf("%w: model %q version %d: %w", ErrRepositoryLayout, name, m.Version, err)
		return m
	}
	m.Path = file
	return m
}

func fileExists(path string) bool {
	st, err := os.Stat(path)
	return err == nil && st.Mode().IsRegular()
}
