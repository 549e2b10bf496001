package redis

import "errors"

// ErrInvalidConfig is wrapped by Config.Validate; the message names the bad field.
var ErrInvalidConfig = errors.New("redis: invalid config")

// ErrTrustStorePassword is wrapped by LoadTrustStore when the password
// does not open a PKCS#12 trust store. The password is never in the message.
var ErrTrustStorePassword = errors.New("redis: trust store password incorrect")
