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
	return ServerTLS(c.TLSCertFile, c.TLSKeyFile, c.TLSClientCAFile)
}

// ServerTLS loads a door's certificate and key and, with clientCAFile,
// the CA its clients' certificates must chain to, as Config's TLS fields
// name them (the gRPC door shares them). It returns nil when certFile is
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

// CheckFiles loads the TLS and token files c names and lets them go, so
// that a command can refuse a file it cannot use before its slow start
// (loading models); New loads them again. Its errors are New's
// *FileError.
func (c Config) CheckFiles() error {
	if _, err := c.serverTLS(); err != nil {
		return err
	}
	if c.TokenFile != "" {
		if _, err := NewTokens(c.TokenFile, slog.New(slog.DiscardHandler)); err != nil {
			return err
		}
	}
	return nil
}
