package mesh

import (
	"encoding/base64"
	"fmt"
	"strings"

	"github.com/cluster-serving/cluster-serving/infer/status"

	"github.com/nats-io/nats.go"
)

// A uri is the client's record id: an opaque byte string that must come
// back byte-exact on the result, since a Redis client polls the key
// cluster-serving_<job>:<uri>. It travels in the Cs-Uri header, and NATS
// header values are not byte-exact: nats.go trims leading and trailing
// blanks, turns CR and LF into spaces, and a reader drops blanks after the
// colon. So a uri that is not header-safe travels encoded.
//
// The encoding: a plain uri (printable ASCII 0x20-0x7E, no leading or
// trailing space, not starting with URIEncodedPrefix) goes as it is, so
// the usual ids stay readable in headers; any other uri goes as
// URIEncodedPrefix + base64url (no padding) of its bytes. A plain uri that
// happens to start with the prefix is encoded too, which keeps decoding
// unambiguous.
const (
	// URIEncodedPrefix marks an encoded Cs-Uri value.
	URIEncodedPrefix = "~b64~"
	// MaxURIBytes is the longest uri the mesh carries, in raw bytes: 8 KiB.
	// Encoded it takes at most 10,928 bytes of header, well inside the 64
	// KiB NATS allows for all of a message's headers (a larger header is
	// refused by the server with API error 10097, and would be on every
	// retry). A longer uri is refused before publishing with an error
	// wrapping status.ErrTooLarge (413).
	MaxURIBytes = 8 << 10
)

// ErrURITooLong is wrapped by the error for a uri over MaxURIBytes; it
// wraps status.ErrTooLarge, so status.Of maps it to 413.
var ErrURITooLong error = &wireError{fmt.Sprintf("mesh: uri longer than %d bytes", MaxURIBytes), status.ErrTooLarge}

var uriEncoding = base64.RawURLEncoding.Strict()

// EncodeURI returns the Cs-Uri header value of uri; DecodeURI reverses it.
func EncodeURI(uri string) string {
	if plainURI(uri) {
		return uri
	}
	return URIEncodedPrefix + uriEncoding.EncodeToString([]byte(uri))
}

// DecodeURI returns the uri of a Cs-Uri header value made by EncodeURI. A
// value without URIEncodedPrefix is the uri itself. It returns an error
// for a prefixed value that is not valid base64url.
func DecodeURI(v string) (string, error) {
	enc, ok := strings.CutPrefix(v, URIEncodedPrefix)
	if !ok {
		return v, nil
	}
	b, err := uriEncoding.DecodeString(enc)
	if err != nil {
		return "", fmt.Errorf("mesh: %s header %q: %w", HeaderURI, v, err)
	}
	return string(b), nil
}

// plainURI reports whether uri can travel unencoded in a header.
func plainURI(uri string) bool {
	if uri == "" {
		return true
	}
	if uri[0] == ' ' || uri[len(uri)-1] == ' ' || strings.HasPrefix(uri, URIEncodedPrefix) {
		return false
	}
	for i := 0; i < len(uri); i++ {
		if uri[i] < 0x20 || uri[i] > 0x7e {
			return false
		}
	}
	return true
}

// uriOf reads the uri of a message's headers. A Cs-Uri that does not
// decode (not written by EncodeURI) is taken as it is.
func uriOf(h nats.Header) string {
	v := h.Get(HeaderURI)
	if uri, err := DecodeURI(v); err == nil {
		return uri
	}
	return v
}

// checkRequest is what Submit and Enqueue check before they publish: the
// job's name, and a uri the headers can carry.
func checkRequest(job string, req Request) error {
	if err := ValidateJob(job); err != nil {
		return err
	}
	if len(req.URI) > MaxURIBytes {
		return fmt.Errorf("%w: %d bytes", ErrURITooLong, len(req.URI))
	}
	return nil
}
