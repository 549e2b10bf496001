package httpdoor

import (
	"crypto/tls"
	"log/slog"

	"github.com/cluster-serving/cluster-serving/bridge/door"
)

// serverTLS loads the door's certificate and, with TLSClientCAFile, the
// CA its clients' certificates must chain to. It returns nil when
// TLSCertFile is empty (plain HTTP). TLS 1.2 is the minimum.
func (c Config) serverTLS() (*tls.Config, error) {
	return door.ServerTLS(c.TLSCertFile, c.TLSKeyFile, c.TLSClientCAFile)
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
		if _, err := door.NewTokens(c.TokenFile, slog.New(slog.DiscardHandler)); err != nil {
			return err
		}
	}
	return nil
}
