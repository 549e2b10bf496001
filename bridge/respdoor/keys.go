package respdoor

import (
	"cmp"
	"hash/fnv"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/tidwall/match"
	"github.com/tidwall/redcon"

	"github.com/cluster-serving/cluster-serving/bridge/redisdoor"
)

// job is the served job named name (a stream name).
func (d *Door) job(name []byte) (string, bool) {
	for _, j := range d.cfg.Jobs {
		if string(name) == j {
			return j, true
		}
	}
	return "", false
}

// noJob is the error for a stream that is no job of the door.
func (d *Door) noJob(name []byte) string {
	return "ERR no job '" + printable(name) + "' at this cluster-serving RESP door (its streams are the jobs: " + strings.Join(d.cfg.Jobs, ", ") + ")"
}

// resultKey splits a result key cluster-serving_<job>:<uri> of a served
// job; ok is false for any other key.
func (d *Door) resultKey(key []byte) (job, uri string, ok bool) {
	rest, found := strings.CutPrefix(string(key), redisdoor.ResultKeyPrefix)
	if !found {
		return "", "", false
	}
	job, uri, found = strings.Cut(rest, ":")
	if _, served := d.job([]byte(job)); !found || !served {
		return "", "", false
	}
	return job, uri, true
}

// keyError is the error for a key that is no result key of the door.
func (d *Door) keyError(key []byte) string {
	return "ERR key '" + printable(key) + "' is not a result key of this cluster-serving RESP door: its keys are " +
		redisdoor.ResultKey("<job>", "<uri>") + " for the jobs " + strings.Join(d.cfg.Jobs, ", ")
}

// get reads the result of key; it writes an error and reports false when
// it cannot. s notes what it gave, for DEL.
func (d *Door) get(c redcon.Conn, s *session, key []byte) (value []byte, found, ok bool) {
	job, uri, ok := d.resultKey(key)
	if !ok {
		c.WriteError(d.keyError(key))
		return nil, false, false
	}
	value, found, err := d.buckets[job].Get(cmdContext(), uri)
	s.read(key, found, err)
	if err != nil {
		c.WriteError("BUSY reading the result of " + printable(key) + ": " + err.Error() + ": retry")
		return nil, false, false
	}
	return value, found, true
}

// hgetall is HGETALL key: [value <v>], or empty.
func (d *Door) hgetall(c redcon.Conn, s *session, args [][]byte) {
	v, found, ok := d.get(c, s, args[1])
	switch {
	case !ok:
	case !found:
		c.WriteArray(0)
	default:
		c.WriteArray(2)
		c.WriteBulkString(redisdoor.ResultField)
		c.WriteBulk(v)
	}
}

// hget is HGET key field.
func (d *Door) hget(c redcon.Conn, s *session, args [][]byte) {
	v, found, ok := d.get(c, s, args[1])
	switch {
	case !ok:
	case !found || string(args[2]) != redisdoor.ResultField:
		c.WriteNull()
	default:
		c.WriteBulk(v)
	}
}

// hmget is HMGET key field ….
func (d *Door) hmget(c redcon.Conn, s *session, args [][]byte) {
	v, found, ok := d.get(c, s, args[1])
	if !ok {
		return
	}
	c.WriteArray(len(args) - 2)
	for _, f := range args[2:] {
		if found && string(f) == redisdoor.ResultField {
			c.WriteBulk(v)
		} else {
			c.WriteNull()
		}
	}
}

// exists is EXISTS key …: how many of the keys have a result (a key named
// twice counts twice, as in Redis).
func (d *Door) exists(c redcon.Conn, s *session, args [][]byte) {
	if !d.checkKeys(c, args[1:]) {
		return
	}
	n := 0
	for _, k := range args[1:] {
		_, found, ok := d.get(c, s, k)
		if !ok {
			return
		}
		if found {
			n++
		}
	}
	c.WriteInt(n)
}

// del is DEL key …: it deletes the results and counts those there were.
// A client polls with HGET and DEL of each key pipelined, so DEL takes
// care of the value the HGET before it answered. A key whose last read on
// this connection failed is not deleted (-BUSY); one whose last read
// found no result is left alone and not counted (a result stored between
// the two, deleted, was lost: make chaos's whole-cluster restart); a key
// never read on this connection is deleted as in Redis. A delete is
// stored only once the answers are written to the client (mesh's
// DeleteLater): a door killed before that leaves the result to be read
// again, not lost.
func (d *Door) del(c redcon.Conn, s *session, args [][]byte) {
	if !d.checkKeys(c, args[1:]) {
		return
	}
	if time.Since(s.began) > maxDelPipeline {
		c.WriteError("BUSY not deleting: this pipeline ran over " + maxDelPipeline.String() + " (NATS slow to answer): read the keys again, then DEL")
		return
	}
	for _, k := range args[1:] {
		if s.unread[string(k)] == readFailed {
			c.WriteError("BUSY not deleting " + printable(k) + ": its last read on this connection failed: read it again, then DEL")
			return
		}
	}
	n := 0
	commits := make([]func(bool), 0, len(args)-1)
	for _, k := range args[1:] {
		if s.unread[string(k)] == readMissing {
			// This client was told there is no result: one stored since
			// is not its to delete unread.
			continue
		}
		job, uri, _ := d.resultKey(k)
		deleted, commit, err := d.buckets[job].DeleteLater(cmdContext(), uri)
		if err != nil {
			for _, undo := range commits {
				undo(false) // an error answers the whole DEL: none of its keys goes
			}
			c.WriteError("BUSY deleting the result of " + printable(k) + ": " + err.Error() + ": retry")
			return
		}
		commits = append(commits, commit)
		if deleted {
			n++
		}
	}
	for _, commit := range commits {
		s.lc.afterWrite(commit)
	}
	c.WriteInt(n)
}

// checkKeys answers an error and reports false when one of keys is no
// result key, before anything is read or deleted.
func (d *Door) checkKeys(c redcon.Conn, keys [][]byte) bool {
	for _, k := range keys {
		if _, _, ok := d.resultKey(k); !ok {
			c.WriteError(d.keyError(k))
			return false
		}
	}
	return true
}

// maxGlobSteps bounds a glob match's work per byte of the string matched:
// a pattern comes from the client.
const maxGlobSteps = 64

// matching lists the result keys that match pattern (a Redis glob: * ?
// and \ escapes), over the jobs whose keys can match it.
func (d *Door) matching(pattern string) ([]string, error) {
	lit := pattern
	if i := strings.IndexAny(pattern, `*?[\`); i >= 0 {
		lit = pattern[:i]
	}
	var out []string
	for _, job := range d.cfg.Jobs {
		prefix := redisdoor.ResultKey(job, "")
		if !strings.HasPrefix(prefix, lit) && !strings.HasPrefix(lit, prefix) {
			continue
		}
		uris, err := d.buckets[job].URIs(cmdContext())
		if err != nil {
			return nil, err
		}
		for _, u := range uris {
			if ok, _ := match.MatchLimit(prefix+u, pattern, maxGlobSteps); ok {
				out = append(out, prefix+u)
			}
		}
	}
	slices.Sort(out)
	return out, nil
}

// keys is KEYS pattern, which the original client's dequeue() sends
// with cluster-serving_<job>:*.
func (d *Door) keys(c redcon.Conn, _ *session, args [][]byte) {
	keys, err := d.matching(string(args[1]))
	if err != nil {
		c.WriteError("BUSY listing results: " + err.Error() + ": retry")
		return
	}
	c.WriteArray(len(keys))
	for _, k := range keys {
		c.WriteBulkString(k)
	}
}

// scanDefaultCount is SCAN's COUNT when the client sends none (Redis's).
const scanDefaultCount = 10

// scan is SCAN cursor [MATCH pattern] [COUNT n] [TYPE type]. The door
// keeps no cursor: a key's place is a hash of it (scanPos), the keys go in
// that order, and the cursor is the place of the next key to return. So a
// key present from the first call to the last is returned once, whatever
// is added or deleted meanwhile, as Redis guarantees.
func (d *Door) scan(c redcon.Conn, _ *session, args [][]byte) {
	cursor, err := strconv.ParseUint(string(args[1]), 10, 64)
	if err != nil {
		c.WriteError("ERR invalid cursor")
		return
	}
	pattern, count, typ := "*", scanDefaultCount, "hash"
	for i := 2; i < len(args); i += 2 {
		if i+1 >= len(args) {
			c.WriteError("ERR syntax error")
			return
		}
		switch v := string(args[i+1]); strings.ToUpper(string(args[i])) {
		case "MATCH":
			pattern = v
		case "COUNT":
			if count, err = strconv.Atoi(v); err != nil || count < 1 {
				c.WriteError("ERR value is out of range, must be positive")
				return
			}
		case "TYPE":
			typ = strings.ToLower(v)
		default:
			c.WriteError("ERR syntax error")
			return
		}
	}
	keys, err := d.matching(pattern)
	if err != nil {
		c.WriteError("BUSY listing results: " + err.Error() + ": retry")
		return
	}
	if typ != "hash" {
		keys = nil // every result key is a hash
	}
	page, next := scanPage(keys, cursor, count)
	c.WriteArray(2)
	c.WriteBulkString(strconv.FormatUint(next, 10))
	c.WriteArray(len(page))
	for _, k := range page {
		c.WriteBulkString(k)
	}
}

// scanPos is a key's place in SCAN's order: 1 to 2^63, never 0, which
// starts and ends a scan.
func scanPos(key string) uint64 {
	h := fnv.New64a()
	_, _ = h.Write([]byte(key))
	return h.Sum64()>>1 + 1
}

// scanPage is the keys at places cursor and after, at least count of them
// unless fewer are left (keys of one place are never split), and the
// cursor of the next page, 0 when none is left.
func scanPage(keys []string, cursor uint64, count int) ([]string, uint64) {
	type placed struct {
		pos uint64
		key string
	}
	var rest []placed
	for _, k := range keys {
		if p := scanPos(k); p >= cursor {
			rest = append(rest, placed{p, k})
		}
	}
	slices.SortFunc(rest, func(a, b placed) int {
		if a.pos != b.pos {
			return cmp.Compare(a.pos, b.pos)
		}
		return strings.Compare(a.key, b.key)
	})
	var page []string
	for i, p := range rest {
		if len(page) >= count && p.pos != rest[i-1].pos {
			return page, p.pos
		}
		page = append(page, p.key)
	}
	return page, 0
}
