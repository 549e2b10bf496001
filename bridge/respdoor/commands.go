package respdoor

import (
	"context"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/tidwall/redcon"
)

// command is one command the door serves: its handler and its arity as
// Redis counts it (the name included; negative: at least that many).
type command struct {
	arity int
	// open commands run before AUTH (AUTH, HELLO, QUIT).
	open bool
	run  func(d *Door, c redcon.Conn, s *session, args [][]byte)
}

// commands are the commands the door serves, by upper-case name.
var commands map[string]command

func init() {
	commands = map[string]command{
		"PING":         {arity: -1, run: (*Door).ping},
		"SUBSCRIBE":    {arity: -2, run: (*Door).subscribe},
		"PSUBSCRIBE":   {arity: -2, run: (*Door).psubscribe},
		"UNSUBSCRIBE":  {arity: -1, run: (*Door).unsubscribe},
		"PUNSUBSCRIBE": {arity: -1, run: (*Door).punsubscribe},
		"ECHO":         {arity: 2, run: func(_ *Door, c redcon.Conn, _ *session, a [][]byte) { c.WriteBulk(a[1]) }},
		"HELLO":        {arity: -1, open: true, run: (*Door).hello},
		"AUTH":         {arity: -2, open: true, run: (*Door).authCmd},
		"QUIT":         {arity: -1, open: true, run: func(_ *Door, c redcon.Conn, _ *session, _ [][]byte) { c.WriteString("OK"); _ = c.Close() }},
		"CLIENT":       {arity: -2, run: (*Door).client},
		"SELECT":       {arity: 2, run: (*Door).selectDB},
		"INFO":         {arity: -1, run: (*Door).info},
		"CONFIG":       {arity: -2, run: (*Door).config},
		"XADD":         {arity: -5, run: (*Door).xaddOne},
		"XGROUP":       {arity: -2, run: (*Door).xgroup},
		"HGETALL":      {arity: 2, run: (*Door).hgetall},
		"HGET":         {arity: 3, run: (*Door).hget},
		"HMGET":        {arity: -3, run: (*Door).hmget},
		"EXISTS":       {arity: -2, run: (*Door).exists},
		"DEL":          {arity: -2, run: (*Door).del},
		"KEYS":         {arity: 2, run: (*Door).keys},
		"SCAN":         {arity: -2, run: (*Door).scan},
	}
	guardSubscribed(commands)
	names := make([]string, 0, len(commands))
	for n := range commands {
		names = append(names, n)
	}
	slices.Sort(names)
	supported = strings.Join(names, " ")
}

// supported lists the commands, for the unknown command error.
var supported string

// handle serves the commands of one read of a connection: cmd and what
// was pipelined behind it, in order. Consecutive XADDs are stored
// concurrently, so that a pipelining client pays one JetStream round trip
// per pipeline, not per record.
func (d *Door) handle(c redcon.Conn, cmd redcon.Command) {
	s := c.Context().(*session)
	s.lc.handled()
	s.began = time.Now()
	d.lst.Begin(s.lc.Conn)
	defer d.lst.End(s.lc.Conn)
	cmds := append([]redcon.Command{cmd}, c.ReadPipeline()...)
	for len(cmds) > 0 {
		n := 1
		for n < len(cmds) && isXADD(cmds[0]) && isXADD(cmds[n]) {
			n++
		}
		if n > 1 && s.authed {
			d.xadds(c, cmds[:n])
		} else {
			d.dispatch(c, s, cmds[0].Args)
			n = 1
		}
		cmds = cmds[n:]
	}
}

func isXADD(cmd redcon.Command) bool {
	return len(cmd.Args) >= 5 && strings.EqualFold(string(cmd.Args[0]), "XADD")
}

// dispatch runs one command, or answers why it cannot.
func (d *Door) dispatch(c redcon.Conn, s *session, args [][]byte) {
	name := strings.ToUpper(string(args[0]))
	cmd, ok := commands[name]
	switch {
	case !ok:
		c.WriteError("ERR unknown command '" + printable(args[0]) + "' (cluster-serving RESP door: supported: " + supported + ")")
	case cmd.arity > 0 && len(args) != cmd.arity, cmd.arity < 0 && len(args) < -cmd.arity:
		c.WriteError("ERR wrong number of arguments for '" + strings.ToLower(name) + "' command")
	case !s.authed && !cmd.open:
		c.WriteError("NOAUTH Authentication required.")
	default:
		cmd.run(d, c, s, args)
	}
}

// maxEcho bounds how much of a client's word an error repeats.
const maxEcho = 64

// printable is b cut to maxEcho bytes, its control and non-ASCII bytes
// escaped, so that an error line stays one line.
func printable(b []byte) string {
	if len(b) > maxEcho {
		b = b[:maxEcho]
	}
	q := strconv.QuoteToASCII(string(b))
	return strings.ReplaceAll(q[1:len(q)-1], `\"`, `"`)
}

// authCmd is AUTH [user] password.
func (d *Door) authCmd(c redcon.Conn, s *session, args [][]byte) {
	if len(args) > 3 {
		c.WriteError("ERR syntax error")
		return
	}
	user, password := []byte(DefaultUser), args[len(args)-1]
	if len(args) == 3 {
		user = args[1]
	}
	d.login(c, s, user, password, func() { c.WriteString("OK") })
}

// login checks user and password and calls ok, or answers why not.
func (d *Door) login(c redcon.Conn, s *session, user, password []byte, ok func()) {
	switch {
	case d.auth == nil:
		c.WriteError("ERR AUTH <password> called without any password configured for the default user. Are you sure your configuration is correct?")
	case !d.auth.check(user, password):
		s.authed = false
		c.WriteError("WRONGPASS invalid username-password pair or user is disabled.")
	default:
		s.authed = true
		ok()
	}
}

// ctx is the context of one command's work: a connection has none, and
// Serve's ends only after the connections closed.
func cmdContext() context.Context { return context.Background() }
