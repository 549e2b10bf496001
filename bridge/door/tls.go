package door

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
	"strings"
)

// FileError is a door's error for a file it cannot use: Field is the
// door Config's field (TLSCertFile, TLSKeyFile, TLSClientCAFile or
// TokenFile), so that a caller can name its own key for it. It never
// holds a file's contents.
type FileError struct {
	Field string
	Path  string
	Err   error
}

func (e *FileError) Error() string {
	return fmt.Sprintf("door: %s %s: %v", e.Field, e.Path, e.Err)
}

func (e *FileError) Unwrap() error { return e.Err }

// fileKeys names the config key of each file field of the doors' Configs.
var fileKeys = map[string]string{
	"TLSCertFile":     "httpTlsCert",
	"TLSKeyFile":      "httpTlsKey",
	"TLSClientCAFile": "httpTlsClientCa",
	"TokenFile":       "httpAuthTokenFile",
}

// KeyError is err, when it is a *FileError, as the error of the config
// key that names the file (httpTlsCert, httpTlsKey, httpTlsClientCa or
// httpAuthTokenFile); other errors pass unchanged.
func KeyError(err error) error { return KeyErrorIn(err, fileKeys) }

// KeyErrorIn is KeyError for a door whose config keys are keys (a Config
// field's name to its key), such as the RESP door's.
func KeyErrorIn(err error, keys map[string]string) error {
	var fe *FileError
	if !errors.As(err, &fe) || keys[fe.Field] == "" {
		return err
	}
	if strings.Contains(fe.Err.Error(), fe.Path) { // an *fs.PathError
		return fmt.Errorf("config key %q: %w", keys[fe.Field], fe.Err)
	}
	return fmt.Errorf("config key %q: %s: %w", keys[fe.Field], fe.Path, fe.Err)
}

// ServerTLS loads a door's certificate and key and, with clientCAFile,
// the CA its clients' certificates must chain to (the doors' config keys
// httpTlsCert, httpTlsKey and httpTlsClientCa). It returns nil when certFile is
// empty (no TLS), and a *FileError naming the Config field of a file it
// cannot use. TLS 1.2 is the minimum.
func ServerTLS(certFile, keyFile, clientCAFile string) (*tls.Config, error) {
	if certFile == "" {
		return nil, nil
	}
	certPEM, err := os.ReadFile(certFile)
	if err != nil {
		return nil, &FileError{"TLSCertFile", certFile, err}
	}
	keyPEM, err := os.ReadFile(keyFile)
	if err != nil {
		return nil, &FileError{"TLSKeyFile", keyFile, err}
	}
	cert, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		// The error names no PEM bytes, only what is wrong with them.
		return nil, &FileError{"TLSCertFile", certFile, fmt.Errorf("with the key %s: %w", keyFile, err)}
	}
	tc := &tls.Config{MinVersion: tls.VersionTLS12, Certificates: []tls.Certificate{cert}}
	if clientCAFile == "" {
		return tc, nil
	}
	caPEM, err := os.ReadFile(clientCAFile)
	if err != nil {
		return nil, &FileError{"TLSClientCAFile", clientCAFile, err}
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(caPEM) {
		return nil, &FileError{"TLSClientCAFile", clientCAFile, errors.New("no PEM certificate in it")}
	}
	tc.ClientCAs, tc.ClientAuth = pool, tls.RequireAndVerifyClientCert
	return tc, nil
}
