package infer

import (
	"bytes"
	"crypto/aes"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"testing"
)

// cryptVectors is testdata/encrypted.json, written by gen_encrypted.py with
// Python's hashlib and python3-cryptography the original's way.
type cryptVectors struct {
	S        string `json:"secret"`
	T        string `json:"salt"`
	K        string `json:"key_hex"`
	Plain    string `json:"plain"`
	GCM      string `json:"gcm_b64"`
	CBC      string `json:"cbc_b64"`
	Model    string `json:"model"`
	ModelCBC string `json:"model_cbc_b64"`
	ModelGCM string `json:"model_gcm_b64"`
}

func readVectors(t *testing.T) cryptVectors {
	t.Helper()
	b, err := os.ReadFile("testdata/encrypted.json")
	if err != nil {
		t.Fatal(err)
	}
	var v cryptVectors
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatal(err)
	}
	return v
}

// sameKey reports whether k holds the AES key keyHex: both encrypt a zero
// block alike.
func sameKey(t *testing.T, k *Key, keyHex string) bool {
	t.Helper()
	raw, err := hex.DecodeString(keyHex)
	if err != nil {
		t.Fatal(err)
	}
	want, _ := aes.NewCipher(raw)
	var a, b [16]byte
	k.block.Encrypt(a[:], make([]byte, 16))
	want.Encrypt(b[:], make([]byte, 16))
	return a == b
}

// TestDeriveKeyKnownAnswer checks PBKDF2-HMAC-SHA256(65536, 16 bytes)
// against values computed by hand with Python's standard library:
//
//	python3 -c "import hashlib; print(hashlib.pbkdf2_hmac('sha256',
//	    b'secret', b'salt', 65536, 16).hex())"
//
// prints 7a687b1daaf63cbface7cd89bcb4ae54. "secret" and "salt" are the
// literal pair the original's PreProcessing decrypted records with
// (Conventions.RECORD_SECURED_SECRET / _SALT). The second pair is the
// original's own test pair, from encrypted.json.
func TestDeriveKeyKnownAnswer(t *testing.T) {
	v := readVectors(t)
	for _, c := range []struct{ secret, salt, key string }{
		{"secret", "salt", "7a687b1daaf63cbface7cd89bcb4ae54"},
		{v.S, v.T, v.K},
	} {
		k, err := DeriveKey(c.secret, c.salt)
		if err != nil {
			t.Fatal(err)
		}
		if !sameKey(t, k, c.key) {
			t.Errorf("DeriveKey(%q, %q): got another key, want %s", c.secret, c.salt, c.key)
		}
	}
}

func TestDeriveKeyEmpty(t *testing.T) {
	for _, c := range [][2]string{{"", "salt"}, {"secret", ""}} {
		if _, err := DeriveKey(c[0], c[1]); !errors.Is(err, ErrNoSecret) {
			t.Errorf("DeriveKey(%q, %q): got %v, want ErrNoSecret", c[0], c[1], err)
		}
	}
}

// TestOpenPythonVectors decrypts what Python encrypted the original's way.
func TestOpenPythonVectors(t *testing.T) {
	v := readVectors(t)
	k, err := DeriveKey(v.S, v.T)
	if err != nil {
		t.Fatal(err)
	}
	gcm, _ := base64.StdEncoding.DecodeString(v.GCM)
	got, err := k.Open(gcm)
	if err != nil || string(got) != v.Plain {
		t.Errorf("Open(gcm): got %q, %v, want %q", got, err, v.Plain)
	}
	model, err := os.ReadFile("testdata/" + v.Model)
	if err != nil {
		t.Fatal(err)
	}
	for name, c := range map[string]struct {
		text string
		want []byte
	}{
		"cbc":       {v.CBC, []byte(v.Plain)},
		"model cbc": {v.ModelCBC, model},
		"model gcm": {v.ModelGCM, model},
		"wrapped":   {wrap76(v.ModelCBC) + "\n", model},
	} {
		got, err := k.OpenModel([]byte(c.text))
		if err != nil || !bytes.Equal(got, c.want) {
			t.Errorf("OpenModel(%s): got %d bytes, %v, want %d bytes", name, len(got), err, len(c.want))
		}
	}
}

// wrap76 breaks s into lines of 76, as MIME base64 writers do.
func wrap76(s string) string {
	var b strings.Builder
	for len(s) > 76 {
		b.WriteString(s[:76] + "\n")
		s = s[76:]
	}
	b.WriteString(s)
	return b.String()
}

// TestOpenRejects checks a wrong key and bad input are ErrDecrypt, never a
// panic, and that no error shows the secret.
func TestOpenRejects(t *testing.T) {
	v := readVectors(t)
	wrong, err := DeriveKey("wrong-secret", v.T)
	if err != nil {
		t.Fatal(err)
	}
	right, _ := DeriveKey(v.S, v.T)
	gcm, _ := base64.StdEncoding.DecodeString(v.GCM)
	tampered := bytes.Clone(gcm)
	tampered[20] ^= 1
	for name, c := range map[string]struct {
		k *Key
		b []byte
	}{
		"wrong key": {wrong, gcm},
		"tampered":  {right, tampered},
		"short":     {right, gcm[:27]},
		"empty":     {right, nil},
	} {
		if _, err := c.k.Open(c.b); !errors.Is(err, ErrDecrypt) {
			t.Errorf("Open(%s): got %v, want ErrDecrypt", name, err)
		}
	}
	for name, text := range map[string]string{
		"wrong key":  v.ModelGCM,
		"plain onnx": "\x08\x07\x12\x04test",
		"not base64": "not base64!",
		"odd blocks": base64.StdEncoding.EncodeToString(make([]byte, 40)),
	} {
		k := right
		if name == "wrong key" {
			k = wrong
		}
		_, err := k.OpenModel([]byte(text))
		if !errors.Is(err, ErrDecrypt) || strings.Contains(err.Error(), "wrong-secret") {
			t.Errorf("OpenModel(%s): got %v, want ErrDecrypt without the secret", name, err)
		}
	}
}

// TestKeyNeverPrints checks every way of printing a Key redacts it.
func TestKeyNeverPrints(t *testing.T) {
	k, _ := DeriveKey("secret", "salt")
	var logged bytes.Buffer
	slog.New(slog.NewTextHandler(&logged, nil)).Info("k", "key", k, "cfg", Config{ModelKey: k})
	out := fmt.Sprintf("%v %+v %#v %s %x %q", k, k, k, k, k, k) + logged.String() +
		fmt.Sprintf("%+v %#v", Config{ModelKey: k}, Config{RecordKey: k})
	if strings.Contains(out, "7a687b1d") || strings.Contains(strings.ToLower(out), "7a687b1daaf63cbf") {
		t.Fatalf("the key shows: %s", out)
	}
	if !strings.Contains(out, "redacted") {
		t.Fatalf("got %s, want redacted", out)
	}
}
