package telemetry

import (
	"net/url"
	"strings"
)

// RedactURL hides the password of each URL in s, a comma-separated list
// as natsUrl takes: nats://u:pw@h:4222 becomes nats://u:xxxxx@h:4222, as
// net/url's Redacted and nats.go do. A user name alone is a token for
// NATS (nats://token@h), so it is hidden too. A part that does not parse,
// or a host:port with an '@' (no scheme), loses everything before its
// last '@' (after "://"): url.Parse's error would quote it whole.
func RedactURL(s string) string {
	return rewriteUserinfo(s, "xxxxx@", func(u *url.URL) string {
		if _, ok := u.User.Password(); ok {
			return u.Redacted()
		}
		u.User = url.User("xxxxx")
		return u.String()
	})
}

// StripUserinfo removes the user info, user and password or token, of
// each URL in raw, a comma-separated list as natsUrl takes:
// rediss://u:pw@h:6379 becomes rediss://h:6379. Documents that name a
// server to whoever reads them, such as the mesh's status document, show
// no account at all, where RedactURL keeps the user name for logs. A part
// that does not parse, or a host:port with an '@' (no scheme), loses
// everything before its last '@' (after "://"), as in RedactURL, so that
// a malformed URL leaks nothing either. A URL without user info is left
// as written.
func StripUserinfo(raw string) string {
	return rewriteUserinfo(raw, "", func(u *url.URL) string {
		u.User = nil
		return u.String()
	})
}

// rewriteUserinfo rewrites each part of s, a comma-separated URL list,
// that has user info: parsed rewrites a URL with a user; a part that
// does not parse, or a host:port with an '@' (no scheme), has everything
// before its last '@' (after "://"), that '@' included, replaced by
// unparsed. A part without user info is left as written.
func rewriteUserinfo(s, unparsed string, parsed func(u *url.URL) string) string {
	parts := strings.Split(s, ",")
	for i, p := range parts {
		u, err := url.Parse(strings.TrimSpace(p))
		if err != nil || (!strings.Contains(p, "://") && strings.Contains(p, "@")) {
			if start, at, ok := userinfo(p); ok {
				parts[i] = p[:start] + unparsed + p[at+1:]
			}
			continue
		}
		if u.User != nil {
			parts[i] = parsed(u)
		}
	}
	return strings.Join(parts, ",")
}

// URLSecrets are the passwords and tokens of a comma-separated URL list,
// parsed or not: whatever stands in a part's user info after the user's
// ':' (all of it when there is no ':'), as written and unescaped. A
// caller scrubs them from text that may quote the URL, such as a
// client library's error.
func URLSecrets(list string) []string {
	var out []string
	for _, p := range strings.Split(list, ",") {
		start, at, ok := userinfo(p)
		if !ok {
			continue
		}
		info := p[start:at]
		if _, pw, ok := strings.Cut(info, ":"); ok {
			info = pw
		}
		if info == "" {
			continue
		}
		out = append(out, info)
		if plain, err := url.PathUnescape(info); err == nil && plain != info {
			out = append(out, plain) // as a client would send it
		}
	}
	return out
}

// userinfo finds the user info of p: from after "://" (or the start)
// to its last '@'.
func userinfo(p string) (start, at int, ok bool) {
	at = strings.LastIndexByte(p, '@')
	if at < 0 {
		return 0, 0, false
	}
	if i := strings.Index(p, "://"); i >= 0 && i < at {
		start = i + 3
	}
	return start, at, true
}

// RedactArgs is a command line's args as printed: the password of each
// URL among them (-nats) redacted by RedactURL.
func RedactArgs(args []string) []string {
	out := make([]string, len(args))
	for i, a := range args {
		out[i] = a
		if strings.Contains(a, "://") {
			out[i] = RedactURL(a)
		}
	}
	return out
}
