package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cluster-serving/cluster-serving/infer/infertest"
	"github.com/cluster-serving/cluster-serving/mesh/serving"
)

const (
	plantedSecret = "cmd-planted-secret-5d0e"
	plantedSalt   = "cmd-planted-salt-a17c"
)

// encryptedJob writes a config whose model is add_f32 encrypted the
// original's way (gen_encrypted.py, base64 of AES-CBC, under the original
// file name), with modelEncrypted, recordEncrypted and debug logs, and the
// secret and salt in files as a Kubernetes secret mounts them.
func encryptedJob(t *testing.T) (cfgPath, url, job string, env []string) {
	t.Helper()
	cfgPath, url, job, env = testJobModel(t, "add_f32.onnx", "modelEncrypted: true\nrecordEncrypted: true\nlogLevel: debug\n")
	dir := filepath.Dir(cfgPath)
	plain, err := os.ReadFile("../../infer/testdata/add_f32.onnx")
	if err != nil {
		t.Fatal(err)
	}
	modelDir := filepath.Join(dir, "model")
	enc := infertest.EncryptLikeOriginal(t, "model", plantedSecret, plantedSalt, plain)
	for name, content := range map[string]string{
		"model/add_f32.onnx": enc, "secret": plantedSecret + "\n", "salt": plantedSalt + "\n",
	} {
		_ = os.MkdirAll(modelDir, 0o755)
		writeFile(t, filepath.Join(dir, name), content, 0o600)
	}
	cfg, err := os.ReadFile(cfgPath)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.SplitN(string(cfg), "\n", 2)
	writeFile(t, cfgPath, "modelPath: "+modelDir+"\n"+lines[1], 0o644)
	return cfgPath, url, job, env
}

// TestStartEncryptedModel starts on an encrypted model with the secret in
// files, checks it answers as the plain model, and that neither the secret
// nor the salt shows in the logs, debug included.
func TestStartEncryptedModel(t *testing.T) {
	skipIfShort(t)
	cfg, url, job, env := encryptedJob(t)
	dir := filepath.Dir(cfg)
	env = append(env, serving.EnvSecretFile+"="+filepath.Join(dir, "secret"), serving.EnvSaltFile+"="+filepath.Join(dir, "salt"))
	start := spawn(t, env, "start", "-c", cfg)
	nc := waitReady(t, url, start)
	if err := predictAdd(nc, job, [4]float32{1, 2, 3, 4}, 10*time.Second); err != nil {
		t.Fatal(err)
	}
	logs := start.logs()
	for _, s := range []string{plantedSecret, plantedSalt} {
		if strings.Contains(logs, s) {
			t.Errorf("%q shows in the logs:\n%s", s, logs)
		}
	}
}

// TestStartEncryptedWithoutSecret checks start fails at once, naming the
// variables, when the secret is missing; and with a wrong secret fails to
// load the model with a clear error, without printing the secret.
func TestStartEncryptedWithoutSecret(t *testing.T) {
	skipIfShort(t)
	cfg, _, _, env := encryptedJob(t)
	for name, c := range map[string]struct {
		env  []string
		want string
	}{
		"no secret":    {nil, serving.EnvSecret},
		"wrong secret": {[]string{serving.EnvSecret + "=not-" + plantedSecret, serving.EnvSalt + "=" + plantedSalt}, "wrong secret or salt"},
	} {
		t.Run(name, func(t *testing.T) {
			p := spawn(t, append(append([]string{serving.EnvSecret + "=", serving.EnvSalt + "="}, env...), c.env...), "start", "-c", cfg)
			select {
			case <-p.done:
			case <-time.After(60 * time.Second):
				t.Fatal("start did not exit")
			}
			logs := p.logs()
			if p.cmd.ProcessState.Success() || !strings.Contains(logs, c.want) {
				t.Errorf("got exit %v and logs:\n%s\nwant a failure naming %q", p.cmd.ProcessState, logs, c.want)
			}
			if strings.Contains(logs, plantedSecret) || strings.Contains(logs, plantedSalt) {
				t.Errorf("the secret or salt shows in the logs:\n%s", logs)
			}
		})
	}
}
