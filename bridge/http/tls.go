package httpdoor

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"os"
)

// FileError is returned by New when a file the Config names cannot be
// used: Field is the Config field (TLSCertFile, TLSKeyFile,
// TLSClientCAFile or TokenFile), so that a caller can name its own key
// for it. It never holds a file's contents.
type FileError struct {
	Field string
	Path  string
	Err   error
}

func (e *FileError) Error() string {
	return fmt.Sprintf("httpdoor: %s %s: %v", e.Field, e.Path, e.Err)
}

func (e *FileError) Unwrap() error { return e.Err }

// serverTLS loads the door's certificate and, with TLSClientCAFile, the
// CA its clients' certificates must chain to. It returns nil when
// TLSCertFile is empty (plain HTTP). TLS 1.2 is the minimum.
func (c Config) serverTLS() (*tls.Config, error) {
	if c.TLSCertFile == "" {
		return nil, nil
	}
	certPEM, err := os.ReadFile(c.TLSCertFile)
	if err != nil {
		return nil, &FileError{"TLSCertFile", c.TLSCertFile, err}
	}
	keyPEM, err := os.ReadFile(c.TLSKeyFile)
	if err != nil {
		return nil, &FileError{"TLSKeyFile", c.TLSKeyFile, err}
	}
	cert, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		// The error names no PEM bytes, only what is wrong with them.
		return nil, &FileError{"TLSCertFile", c.TLSCertFile, fmt.Errorf("with the key %s: %w", c.TLSKeyFile, err)}
	}
	tc := &tls.Config{MinVersion: tls.VersionTLS12, Certificates: []tls.Certificate{cert}}
	if c.TLSClientCAFile == "" {
		return tc, nil
	}
	caPEM, err := os.ReadFile(c.TLSClientCAFile)
	if err != nil {
		return nil, &FileError{"TLSClientCAFile", c.TLSClientCAFile, err}
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(caPEM) {
		return nil, &FileError{"TLSClientCAFile", c.TLSClientCAFile, errors.New("no PEM certificate in it")}
	}
	tc.ClientCAs, tc.ClientAuth = pool, tls.RequireAndVerifyClientCert
	return tc, nil
}

// CheckFiles loads the TLS and token files c names and lets them go, so
// that a command can refuse a file it cannot use before its slow start
// (loading models); New loads them again. Its errors are New's
// *FileError.
func (c Config) CheckFiles() error {
	if _, err := c.serverTLS(); err != nil {
		return err
	}
	if c.TokenFile != "" {
		if _, err := newTokens(c.TokenFile, slog.New(slog.DiscardHandler)); err != nil {
			return err
		}
	}
	return nil
}
