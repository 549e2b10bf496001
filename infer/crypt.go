package infer

// The original Cluster Serving's encryption, byte for byte (read in
// intel-analytics/BigDL-2.x and intel-analytics/analytics-zoo):
//
//   - Key: PBKDF2-HMAC-SHA256(secret, salt, 65536 iterations, 128 bits),
//     both strings as UTF-8 bytes (EncryptSupportive.scala's
//     PBEKeySpec(secret.toCharArray, salt.getBytes, 65536, 128); Python's
//     get_private_key in pyzoo/zoo/common/encryption_utils.py, later
//     python/dllib/src/bigdl/dllib/utils/encryption_utils.py).
//   - Records (recordEncrypted): an image value of the Redis record is
//     base64 of IV(12) || AES-GCM ciphertext || tag(16) of the JPEG bytes
//     (encrypt_bytes_with_AES_GCM); the server base64-decodes it and calls
//     decryptBytesWithAESGCM (serving/PreProcessing.scala decodeImage).
//     Tensors and '|'-joined strings are not encrypted.
//   - Models (modelEncrypted): the model file keeps its name and holds
//     base64 text of IV(16) || AES-CBC ciphertext with PKCS#7 padding
//     (EncryptSupportive.encryptFileWithAESCBC / decryptFileWithAESCBC,
//     which InferenceModel.doLoadEncryptedOpenVINO calls). OpenModel also
//     takes the record form, base64 of IV(12) || AES-GCM || tag(16), which
//     is authenticated and so tried first.

import (
	"bytes"
	"crypto/aes"
	"crypto/cipher"
	"crypto/pbkdf2"
	"crypto/sha256"
	"fmt"
	"log/slog"
)

// The original's key derivation and layouts.
const (
	KeyIterations = 65536 // PBKDF2 iterations
	KeyBytes      = 16    // AES-128
	gcmIVBytes    = 12
	gcmTagBytes   = 16
)

// Key is an AES key derived from a secret and a salt the original's way.
// It keeps neither: only the cipher. It never prints its value (String,
// GoString, Format and LogValue all redact). Immutable and safe for
// concurrent use.
type Key struct {
	block cipher.Block
	gcm   cipher.AEAD
}

// DeriveKey derives the key of secret and salt: PBKDF2-HMAC-SHA256, 65536
// iterations, 16 bytes (about 50 ms: derive once at start, not per
// record). Both must be non-empty, else ErrNoSecret. The error never holds
// either value.
func DeriveKey(secret, salt string) (*Key, error) {
	if secret == "" || salt == "" {
		return nil, ErrNoSecret
	}
	raw, err := pbkdf2.Key(sha256.New, secret, []byte(salt), KeyIterations, KeyBytes)
	if err != nil {
		return nil, fmt.Errorf("derive key: %w", err)
	}
	block, err := aes.NewCipher(raw)
	if err != nil {
		return nil, fmt.Errorf("derive key: %w", err)
	}
	gcm, err := cipher.NewGCM(block) // 12-byte IV, 16-byte tag: Java's GCMParameterSpec(128, iv)
	if err != nil {
		return nil, fmt.Errorf("derive key: %w", err)
	}
	return &Key{block: block, gcm: gcm}, nil
}

// Open decrypts b, IV(12) || AES-GCM ciphertext || tag(16) (the bytes of a
// record's image after base64). A wrong key, or tampered or short input,
// returns ErrDecrypt.
func (k *Key) Open(b []byte) ([]byte, error) {
	if len(b) < gcmIVBytes+gcmTagBytes {
		return nil, fmt.Errorf("%w: %d bytes, shorter than IV and tag", ErrDecrypt, len(b))
	}
	out, err := k.gcm.Open(nil, b[:gcmIVBytes], b[gcmIVBytes:], nil)
	if err != nil {
		return nil, fmt.Errorf("%w: authentication failed (wrong secret or salt, or tampered data)", ErrDecrypt)
	}
	return out, nil
}

// OpenModel decrypts the text of an encrypted model file: base64 of
// IV(16) || AES-CBC || PKCS#7 padding (the original's), or of the record
// layout (AES-GCM), tried first because its tag proves the key. Text that is
// not base64, or that neither layout opens, returns ErrDecrypt.
func (k *Key) OpenModel(text []byte) ([]byte, error) {
	raw, err := DecodeBase64(text)
	if err != nil {
		return nil, fmt.Errorf("%w: the file is not base64 text (is it encrypted?): %v", ErrDecrypt, err)
	}
	if out, err := k.Open(raw); err == nil {
		return out, nil
	}
	if out, ok := k.openCBC(raw); ok {
		return out, nil
	}
	return nil, fmt.Errorf("%w: neither AES-CBC nor AES-GCM opens it (wrong secret or salt, or not encrypted the original's way)", ErrDecrypt)
}

// openCBC decrypts IV(16) || AES-CBC ciphertext and strips PKCS#7 padding.
// CBC proves nothing about the key: a wrong key passes the padding check
// about once in 256 tries, and the model then fails to load.
func (k *Key) openCBC(raw []byte) ([]byte, bool) {
	bs := k.block.BlockSize()
	if len(raw) < 2*bs || len(raw)%bs != 0 {
		return nil, false
	}
	out := make([]byte, len(raw)-bs)
	cipher.NewCBCDecrypter(k.block, raw[:bs]).CryptBlocks(out, raw[bs:])
	pad := int(out[len(out)-1])
	if pad == 0 || pad > bs || !bytes.Equal(out[len(out)-pad:], bytes.Repeat([]byte{byte(pad)}, pad)) {
		return nil, false
	}
	return out[:len(out)-pad], true
}

const redacted = "infer.Key(redacted)"

// String redacts the key.
func (*Key) String() string { return redacted }

// GoString redacts the key for %#v.
func (*Key) GoString() string { return redacted }

// Format redacts the key for every verb.
func (*Key) Format(f fmt.State, _ rune) { _, _ = f.Write([]byte(redacted)) }

// LogValue redacts the key in slog.
func (*Key) LogValue() slog.Value { return slog.StringValue("[redacted]") }
