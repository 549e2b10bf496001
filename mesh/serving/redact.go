package serving

import (
	"net/url"
	"strings"
)

// RedactURL hides the password of each URL in s, a comma-separated list
// as natsUrl takes: nats://u:pw@h:4222 becomes nats://u:xxxxx@h:4222, as
// net/url's Redacted and nats.go do. A user name alone is a token for
// NATS (nats://token@h), so it is hidden too. A part that does not parse
// but holds an '@' loses everything between "://" and its last '@'.
func RedactURL(s string) string {
	parts := strings.Split(s, ",")
	for i, p := range parts {
		u, err := url.Parse(strings.TrimSpace(p))
		if err != nil {
			parts[i] = redactUnparsed(p)
			continue
		}
		if u.User == nil {
			continue
		}
		if _, ok := u.User.Password(); ok {
			parts[i] = u.Redacted()
			continue
		}
		u.User = url.User("xxxxx")
		parts[i] = u.String()
	}
	return strings.Join(parts, ",")
}

// redactUnparsed hides the user part of p, which url.Parse refused and
// whose error would quote it whole.
func redactUnparsed(p string) string {
	at := strings.LastIndexByte(p, '@')
	if at < 0 {
		return p
	}
	start := strings.Index(p, "://")
	if start < 0 || start > at {
		start = -3
	}
	return p[:start+3] + "xxxxx" + p[at:]
}
