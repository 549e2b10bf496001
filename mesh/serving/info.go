package serving

import "github.com/cluster-serving/cluster-serving/infer"

// InitRuntime finds the ONNX Runtime library (infer.FindLibrary: explicit,
// the config key onnxruntimeLib, else env, the value of $ONNXRUNTIME_LIB
// that the caller read, else the cache `make ort` fills) and initialises
// it once for the process. It returns infer's errors (ErrNoLibrary, ...).
func InitRuntime(explicit, env string) error {
	lib, err := infer.FindLibrary(explicit, env)
	if err != nil {
		return err
	}
	return infer.Init(lib)
}

// ReadInfo describes the model at path (a directory holding one .onnx, or
// the file) without serving it: it opens one session and closes it again.
// key decrypts an encrypted model (modelEncrypted; nil: plain). ONNX
// Runtime must be initialised (InitRuntime).
func ReadInfo(path string, key *infer.Key) (infer.ModelInfo, error) {
	file, err := infer.ModelFile(path)
	if err != nil {
		return infer.ModelInfo{}, err
	}
	var s *infer.Session
	if key == nil {
		s, err = infer.NewSession(file, 1)
	} else {
		var data []byte
		if data, err = infer.ReadModel(file, key); err != nil {
			return infer.ModelInfo{}, err
		}
		s, err = infer.NewSessionFromData(file, data, 1)
	}
	if err != nil {
		return infer.ModelInfo{}, err
	}
	info := s.Info()
	return info, s.Close()
}
