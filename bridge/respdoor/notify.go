package respdoor

import (
	"strings"

	"github.com/tidwall/redcon"

	"github.com/cluster-serving/cluster-serving/bridge/redisdoor"
	"github.com/cluster-serving/cluster-serving/mesh"
)

// Keyspace notifications: with CONFIG SET notify-keyspace-events, the
// door publishes on Redis's channels (__keyspace@0__:<key> <event> with
// K, __keyevent@0__:<event> <key> with E) the events of the result keys
// it can see, for any door process of the job, from the job's
// mesh.ResultBucket (OnChange):
//   - hset (class h) when a result is stored: the HSET the Redis door
//     writes; HGETALL on this door finds it once the message is out;
//   - del (class g) when a result is deleted (DEL here or on another door);
//   - expired (class x) when a result ages out (respResultTTL), from the
//     bucket's expiry marker (NATS server 2.11 and later).
//
// The other classes are accepted, as Redis accepts them, and produce
// nothing: the door has no strings, lists, sets, sorted sets or modules,
// XADD stores no stream key, nothing is evicted, a key read missing is
// no event (m), and a result key is always new (n). The setting belongs
// to the door process, as Redis's belongs to its server, and starts off.

// Redis's notification classes (server.h NOTIFY_*).
const (
	notifyKeyspace uint32 = 1 << iota // K
	notifyKeyevent                    // E
	notifyGeneric                     // g
	notifyString                      // $
	notifyList                        // l
	notifySet                         // s
	notifyHash                        // h
	notifyZset                        // z
	notifyExpired                     // x
	notifyEvicted                     // e
	notifyStream                      // t
	notifyKeyMiss                     // m
	notifyModule                      // d
	notifyNew                         // n
	// notifyAll is A: g$lshzxetd.
	notifyAll = notifyGeneric | notifyString | notifyList | notifySet | notifyHash | notifyZset |
		notifyExpired | notifyEvicted | notifyStream | notifyModule
)

// notifyLetters are the classes' letters in the order Redis writes them
// (keyspaceEventsFlagsToString): the classes, then K, E and m.
var notifyLetters = []struct {
	letter byte
	flag   uint32
}{
	{'g', notifyGeneric}, {'$', notifyString}, {'l', notifyList}, {'s', notifySet}, {'h', notifyHash},
	{'z', notifyZset}, {'x', notifyExpired}, {'e', notifyEvicted}, {'t', notifyStream}, {'d', notifyModule},
	{'n', notifyNew}, {'K', notifyKeyspace}, {'E', notifyKeyevent}, {'m', notifyKeyMiss},
}

// notifyParam is the one parameter CONFIG SET takes.
const notifyParam = "notify-keyspace-events"

// parseNotify reads flags as Redis does (keyspaceEventsStringToFlags);
// ok is false for a letter it does not know.
func parseNotify(flags string) (f uint32, ok bool) {
	for i := 0; i < len(flags); i++ {
		if flags[i] == 'A' {
			f |= notifyAll
			continue
		}
		known := false
		for _, l := range notifyLetters {
			if l.letter == flags[i] {
				f, known = f|l.flag, true
			}
		}
		if !known {
			return 0, false
		}
	}
	return f, true
}

// formatNotify writes f as CONFIG GET shows it: "AKE", "ghxnKm". As in
// Redis, A stands for every class, n included.
func formatNotify(f uint32) string {
	var b strings.Builder
	for _, l := range notifyLetters {
		class := l.flag&(notifyKeyspace|notifyKeyevent|notifyKeyMiss) == 0
		switch {
		case class && f&notifyAll == notifyAll:
			if l.flag == notifyGeneric {
				b.WriteByte('A')
			}
		case f&l.flag != 0:
			b.WriteByte(l.letter)
		}
	}
	return b.String()
}

// configSet is CONFIG SET parameter value …: notify-keyspace-events only,
// all or nothing, with Redis's errors; any other parameter is refused as
// before (it is set in config.yaml).
func (d *Door) configSet(c redcon.Conn, args [][]byte) {
	if len(args) == 0 || len(args)%2 != 0 {
		c.WriteError("ERR wrong number of arguments for 'config|set' command")
		return
	}
	var flags uint32
	for i := 0; i < len(args); i += 2 {
		name := strings.ToLower(string(args[i]))
		if name != notifyParam {
			c.WriteError("ERR unknown subcommand 'SET' (cluster-serving RESP door: CONFIG SET " + notifyParam + " only; set '" + printable(args[i]) + "' in config.yaml)")
			return
		}
		failed := "ERR CONFIG SET failed (possibly related to argument '" + notifyParam + "') - "
		if i > 0 {
			c.WriteError(failed + "duplicate parameter")
			return
		}
		f, ok := parseNotify(string(args[i+1]))
		if !ok {
			c.WriteError(failed + "Invalid event class character. Use 'Ag$lshzxeKEtmdn'.")
			return
		}
		flags = f
	}
	d.ps.flags.Store(flags)
	d.refreshNotify()
	c.WriteString("OK")
}

// startNotify sets the notifications the door starts with
// (Config.NotifyKeyspaceEvents, checked by Validate).
func (d *Door) startNotify() {
	f, _ := parseNotify(d.cfg.NotifyKeyspaceEvents)
	d.ps.flags.Store(f)
}

// notifying reports whether flags make events the door produces: K or E,
// and a class of hset, del or expired.
func notifying(flags uint32) bool {
	return flags&(notifyKeyspace|notifyKeyevent) != 0 && flags&(notifyHash|notifyGeneric|notifyExpired) != 0
}

// refreshNotify sets the buckets' OnChange while notifications are on and
// someone subscribed, and clears it otherwise: then a result stored costs
// the bucket one atomic load, and the door nothing.
func (d *Door) refreshNotify() {
	d.ps.mu.Lock()
	defer d.ps.mu.Unlock()
	on := d.ps.modes.Load() > 0 && notifying(d.ps.flags.Load())
	if on == d.ps.hooked {
		return
	}
	d.ps.hooked = on
	for job, b := range d.buckets {
		if on {
			b.OnChange(func(uri string, c mesh.BucketChange) { d.keyspaceEvent(job, uri, c) })
		} else {
			b.OnChange(nil)
		}
	}
}

// keyspaceEvent publishes change c of job's result uri as the flags say.
// It runs on the goroutine that learnt the change and never blocks.
func (d *Door) keyspaceEvent(job, uri string, c mesh.BucketChange) {
	event, class := "hset", notifyHash
	switch c {
	case mesh.BucketDelete:
		event, class = "del", notifyGeneric
	case mesh.BucketExpire:
		event, class = "expired", notifyExpired
	}
	flags := d.ps.flags.Load()
	if flags&class == 0 {
		return
	}
	key := redisdoor.ResultKey(job, uri)
	if flags&notifyKeyspace != 0 {
		d.publish("__keyspace@0__:"+key, event)
	}
	if flags&notifyKeyevent != 0 {
		d.publish("__keyevent@0__:"+event, key)
	}
}
