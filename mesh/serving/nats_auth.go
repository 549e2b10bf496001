package serving

import (
	"bytes"
	"cmp"
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/cluster-serving/cluster-serving/telemetry"
	"github.com/nats-io/nats.go"
)

// Environment variables a NATS client of the service reads its user,
// password or token from: the nats CLI's own, so that one export serves
// both `nats req` and cluster-serving. A secret is never a config key.
const (
	EnvNATSUser     = "NATS_USER"
	EnvNATSPassword = "NATS_PASSWORD"
	EnvNATSToken    = "NATS_TOKEN"
)

// DefaultInboxPrefix is the inbox prefix of every NATS connection of the
// service when natsInboxPrefix is empty: not nats.go's _INBOX, which
// every client shares by default, so that a user allowed to subscribe
// _INBOX.> reads none of the service's replies (JetStream API replies,
// pulled work, the HTTP door's results).
const DefaultInboxPrefix = "_INBOX_cs"

// NATSAuth is how one of the service's NATS clients proves who it is,
// checks the server's certificate and names its inboxes. Every process
// and command builds its connection from it (NATSAuth.Options). A user
// and password in the URL (nats://user:password@host) are read by
// nats.go from the URL itself and win over User and Password. The zero value means none: a plain
// connection, TLS only when the server asks for it.
type NATSAuth struct {
	// Credentials is natsCredentials: a .creds file (user JWT and nkey
	// seed), or an nkey seed file for a user of a nats-server config.
	Credentials string
	// User and Password: $NATS_USER and $NATS_PASSWORD.
	User, Password string
	// Token: $NATS_TOKEN, or $NATS_USER without $NATS_PASSWORD, as the
	// nats CLI reads it.
	Token string
	// TLSCA is the PEM CA that signed the servers' certificates
	// (natsTlsCa); TLSCert and TLSKey a client certificate and its key
	// (natsTlsCert, natsTlsKey) for servers that verify clients.
	TLSCA, TLSCert, TLSKey string
	// InboxPrefix is natsInboxPrefix: the subject prefix of the
	// connection's inboxes, where replies, JetStream deliveries and the
	// doors' results arrive. Empty: DefaultInboxPrefix. A deployer grants
	// the service's user subscribe on <InboxPrefix>.> and no one else.
	InboxPrefix string
}

// ErrNATSAuth is wrapped when NATS refuses the service's credentials, or
// when the embedded server needs some the config does not give; the
// message names the keys to set.
var ErrNATSAuth = errors.New("serving: NATS authentication")

// authKeys names what a deployer sets to authenticate to NATS.
const authKeys = "natsCredentials, natsTlsCert and natsTlsKey, or " + EnvNATSUser + " and " + EnvNATSPassword + " in the environment"

// Options are the nats.Options that present a's credentials, trust its
// CA and name its inboxes (Inbox).
func (a NATSAuth) Options() []nats.Option {
	opts := []nats.Option{a.Inbox()}
	if a.Credentials != "" {
		opts = append(opts, credentials(a.Credentials))
	}
	switch {
	case a.User != "" && a.Password != "":
		opts = append(opts, nats.UserInfo(a.User, a.Password))
	case a.Token != "":
		opts = append(opts, nats.Token(a.Token))
	case a.User != "":
		opts = append(opts, nats.Token(a.User))
	}
	if a.TLSCA != "" {
		opts = append(opts, nats.RootCAs(a.TLSCA))
	}
	if a.TLSCert != "" {
		opts = append(opts, nats.ClientCert(a.TLSCert, a.TLSKey))
	}
	return opts
}

// Inbox is the nats.Option that gives a connection a's inbox prefix:
// nats.go's own inboxes, request-reply, and the jetstream package's
// pulls and acks all take it from the connection.
func (a NATSAuth) Inbox() nats.Option {
	return nats.CustomInboxPrefix(cmp.Or(a.InboxPrefix, DefaultInboxPrefix))
}

// checkInboxPrefix returns why p cannot prefix inboxes: subject tokens
// separated by dots, none empty, without wildcards or blanks.
func checkInboxPrefix(p string) error {
	for tok := range strings.SplitSeq(p, ".") {
		if tok == "" || strings.ContainsAny(tok, "*> \t\r\n") {
			return fmt.Errorf("%q is not a subject prefix without wildcards, like %s", p, DefaultInboxPrefix)
		}
	}
	return nil
}

// credentials presents a .creds file (a user JWT and its nkey seed), or
// a seed file alone, for an nkey user of a nats-server config (users =
// [{nkey: U...}]). A file that cannot be read is left to
// nats.UserCredentials, which says so when connecting.
func credentials(path string) nats.Option {
	data, err := os.ReadFile(path)
	if err == nil && !bytes.Contains(data, []byte("BEGIN NATS USER JWT")) {
		if opt, err := nats.NkeyOptionFromSeed(path); err == nil {
			return opt
		}
	}
	return nats.UserCredentials(path)
}

// Identity reports whether a names someone: credentials, a user or
// token, or a client certificate.
func (a NATSAuth) Identity() bool {
	return a.Credentials != "" || a.User != "" || a.Token != "" || a.TLSCert != ""
}

// ConnectError is the error of a failed connection to the NATS at url:
// the URL with its password redacted, and for a refusal of credentials
// (nats.ErrAuthorization), ErrNATSAuth with the keys that give them.
// nats.go's own error can quote the URL whole (a URL it cannot parse),
// so the URL's secrets are scrubbed from its text too; errors.Is and
// errors.As still see the original.
func ConnectError(url string, err error) error {
	var out error
	if errors.Is(err, nats.ErrAuthorization) {
		out = fmt.Errorf("connect to NATS at %s: %w: %w (set %s, or a user:password in natsUrl)", telemetry.RedactURL(url), ErrNATSAuth, err, authKeys)
	} else {
		out = fmt.Errorf("connect to NATS at %s: %w", telemetry.RedactURL(url), err)
	}
	msg := out.Error()
	for _, secret := range telemetry.URLSecrets(url) {
		msg = strings.ReplaceAll(msg, secret, "xxxxx")
	}
	return &scrubbed{msg: msg, err: out}
}

// scrubbed is an error whose text lost its secrets and whose chain kept
// them.
type scrubbed struct {
	msg string
	err error
}

func (e *scrubbed) Error() string { return e.msg }
func (e *scrubbed) Unwrap() error { return e.err }
