package respdoor

import (
	"time"

	"github.com/cluster-serving/cluster-serving/bridge/door"
	"github.com/cluster-serving/cluster-serving/mesh/serving"
)

// FileConfig maps config.yaml's resp keys and the node's models (their
// jobs) to the door's Config; cmd adds the logger, metrics and version.
// Zero durations and sizes are the door's defaults.
func FileConfig(file *serving.File, models []serving.Model) Config {
	c := Config{
		Addr:                 file.RESPListen,
		User:                 file.RESPUser,
		PasswordFile:         file.RESPPasswordFile,
		TLSCertFile:          file.RESPTLSCert,
		TLSKeyFile:           file.RESPTLSKey,
		TLSClientCAFile:      file.RESPTLSClientCA,
		Streams:              file.Stream(),
		ResultTTL:            time.Duration(file.RESPResultTTL) * time.Second,
		IdleTimeout:          time.Duration(file.RESPIdleTimeout) * time.Millisecond,
		MaxConnections:       file.RESPMaxConnections,
		NotifyKeyspaceEvents: file.RESPNotifyKeyspaceEvents,
		ShutdownGrace:        file.Grace(),
	}
	for _, m := range models {
		c.Jobs = append(c.Jobs, m.Job)
	}
	return c
}

// fileKeys names the config key of each file field of Config.
var fileKeys = map[string]string{
	"TLSCertFile":     "respTlsCert",
	"TLSKeyFile":      "respTlsKey",
	"TLSClientCAFile": "respTlsClientCa",
	"PasswordFile":    "respPasswordFile",
}

// KeyError is err, when it is a *door.FileError of this door, as the
// error of the config key that names the file; other errors pass
// unchanged. It never holds a file's contents.
func KeyError(err error) error { return door.KeyErrorIn(err, fileKeys) }
