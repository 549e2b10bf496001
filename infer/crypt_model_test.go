package infer_test

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/cluster-serving/cluster-serving/infer"
	"github.com/cluster-serving/cluster-serving/infer/infertest"
)

// encryptedModelDir writes the encrypted add_f32 model of
// testdata/encrypted.json (field: model_cbc_b64 or model_gcm_b64, made by
// gen_encrypted.py the original's way) as add_f32.onnx in a new directory,
// the name the original kept, and returns the directory and the vectors'
// secret and salt.
func encryptedModelDir(t *testing.T, field string) (dir, secret, salt string) {
	t.Helper()
	b, err := os.ReadFile("testdata/encrypted.json")
	if err != nil {
		t.Fatal(err)
	}
	var v map[string]string
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatal(err)
	}
	dir = t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, v["model"]), []byte(v[field]), 0o600); err != nil {
		t.Fatal(err)
	}
	return dir, v["secret"], v["salt"]
}

// TestEngineEncryptedModel loads the model encrypted both ways and checks it
// answers as the plain model does.
func TestEngineEncryptedModel(t *testing.T) {
	infertest.RequireLibrary(t)
	in := f32([]int64{1, 4}, 0, 1, 2, 3)
	plain := newEngine(t, infer.Config{ModelPath: model("add_f32")})
	want, err := plain.Infer(context.Background(), [][]infer.Tensor{{in}})
	if err != nil {
		t.Fatal(err)
	}
	for _, field := range []string{"model_cbc_b64", "model_gcm_b64"} {
		t.Run(field, func(t *testing.T) {
			dir, secret, salt := encryptedModelDir(t, field)
			key, err := infer.DeriveKey(secret, salt)
			if err != nil {
				t.Fatal(err)
			}
			e := newEngine(t, infer.Config{ModelPath: dir, ModelKey: key, Parallelism: 2})
			got, err := e.Infer(context.Background(), [][]infer.Tensor{{in}})
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, want) {
				t.Errorf("got %+v, want %+v (the plain model's)", got, want)
			}
			if name := e.Info().Name; name != "add_f32" {
				t.Errorf("model name: got %q, want add_f32", name)
			}
		})
	}
}

// TestEngineEncryptedModelErrors checks a wrong secret, and an encrypted
// file loaded as plain, fail the load with a clear error.
func TestEngineEncryptedModelErrors(t *testing.T) {
	infertest.RequireLibrary(t)
	dir, _, salt := encryptedModelDir(t, "model_gcm_b64")
	wrong, err := infer.DeriveKey("not-the-secret", salt)
	if err != nil {
		t.Fatal(err)
	}
	e, err := infer.New(infer.Config{ModelPath: dir, ModelKey: wrong})
	if e != nil || !errors.Is(err, infer.ErrDecrypt) || !strings.Contains(err.Error(), "wrong secret or salt") {
		t.Errorf("wrong secret: got %v, want ErrDecrypt naming the secret or salt", err)
	}
	if err != nil && strings.Contains(err.Error(), "not-the-secret") {
		t.Errorf("the error shows the secret: %v", err)
	}
	e, err = infer.New(infer.Config{ModelPath: dir})
	if e != nil || err == nil {
		t.Errorf("encrypted file without modelEncrypted: got %v, want a load error", err)
	}
	key, _ := infer.DeriveKey("secret", "salt")
	e, err = infer.New(infer.Config{ModelPath: model("add_f32"), ModelKey: key})
	if e != nil || !errors.Is(err, infer.ErrDecrypt) {
		t.Errorf("plain file with modelEncrypted: got %v, want ErrDecrypt", err)
	}
}
