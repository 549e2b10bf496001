package embedded

import (
	"crypto/rand"
	"crypto/tls"
	"encoding/base64"
	"fmt"
	"net"
	"strconv"
	"strings"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
)

// options builds the server's options from cfg (defaults applied): the
// nats-server config file first, parsed by nats-server's own parser, then
// what the service needs on top of it.
//
// Precedence, file against Config:
//   - Host and Port (natsListen) always win over the file's listen, host
//     and port: they are the contract every client of the job dials (its
//     natsUrl-free config, the banners, the port check before start).
//   - JetStream is always on; the file's store_dir wins over StoreDir, so
//     that a deployer who wrote one in the nats-server file gets it, and
//     its other jetstream limits (max_mem, max_file) stay.
//   - The file's max_payload wins over MaxPayload: Config cannot tell an
//     explicit value from its default.
//   - The file's jetstream sync_interval wins over Sync, for the same
//     reason; without one, Sync (default always) applies.
//   - Name sets server_name when given; NoSigs is always on (the process
//     owns the signals); the logger is ours.
//
// Everything else (authorization, accounts, nkeys, tls, monitoring) is
// the file's, unchanged.
func options(cfg Config, storeDir string) (*server.Options, error) {
	opts := &server.Options{}
	if cfg.ConfigFile != "" {
		var err error
		if opts, err = server.ProcessConfigFile(cfg.ConfigFile); err != nil {
			return nil, fmt.Errorf("%w: ConfigFile %s: %w", ErrInvalidConfig, cfg.ConfigFile, err)
		}
	}
	opts.Host, opts.Port = cfg.Host, cfg.Port
	opts.JetStream = true
	if opts.StoreDir == "" {
		opts.StoreDir = storeDir
	}
	if opts.MaxPayload == 0 {
		opts.MaxPayload = cfg.MaxPayload
	}
	if opts.SyncInterval == 0 && !opts.SyncAlways {
		// Validate checked it.
		opts.SyncAlways, opts.SyncInterval, _ = syncPolicy(cfg.Sync)
	}
	if cfg.Name != "" {
		opts.ServerName = cfg.Name
	}
	opts.NoSigs = true
	opts.NoLog = cfg.Logger == nil
	return opts, nil
}

// Check reads ConfigFile and applies the rule on anonymous listeners,
// without starting anything: the checks Start makes first, for a caller
// that wants to fail before slower work. It returns ErrInvalidConfig (a
// bad field, or a config file nats-server refuses) or an *AnonymousError.
func Check(cfg Config) error {
	if err := cfg.Validate(); err != nil {
		return err
	}
	cfg = cfg.withDefaults()
	opts, err := options(cfg, "")
	if err != nil {
		return err
	}
	return checkAnonymous(cfg, opts)
}

// checkAnonymous refuses a listener beyond loopback without
// authentication, unless cfg allows it.
func checkAnonymous(cfg Config, opts *server.Options) error {
	if cfg.AllowAnonymous || isLoopback(cfg.Host) || authConfigured(opts) {
		return nil
	}
	return &AnonymousError{Addr: net.JoinHostPort(cfg.Host, strconv.Itoa(cfg.Port))}
}

// isLoopback reports whether host reaches this machine only: localhost,
// 127.0.0.0/8 or ::1. The empty host and 0.0.0.0 bind every interface.
func isLoopback(host string) bool {
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// authConfigured reports whether a client must prove who it is: users
// (in the authorization block or in accounts), nkeys, a single user or
// token, operator JWTs, an auth callout, or TLS that verifies client
// certificates.
func authConfigured(o *server.Options) bool {
	return len(o.Users) > 0 || len(o.Nkeys) > 0 || o.Username != "" || o.Authorization != "" ||
		len(o.TrustedOperators) > 0 || len(o.TrustedKeys) > 0 || o.AuthCallout != nil ||
		o.CustomClientAuthentication != nil || (o.TLSConfig != nil && o.TLSConfig.ClientAuth == tls.RequireAndVerifyClientCert)
}

// inProcessIdentity lets the service's own in-process connection
// authenticate to a server that requires it, without weakening the
// file's rules for anyone else, and returns the connect option that
// presents it (nil when none is needed or none can be made).
//
// With users or nkeys (the authorization block, or users inside one
// account), it adds one user with a random name and password that the
// server accepts only on in-process connections
// (allowed_connection_types IN_PROCESS): nobody on the network can use
// it, and its password never leaves this process. It joins the account
// the file's users share; when they are in several accounts, start
// cannot tell which one serves the job, and there is none. A single
// user/password becomes a users list of that user, so that both work. A
// token is presented as it is (unless bcrypt-hashed). Operator JWTs and
// auth callouts get none: the caller must bring credentials.
func inProcessIdentity(o *server.Options) (nats.Option, error) {
	switch {
	case !authConfigured(o) || (len(o.Users) == 0 && len(o.Nkeys) == 0 && o.Username == "" && o.Authorization == ""):
		return nil, nil // no user table: TLS verification does not apply in process
	case len(o.TrustedOperators) > 0 || len(o.TrustedKeys) > 0 || o.AuthCallout != nil || o.CustomClientAuthentication != nil:
		return nil, nil
	case o.Authorization != "" && len(o.Users) == 0 && len(o.Nkeys) == 0:
		if strings.HasPrefix(o.Authorization, "$2") {
			return nil, nil // bcrypt: the token itself is not known
		}
		return nats.Token(o.Authorization), nil
	}
	if o.Username != "" {
		o.Users = append(o.Users, &server.User{Username: o.Username, Password: o.Password})
		o.Username, o.Password = "", ""
	}
	acc, ok := sharedAccount(o)
	if !ok {
		return nil, nil
	}
	name, err := randomString(12)
	if err != nil {
		return nil, err
	}
	pw, err := randomString(32)
	if err != nil {
		return nil, err
	}
	name = "cluster-serving-in-process-" + name
	o.Users = append(o.Users, &server.User{Username: name, Password: pw, Account: acc,
		AllowedConnectionTypes: map[string]struct{}{"IN_PROCESS": {}}})
	return nats.UserInfo(name, pw), nil
}

// sharedAccount is the account every configured user and nkey is in (nil:
// the global account), and false when they are in several.
func sharedAccount(o *server.Options) (*server.Account, bool) {
	seen := map[string]*server.Account{}
	note := func(a *server.Account) {
		name := server.DEFAULT_GLOBAL_ACCOUNT
		if a != nil {
			name = a.Name
		}
		seen[name] = a
	}
	for _, u := range o.Users {
		note(u.Account)
	}
	for _, u := range o.Nkeys {
		note(u.Account)
	}
	if len(seen) > 1 {
		return nil, false
	}
	for _, a := range seen {
		return a, true
	}
	return nil, true
}

func randomString(n int) (string, error) {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("embedded: random: %w", err)
	}
	return base64.RawURLEncoding.EncodeToString(b), nil
}
