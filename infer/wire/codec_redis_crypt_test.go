package wire_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/cluster-serving/cluster-serving/infer"
	"github.com/cluster-serving/cluster-serving/infer/infertest"
	"github.com/cluster-serving/cluster-serving/infer/wire"
)

// TestPredictRedisEncrypted sends the fixture JPEG encrypted as the
// original's Python side did (recordEncrypted) in both Redis formats and
// checks the answer is the plain record's; a wrong key, a plain image and
// a tampered one are bad records (*InputError), and the tensors of an
// encrypted job stay plain.
func TestPredictRedisEncrypted(t *testing.T) {
	const secret, salt = "s3cr3t-of-the-test", "salt-of-the-test"
	jpg := fixtureJPEG(t)
	enc := infertest.EncryptLikeOriginal(t, "record", secret, salt, jpg)
	wrong := infertest.EncryptLikeOriginal(t, "record", "another-secret", salt, jpg)
	raw, _ := base64.StdEncoding.DecodeString(enc)
	raw[len(raw)-1] ^= 1
	tampered := base64.StdEncoding.EncodeToString(raw)
	arrowOf := func(img string) []byte { return arrowB64(t, []string{"x"}, utf8Col(img)) }
	jsonOf := func(img string) []byte {
		b, _ := json.Marshal(map[string]any{"instances": []any{map[string]string{"x": img}}})
		return b
	}
	key, err := infer.DeriveKey(secret, salt)
	if err != nil {
		t.Fatal(err)
	}
	plain := newPredictor(t, infer.Config{ModelPath: model("image_mean")})
	want, err := plain.Predict(context.Background(), wire.MediaTypeRedisArrow, arrowOf(base64.StdEncoding.EncodeToString(jpg)))
	if err != nil {
		t.Fatal(err)
	}
	p := newPredictor(t, infer.Config{ModelPath: model("image_mean"), RecordKey: key})
	for _, f := range []struct {
		mediaType string
		body      func(string) []byte
	}{{wire.MediaTypeRedisArrow, arrowOf}, {wire.MediaTypeRedisJSON, jsonOf}} {
		t.Run(f.mediaType, func(t *testing.T) {
			got, err := p.Predict(context.Background(), f.mediaType, f.body(enc))
			if err != nil {
				t.Fatalf("Predict: %v", err)
			}
			if !slices.Equal(got, want) {
				t.Errorf("got %.60q, want the plain record's %.60q", got, want)
			}
			for name, img := range map[string]string{"wrong key": wrong, "tampered": tampered, "plain image": base64.StdEncoding.EncodeToString(jpg)} {
				_, err := p.Predict(context.Background(), f.mediaType, f.body(img))
				if !isInputError(err) || !errors.Is(err, infer.ErrDecrypt) && !strings.Contains(err.Error(), "decrypt") {
					t.Errorf("%s: got %v, want an *InputError that it does not decrypt", name, err)
				}
				if err != nil && strings.Contains(err.Error(), secret) {
					t.Errorf("%s: the error shows the secret: %v", name, err)
				}
			}
		})
	}
	t.Run("tensors stay plain", func(t *testing.T) {
		p := newPredictor(t, infer.Config{ModelPath: model("add_f32_128"), RecordKey: key})
		if _, err := p.Predict(context.Background(), wire.MediaTypeRedisArrow, fixture(t, "payloads/ndarray-128-base64")); err != nil {
			t.Errorf("a tensor record of an encrypted job: got %v, want an answer", err)
		}
	})
	t.Run("other doors stay plain", func(t *testing.T) {
		_, err := p.Predict(context.Background(), wire.MediaTypeJSON, jsonOf(base64.StdEncoding.EncodeToString(jpg)))
		if err != nil {
			t.Errorf("a plain JSON image over HTTP: got %v, want an answer", err)
		}
	})
}
