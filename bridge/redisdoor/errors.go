package redisdoor

import "errors"

// ErrInvalidConfig is wrapped by Config.Validate; the message names the bad field.
var ErrInvalidConfig = errors.New("redis: invalid config")

// ErrTrustStorePassword is wrapped by LoadTrustStore when the password
// does not open a PKCS#12 trust store. The password is never in the message.
var ErrTrustStorePassword = errors.New("redis: trust store password incorrect")

// Prefixes of the Redis server's replies the door acts on, matched with
// goredis.HasErrorPrefix (a server reply, never a network error; "ERR "
// is trimmed first).
const (
	errNoGroup   = "NOGROUP"     // XREADGROUP: the stream or its group is gone (a Redis restart without persistence)
	errBusyGroup = "BUSYGROUP"   // XGROUP CREATE: the group exists already
	errNoSuchKey = "no such key" // XINFO GROUPS: the stream does not exist (yet)
)
