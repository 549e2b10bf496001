package tlstest_test

import (
	"crypto/tls"
	"crypto/x509"
	"testing"

	"github.com/cluster-serving/cluster-serving/embedded/tlstest"
)

func TestCertificatesVerify(t *testing.T) {
	p := tlstest.New(t, "t")
	for _, tc := range []struct {
		cert, key string
		usage     x509.ExtKeyUsage
	}{{p.ServerCert, p.ServerKey, x509.ExtKeyUsageServerAuth}, {p.ClientCert, p.ClientKey, x509.ExtKeyUsageClientAuth}} {
		kp, err := tls.LoadX509KeyPair(tc.cert, tc.key)
		if err != nil {
			t.Fatal(err)
		}
		leaf, _ := x509.ParseCertificate(kp.Certificate[0])
		if _, err := leaf.Verify(x509.VerifyOptions{Roots: p.Pool(), DNSName: "localhost", KeyUsages: []x509.ExtKeyUsage{tc.usage}}); err != nil {
			t.Errorf("%s does not verify against its CA: %v", tc.cert, err)
		}
		other := tlstest.New(t, "other")
		if _, err := leaf.Verify(x509.VerifyOptions{Roots: other.Pool(), KeyUsages: []x509.ExtKeyUsage{tc.usage}}); err == nil {
			t.Errorf("%s verifies against another CA", tc.cert)
		}
	}
}
