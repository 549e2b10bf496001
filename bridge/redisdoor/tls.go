package redisdoor

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"

	pkcs12 "software.sslmate.com/src/go-pkcs12"
)

// LoadTrustStore reads the CA certificates the door trusts from path
// (config redisSecureTrustStorePath). The format is told by content, not
// by name: PEM (one or more CERTIFICATE blocks), one DER certificate, or
// a PKCS#12 trust store as Java's keytool -storetype PKCS12 writes it
// (trusted certificate entries only), opened with password (config
// redisSecureTrustStorePassword; empty for a store without one). A wrong
// password returns an error wrapping ErrTrustStorePassword; no error
// holds the password.
func LoadTrustStore(path, password string) (*x509.CertPool, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("redis: trust store: %w", err)
	}
	pool := x509.NewCertPool()
	switch {
	case bytes.Contains(data, []byte("-----BEGIN")):
		if !pool.AppendCertsFromPEM(data) {
			return nil, fmt.Errorf("redis: trust store %s: no PEM CERTIFICATE block", path)
		}
		return pool, nil
	case len(data) == 0 || data[0] != 0x30: // every DER value here is a SEQUENCE
		return nil, fmt.Errorf("redis: trust store %s: neither PEM nor DER (PKCS#12)", path)
	}
	if cert, err := x509.ParseCertificate(data); err == nil {
		pool.AddCert(cert)
		return pool, nil
	}
	certs, err := pkcs12.DecodeTrustStore(data, password)
	switch {
	case errors.Is(err, pkcs12.ErrIncorrectPassword), errors.Is(err, pkcs12.ErrDecryption):
		return nil, fmt.Errorf("redis: PKCS#12 trust store %s: %w", path, ErrTrustStorePassword)
	case err != nil:
		return nil, fmt.Errorf("redis: PKCS#12 trust store %s: %w", path, err)
	case len(certs) == 0:
		return nil, fmt.Errorf("redis: PKCS#12 trust store %s: no trusted certificate", path)
	}
	for _, c := range certs {
		pool.AddCert(c)
	}
	return pool, nil
}

// TLSConfig returns the door's TLS client config (TLS 1.2 or later): it
// trusts roots (the system roots when nil) and, when certFile and keyFile
// are set (config redisTlsCert, redisTlsKey), presents that PEM client
// certificate for mutual TLS (redis-server --tls-auth-clients yes). The
// server name is taken from the address at dial time.
func TLSConfig(roots *x509.CertPool, certFile, keyFile string) (*tls.Config, error) {
	cfg := &tls.Config{MinVersion: tls.VersionTLS12, RootCAs: roots}
	if certFile == "" && keyFile == "" {
		return cfg, nil
	}
	if certFile == "" || keyFile == "" {
		return nil, fmt.Errorf("%w: a client certificate needs both its certificate and its key file", ErrInvalidConfig)
	}
	kp, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		return nil, fmt.Errorf("redis: client certificate %s: %w", certFile, err)
	}
	cfg.Certificates = []tls.Certificate{kp}
	return cfg, nil
}
