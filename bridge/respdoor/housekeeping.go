package respdoor

import (
	"strings"

	"github.com/tidwall/redcon"

	"github.com/cluster-serving/cluster-serving/bridge/redisdoor"
)

// redisVersion is the Redis version whose commands the door speaks (the
// subset listed in commands), as HELLO and INFO report it: clients pick
// their features by it.
const redisVersion = "7.2.0"

// ping is PING [message].
func (d *Door) ping(c redcon.Conn, _ *session, args [][]byte) {
	switch len(args) {
	case 1:
		c.WriteString("PONG")
	case 2:
		c.WriteBulk(args[1])
	default:
		c.WriteError("ERR wrong number of arguments for 'ping' command")
	}
}

// hello is HELLO [protover [AUTH user password] [SETNAME name]]. The door
// speaks RESP2 only: protover 3 is refused with NOPROTO, as a Redis
// without RESP3 does, and clients (go-redis, redis-py, node-redis) go on
// in RESP2.
func (d *Door) hello(c redcon.Conn, s *session, args [][]byte) {
	if len(args) > 1 {
		switch string(args[1]) {
		case "2":
		case "3":
			c.WriteError("NOPROTO sorry, this protocol version is not supported (the cluster-serving RESP door speaks RESP2)")
			return
		default:
			c.WriteError("ERR Protocol version is not an integer or out of range")
			return
		}
	}
	var user, password []byte
	name, authed := s.name, false
	for i := 2; i < len(args); i++ {
		switch opt := strings.ToUpper(string(args[i])); {
		case opt == "AUTH" && i+2 < len(args):
			user, password, authed = args[i+1], args[i+2], true
			i += 2
		case opt == "SETNAME" && i+1 < len(args):
			name = string(args[i+1])
			i++
		default:
			c.WriteError("ERR Syntax error in HELLO option '" + printable(args[i]) + "'")
			return
		}
	}
	reply := func() {
		s.name = name
		c.WriteArray(14)
		for _, kv := range [][2]string{{"server", "redis"}, {"version", redisVersion}} {
			c.WriteBulkString(kv[0])
			c.WriteBulkString(kv[1])
		}
		c.WriteBulkString("proto")
		c.WriteInt(2)
		c.WriteBulkString("id")
		c.WriteInt64(s.id)
		for _, kv := range [][2]string{{"mode", "standalone"}, {"role", "master"}} {
			c.WriteBulkString(kv[0])
			c.WriteBulkString(kv[1])
		}
		c.WriteBulkString("modules")
		c.WriteArray(0)
	}
	switch {
	case authed:
		d.login(c, s, user, password, reply)
	case !s.authed:
		c.WriteError("NOAUTH HELLO must be called with the client already authenticated, otherwise the HELLO <proto> AUTH <user> <pass> option can be used to authenticate the client and select the RESP protocol version at the same time")
	default:
		reply()
	}
}

// client is CLIENT SETNAME name | GETNAME | SETINFO attr value | ID.
func (d *Door) client(c redcon.Conn, s *session, args [][]byte) {
	sub := strings.ToUpper(string(args[1]))
	switch {
	case sub == "SETNAME" && len(args) == 3:
		if strings.ContainsAny(string(args[2]), " \n") {
			c.WriteError("ERR Client names cannot contain spaces, newlines or special characters.")
			return
		}
		s.name = string(args[2])
		c.WriteString("OK")
	case sub == "GETNAME" && len(args) == 2:
		if s.name == "" {
			c.WriteNull()
			return
		}
		c.WriteBulkString(s.name)
	case sub == "SETINFO" && len(args) == 4:
		c.WriteString("OK") // LIB-NAME, LIB-VER: nothing to keep
	case sub == "ID" && len(args) == 2:
		c.WriteInt64(s.id)
	case sub == "SETNAME" || sub == "GETNAME" || sub == "SETINFO" || sub == "ID":
		c.WriteError("ERR wrong number of arguments for 'client|" + strings.ToLower(sub) + "' command")
	default:
		c.WriteError("ERR unknown subcommand '" + printable(args[1]) + "' (cluster-serving RESP door: CLIENT SETNAME, GETNAME, SETINFO and ID)")
	}
}

// selectDB is SELECT index: the results live in database 0 only.
func (d *Door) selectDB(c redcon.Conn, _ *session, args [][]byte) {
	if string(args[1]) != "0" {
		c.WriteError("ERR DB index is out of range (the cluster-serving RESP door has database 0 only)")
		return
	}
	c.WriteString("OK")
}

// xgroup is XGROUP CREATE <job> serving …, which the original client sends
// before its first XADD and whose error it ignores: the group is the door
// itself, so it exists already, as a Redis where the door created it
// would answer.
func (d *Door) xgroup(c redcon.Conn, _ *session, args [][]byte) {
	if !strings.EqualFold(string(args[1]), "CREATE") || len(args) < 4 {
		c.WriteError("ERR unknown subcommand '" + printable(args[1]) + "' (cluster-serving RESP door: XGROUP CREATE <job> " + redisdoor.Group + " only)")
		return
	}
	if _, ok := d.job(args[2]); !ok {
		c.WriteError(d.noJob(args[2]))
		return
	}
	c.WriteError("BUSYGROUP Consumer Group name already exists (the cluster-serving RESP door reads every stream itself)")
}
