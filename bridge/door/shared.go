package door

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strconv"
	"time"

	"github.com/cluster-serving/cluster-serving/infer/status"

	"github.com/cluster-serving/cluster-serving/mesh"
)

// Lookup finds name at version ("" = the highest version of name that
// serves, as Triton picks) among models, the door's served models now. A
// name that serves at other versions only is a 404 "has no version"; one
// that does not serve is UnknownModel of c (nil for none).
func Lookup(models []Model, c Catalog, name, version string) (Model, error) {
	var found *Model
	for i := range models {
		m := &models[i]
		if m.Name == name && (version == "" || m.Version == version) && (found == nil || !newer(found.Version, m.Version)) {
			found = m
		}
	}
	if found != nil {
		return *found, nil
	}
	for _, m := range models {
		if m.Name == name {
			return Model{}, status.Errorf(status.NotFound, "model %q has no version %q", name, version)
		}
	}
	return Model{}, UnknownModel(c, name)
}

// newer reports whether version a is above b: numerically when both are
// numbers (Triton's versions are), else as strings.
func newer(a, b string) bool {
	x, errA := strconv.ParseInt(a, 10, 64)
	y, errB := strconv.ParseInt(b, 10, 64)
	if errA == nil && errB == nil {
		return x > y
	}
	return a > b
}

// Message is the message both doors answer err with, beside its status
// status.Of(err): a *status.Error's own message (a timeout naming
// httpRequestTimeout), and a fixed line for the mesh's and ctx's
// sentinels, which tells the caller what to do and no internals.
func Message(err error) string {
	var we *status.Error
	if errors.As(err, &we) {
		if status.Of(err) == status.Timeout {
			return "timed out (httpRequestTimeout): " + we.Message
		}
		return we.Message
	}
	for _, s := range sentinelMessages {
		if errors.Is(err, s.err) {
			return s.message
		}
	}
	return err.Error()
}

// sentinelMessages are Message's fixed lines, the first whose error err
// wraps wins.
var sentinelMessages = []struct {
	err     error
	message string
}{
	{mesh.ErrMaxQueueSize, "Exceeds maximum queue size: retry later"},
	{mesh.ErrQueueFull, "queue full: retry later"},
	{mesh.ErrNoStorage, "NATS servers out of storage (disk full or max_file reached): retry later"},
	{mesh.ErrClosed, "shutting down"},
	{context.DeadlineExceeded, "timed out waiting for a worker (httpRequestTimeout or the client's deadline)"},
	{context.Canceled, "client closed the request"},
}

// WarnIfOpen logs one warning when door (its name, "HTTP door"),
// listening on addr beyond loopback, lets anyone in: open is true when it
// has no token file and no client certificates.
func WarnIfOpen(log *slog.Logger, door string, addr net.Addr, open bool) {
	WarnIfOpenKeys(log, door, addr, open, "httpAuthTokenFile (and httpTlsCert/httpTlsKey)")
}

// WarnIfOpenKeys is WarnIfOpen for a door whose protection is set by
// keys (the RESP door: respPasswordFile ...).
func WarnIfOpenKeys(log *slog.Logger, door string, addr net.Addr, open bool, keys string) {
	if !open {
		return
	}
	where := addr.String()
	if ta, ok := addr.(*net.TCPAddr); ok {
		if ta.IP.IsLoopback() {
			return
		}
		if ta.IP.IsUnspecified() { // Go reports 0.0.0.0 as [::] (dual stack)
			where = net.JoinHostPort("0.0.0.0", strconv.Itoa(ta.Port))
		}
	}
	log.Warn(fmt.Sprintf("%s on %s accepts requests from anyone: set %s", door, where, keys))
}

// Defaults both doors apply for zero Config fields.
const (
	DefaultRequestTimeout = 30 * time.Second
	DefaultMaxBodyBytes   = 16 << 20
	DefaultShutdownGrace  = 30 * time.Second
	DefaultVersion        = "0.0.0"
)

// Versioned is a copy of models, each Version defaulted to "1".
func Versioned(models []Model) []Model {
	out := append([]Model(nil), models...)
	for i := range out {
		out[i].Version = cmp.Or(out[i].Version, "1")
	}
	return out
}
