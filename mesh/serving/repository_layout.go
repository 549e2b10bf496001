package serving

import (
	"cmp"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/cluster-serving/cluster-serving/infer"
	"github.com/cluster-serving/cluster-serving/infer/modelconfig"
	"github.com/cluster-serving/cluster-serving/infer/prepost"
	"github.com/cluster-serving/cluster-serving/infer/wire/kservepb"
	"github.com/cluster-serving/cluster-serving/mesh"
	"github.com/cluster-serving/cluster-serving/mesh/pipeline"
)

// ErrRepositoryLayout is wrapped by the errors of a model directory of a
// model repository that cannot serve: a bad name, no numeric version
// directory, or a version directory without exactly one .onnx file.
var ErrRepositoryLayout = errors.New("serving: model repository layout")

// RepoEntry is one model directory of a model repository as ScanRepository
// found it, Triton's layout: <repository>/<name>/<version>/model.onnx,
// version a positive integer, and an optional <name>/config.pbtxt.
type RepoEntry struct {
	// Name is the directory's name, the model's name.
	Name string
	// Version is the highest version that serves (of Versions); 0 when
	// there is none.
	Version int64
	// Path is the model file of Version: model.onnx, or the one .onnx
	// file of the version directory.
	Path string
	// Versions are the versions the config's version_policy serves
	// (default: the highest), ascending, each with its file or error.
	Versions []RepoVersion
	// Config is the model's config.pbtxt as written (see
	// modelconfig.Read); nil without one. Warnings are what the read
	// tolerated (unknown fields).
	Config   *kservepb.ModelConfig
	Warnings []string
	// Err says why the model cannot serve (wrapping ErrRepositoryLayout,
	// ErrModelConfig or a model file error of infer): no version of it
	// can, or its config.pbtxt is at fault. nil when Path is set.
	Err error
}

// RepoVersion is one version directory of a model that its
// version_policy serves.
type RepoVersion struct {
	Version int64
	// Path is its model file; Err why it has none (ErrRepositoryLayout).
	Path string
	Err  error
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
	if m.Config, m.Warnings, m.Err = readConfig(path, name); m.Err != nil {
		return m
	}
	onDisk, err := versionDirs(path)
	if err != nil {
		m.Err = fmt.Errorf("%w: %w", ErrRepositoryLayout, err)
		return m
	}
	fileless := pipeline.IsEnsemble(m.Config) || prepost.Is(m.Config)
	if len(onDisk) == 0 && fileless {
		// Triton's repositories give an ensemble an empty 1/, which a git
		// checkout drops: without one it is version 1.
		onDisk = []int64{1}
	}
	if len(onDisk) == 0 {
		m.Err = fmt.Errorf("%w: model %q has no version directory: want %s/1/model.onnx (versions are positive integers; the highest serves)",
			ErrRepositoryLayout, name, path)
		return m
	}
	versions, err := modelconfig.Versions(cmp.Or(m.Config, &kservepb.ModelConfig{}), onDisk)
	if err != nil {
		m.Err = fmt.Errorf("%w: model %q: config.pbtxt: %w", ErrModelConfig, name, err)
		return m
	}
	usable := false
	for _, v := range versions {
		rv := scanVersion(path, name, v, fileless)
		m.Versions = append(m.Versions, rv)
		usable = usable || rv.Err == nil
	}
	if len(m.Versions) == 0 {
		m.Err = fmt.Errorf("%w: model %q: config.pbtxt: version_policy serves none of the versions %v", ErrModelConfig, name, onDisk)
		return m
	}
	top := m.Versions[len(m.Versions)-1]
	m.Version, m.Path = top.Version, top.Path
	if !usable {
		m.Err = top.Err
	}
	return m
}

// readConfig reads the model's config.pbtxt (nil, nil, nil without one)
// and refuses one this server cannot serve at all: a platform or backend
// other than ONNX (modelconfig.Check's message says how to export), or
// a name other than the directory's (as Triton).
func readConfig(path, name string) (*kservepb.ModelConfig, []string, error) {
	cfg, warnings, err := modelconfig.Read(path)
	switch {
	case err != nil:
		return nil, nil, fmt.Errorf("%w: model %q: %w", ErrModelConfig, name, err)
	case cfg == nil:
		return nil, nil, nil
	case cfg.Name != "" && cfg.Name != name:
		return nil, nil, fmt.Errorf("%w: model %q: config.pbtxt: name %q differs from the model directory's name", ErrModelConfig, name, cfg.Name)
	}
	// Only the platform is checked before a version loads (there is no
	// graph yet: its inputs and outputs are checked once it has); an
	// ensemble is checked against its steps' models when it loads.
	if pipeline.IsEnsemble(cfg) || prepost.Is(cfg) {
		return cfg, warnings, nil
	}
	if err := modelconfig.CheckPlatform(cfg); err != nil {
		return nil, nil, fmt.Errorf("%w: model %q: config.pbtxt: %w", ErrModelConfig, name, err)
	}
	return cfg, warnings, nil
}

// versionDirs lists the numeric version directories of a model directory.
func versionDirs(path string) ([]int64, error) {
	entries, err := os.ReadDir(path)
	if err != nil {
		return nil, err
	}
	var out []int64
	for _, e := range entries {
		v, err := strconv.ParseInt(e.Name(), 10, 64)
		if err != nil || v <= 0 || strconv.FormatInt(v, 10) != e.Name() || !isDir(path, e) {
			continue
		}
		out = append(out, v)
	}
	slices.Sort(out)
	return out, nil
}

// scanVersion finds the model file of version v; the version directory
// of a model without one (an ensemble, a built-in step) may be empty (as
// Triton's), and its Path is the directory.
func scanVersion(path, name string, v int64, fileless bool) RepoVersion {
	rv := RepoVersion{Version: v}
	vdir := filepath.Join(path, strconv.FormatInt(v, 10))
	if fileless {
		rv.Path = vdir
		return rv
	}
	if file := filepath.Join(vdir, "model.onnx"); fileExists(file) {
		rv.Path = file
		return rv
	}
	file, err := infer.ModelFile(vdir)
	if err != nil {
		rv.Err = fmt.Errorf("%w: model %q version %d: %w", ErrRepositoryLayout, name, v, err)
		return rv
	}
	rv.Path = file
	return rv
}

func fileExists(path string) bool {
	st, err := os.Stat(path)
	return err == nil && st.Mode().IsRegular()
}
