package respdoor_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"

	goredis "github.com/redis/go-redis/v9"

	"github.com/cluster-serving/cluster-serving/bridge/door/doortest"
	"github.com/cluster-serving/cluster-serving/bridge/respdoor"
	"github.com/cluster-serving/cluster-serving/embedded/tlstest"
)

const testPassword = "pl4nted-resp-pw"

// TestAuth needs AUTH before anything but AUTH, HELLO AUTH and QUIT, with
// the user and password of the config, and never prints the password.
func TestAuth(t *testing.T) {
	pwFile := filepath.Join(t.TempDir(), "pw")
	if err := os.WriteFile(pwFile, []byte(testPassword+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	var logs bytes.Buffer
	dc := doortestMesh(t)
	cfg := respdoor.Config{User: "door", PasswordFile: pwFile, Jobs: []string{"add"},
		Logger: slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))}
	// go-redis sends HELLO 3 AUTH (refused: NOPROTO), then AUTH user password.
	s := startOn(t, dc, cfg, &goredis.Options{Username: "door", Password: testPassword})
	ctx := context.Background()
	if err := s.rdb.Set(ctx, "a", "b", 0).Err(); err == nil || !strings.HasPrefix(err.Error(), "ERR unknown command 'set'") {
		t.Errorf("SET after AUTH: got %v, want unknown command", err)
	}
	tests := []struct {
		name string
		opt  goredis.Options
		want string
	}{
		{"no password", goredis.Options{}, "NOAUTH Authentication required."},
		{"wrong password", goredis.Options{Username: "door", Password: "nope"}, "WRONGPASS invalid username-password pair or user is disabled."},
		{"wrong user", goredis.Options{Username: "default", Password: testPassword}, "WRONGPASS"},
		{"password alone: user default", goredis.Options{Password: testPassword}, "WRONGPASS"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			opt := tt.opt
			opt.Addr, opt.MaxRetries = s.addr, -1
			c := goredis.NewClient(&opt)
			defer c.Close()
			err := c.Ping(ctx).Err()
			if err == nil || !strings.HasPrefix(err.Error(), tt.want) {
				t.Errorf("PING: got %v, want %q", err, tt.want)
			}
		})
	}
	raw := dial(t, s.addr)
	for _, step := range [][2]string{
		{"PING\r\n", "-NOAUTH Authentication required.\r\n"},
		{"HELLO 2\r\n", "-NOAUTH HELLO must be called with the client already authenticated"},
		{"AUTH door " + testPassword + "\r\n", "+OK\r\n"},
		{"PING\r\n", "+PONG\r\n"},
		{"QUIT\r\n", "+OK\r\n"},
	} {
		if got := raw.send(t, step[0]); !strings.HasPrefix(got, step[1]) {
			t.Errorf("%q: got %q, want %q", step[0], got, step[1])
		}
	}
	s.stop() // the door's last lines written
	if strings.Contains(logs.String(), testPassword) {
		t.Errorf("the log holds the password:\n%s", logs.String())
	}
}

// TestTLS serves TLS with a door's certificate files, and with a client
// CA refuses a client without a certificate.
func TestTLS(t *testing.T) {
	p := tlstest.New(t, "resp")
	m := doortestMesh(t)
	cfg := respdoor.Config{Jobs: []string{"add"}, TLSCertFile: p.ServerCert, TLSKeyFile: p.ServerKey, TLSClientCAFile: p.CA}
	s := startOn(t, m, cfg, &goredis.Options{TLSConfig: p.ClientTLS(t, true)})
	r := records(t)[0]
	xadd(t, s.rdb, r)
	if v := query(t, s.rdb, r.job, r.uri); !strings.HasPrefix(v, "/////") {
		t.Errorf("result over TLS: got %.20q", v)
	}
	c := goredis.NewClient(&goredis.Options{Addr: s.addr, TLSConfig: p.ClientTLS(t, false), MaxRetries: -1})
	defer c.Close()
	if err := c.Ping(context.Background()).Err(); err == nil {
		t.Error("PING without a client certificate: got no error")
	}
	plain := goredis.NewClient(&goredis.Options{Addr: s.addr, MaxRetries: -1})
	defer plain.Close()
	if err := plain.Ping(context.Background()).Err(); err == nil {
		t.Error("PING in plaintext to a TLS door: got no error")
	}
}

// TestConfigErrors names the field at fault; a missing file is a
// *door.FileError that KeyError names by its config key.
func TestConfigErrors(t *testing.T) {
	m := doortestMesh(t)
	for _, tt := range []struct {
		cfg  respdoor.Config
		want string
	}{
		{respdoor.Config{Jobs: []string{"add"}}, "Addr empty"},
		{respdoor.Config{Addr: ":0"}, "Jobs empty"},
		{respdoor.Config{Addr: ":0", Jobs: []string{"a.b"}}, "Jobs: mesh: invalid job name"},
		{respdoor.Config{Addr: ":0", Jobs: []string{"add"}, User: "u"}, "User needs PasswordFile"},
		{respdoor.Config{Addr: ":0", Jobs: []string{"add"}, TLSCertFile: "c"}, "TLSCertFile and TLSKeyFile go together"},
		{respdoor.Config{Addr: ":0", Jobs: []string{"add"}, IdleTimeout: -1}, "IdleTimeout -1ns negative"},
		{respdoor.Config{Addr: ":0", Jobs: []string{"add"}, PasswordFile: "/nonexistent/pw"}, `config key "respPasswordFile": open /nonexistent/pw: no such file or directory`},
	} {
		_, err := respdoor.New(m.Client, tt.cfg)
		if err == nil || !strings.Contains(respdoor.KeyError(err).Error(), tt.want) {
			t.Errorf("%+v: got %v, want %q", tt.cfg, err, tt.want)
		}
		if err != nil && !errors.Is(err, respdoor.ErrInvalidConfig) && !strings.Contains(tt.want, "config key") {
			t.Errorf("got %v, want it to wrap ErrInvalidConfig", err)
		}
	}
}

// doortestMesh is the mesh of add, for tests that configure the door
// themselves.
func doortestMesh(tb testing.TB) *doortest.Mesh {
	return startDoorMesh(tb, add)
}

// rawConn is a connection that speaks RESP by hand.
type rawConn struct{ net.Conn }

func dial(tb testing.TB, addr string) rawConn {
	tb.Helper()
	var d net.Dialer
	c, err := d.DialContext(context.Background(), "tcp", addr)
	if err == nil {
		tb.Cleanup(func() { _ = c.Close() })
		return rawConn{c}
	}
	tb.Fatal(err)
	return rawConn{}
}

// send writes s and returns what one read brings back.
func (c rawConn) send(tb testing.TB, s string) string {
	tb.Helper()
	if _, err := c.Write([]byte(s)); err != nil {
		tb.Fatal(err)
	}
	buf := make([]byte, 64<<10)
	n, _ := c.Read(buf)
	return string(buf[:n])
}
