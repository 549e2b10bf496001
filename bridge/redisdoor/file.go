package redisdoor

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/cluster-serving/cluster-serving/mesh/serving"
)

// FileConfig maps config.yaml's redis keys to the door's Config (cmd
// adds Metrics); a zero timeout is the door's default. Its errors name
// the config key and never hold a password.
func FileConfig(file *serving.File) (Config, error) {
	rc := Config{
		Addr:    file.RedisURL,
		Job:     file.JobName,
		Timeout: time.Duration(file.RedisTimeout) * time.Millisecond,
	}
	tc, err := redisTLS(file)
	if err != nil {
		return rc, err
	}
	rc.TLS = tc
	if err := rc.Validate(); err != nil {
		return rc, fmt.Errorf("config key \"redisUrl\": %w", err)
	}
	return rc, nil
}

// redisTLS builds the Redis door's TLS from redisSecureTrustStorePath (a
// PEM CA or a PKCS#12 trust store opened with
// redisSecureTrustStorePassword) and redisTlsCert/redisTlsKey (a client
// certificate for mutual TLS). TLS is on with redisSecureEnabled or a
// rediss:// redisUrl; nil when it is off.
func redisTLS(file *serving.File) (*tls.Config, error) {
	rediss := strings.HasPrefix(strings.ToLower(file.RedisURL), "rediss://")
	if !file.RedisSecureEnabled && !rediss {
		if file.RedisTLSCert != "" {
			return nil, errors.New("config key \"redisTlsCert\": a client certificate needs TLS: set redisSecureEnabled: true or use a rediss:// redisUrl")
		}
		return nil, nil
	}
	var roots *x509.CertPool
	if path := file.RedisSecureTrustStorePath; path != "" {
		var err error
		roots, err = LoadTrustStore(path, file.RedisSecureTrustStorePassword)
		switch {
		case errors.Is(err, ErrTrustStorePassword):
			return nil, fmt.Errorf("config key \"redisSecureTrustStorePassword\": %w", err)
		case err != nil:
			return nil, fmt.Errorf("config key \"redisSecureTrustStorePath\": %w", err)
		}
	}
	tc, err := TLSConfig(roots, file.RedisTLSCert, file.RedisTLSKey)
	if err != nil {
		return nil, fmt.Errorf("config keys \"redisTlsCert\", \"redisTlsKey\": %w", err)
	}
	return tc, nil
}
