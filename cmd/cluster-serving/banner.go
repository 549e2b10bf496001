package main

import (
	"cmp"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/cluster-serving/cluster-serving/bridge/redisdoor"
	"github.com/cluster-serving/cluster-serving/infer"
	"github.com/cluster-serving/cluster-serving/infer/wire"
	"github.com/cluster-serving/cluster-serving/mesh"
	"github.com/cluster-serving/cluster-serving/mesh/serving"
	"github.com/cluster-serving/cluster-serving/telemetry"
)

// printHowToCall is the banner of `start`: the default model and how to
// call it. Every command it prints runs as printed, from any directory
// (TestBannerCommandsRun runs them): the binary and config by absolute
// path, the -shape and -d body made from the model's real inputs.
func printHowToCall(w io.Writer, file *serving.File, cfgPath string, node *serving.Node) {
	subject := mesh.PredictSubject(node.Models()[0].Job)
	info := node.Models()[0].Info
	self := shellJoin(selfPath())
	cfg := shellJoin("-c", cfgPath)
	fmt.Fprintf(w, `
cluster-serving is serving job %q
  model:   %s
  inputs:  %s
  outputs: %s
  NATS:    %s   request-reply subject: %s

Call it from another terminal:
`, file.JobName, info.Path, serving.FormatIO(info.Inputs), serving.FormatIO(info.Outputs), telemetry.RedactURL(node.URL()), subject)
	if userAuth(file, node) {
		fmt.Fprintf(w, "  (NATS asks who you are: export %s and %s first, or set natsCredentials; start itself needs neither)\n",
			serving.EnvNATSUser, serving.EnvNATSPassword)
	}
	notes := false // curlNotes printed
	value, shape := wire.FillValue(info), wire.FillShape(info, file.InputAlreadyBatched)
	fmt.Fprintf(w, "  %s predict %s -fill %s%s   # one request, every value %s%s\n", self, cfg, value, shapeFlag(shape), value, dynamicNote(info, file.InputAlreadyBatched))
	if body := wire.FillRequest(info, file.InputAlreadyBatched, value, nil); len(body) <= maxBannerBody {
		quoted := shellJoin(string(body))
		fmt.Fprintf(w, "  %s predict %s -d %s\n", self, cfg, quoted)
		fmt.Fprintf(w, "  nats req %s%s %s   # with the nats CLI\n", natsCLIFlags(file, node), subject, quoted)
		if httpOn(file) {
			notes = true
			fmt.Fprint(w, curlNotes(file))
			fmt.Fprintf(w, "  curl -s %s://%s/predict%s -H 'Content-Type: application/json' -d %s\n",
				httpScheme(file), dialable(httpAddr(file)), curlAuth(file), quoted)
		}
	}
	if grpcOn(file) {
		if !notes {
			fmt.Fprint(w, curlNotes(file))
		}
		fmt.Fprint(w, grpcurlLine(file))
	}
	if file.RESPListen != "" {
		fmt.Fprint(w, redisCLILine(file))
	}
	fmt.Fprintf(w, `  %s status %s   # throughput, queue depth, latency, workers
Stop with Ctrl-C (in-flight work goes back to the queue) or: %s shutdown %s

`, self, cfg, self, cfg)
}

// redisCLILine is the banner's line for the RESP door: a redis-cli PING
// with the flags its TLS and password need (the password asked for).
func redisCLILine(file *serving.File) string {
	host, port, _ := net.SplitHostPort(dialable(file.RESPListen))
	words := []string{"redis-cli", "-h", host, "-p", port}
	if file.RESPTLSCert != "" {
		words = append(words, "--tls", "--cacert", absPath(file.RESPTLSCert))
	}
	if file.RESPPasswordFile != "" {
		words = append(words, "--user", cmp.Or(file.RESPUser, "default"), "--askpass")
	}
	return fmt.Sprintf("  %s PING   # the RESP door, no redis-server: XADD %s * uri u data ..., then HGETALL %s\n",
		shellJoin(words...), file.JobName, redisdoor.ResultKey(file.JobName, "u"))
}

// curlAuth is what the banner's curl line needs past the door's TLS and
// tokens: the certificate to trust, the client's certificate and a bearer
// token. The client's files and the token are shell variables that
// curlNotes explains: the banner never prints a token.
func curlAuth(file *serving.File) string {
	var b strings.Builder
	if file.HTTPTLSCert != "" {
		b.WriteString(" --cacert " + shellJoin(absPath(file.HTTPTLSCert)))
	}
	if file.HTTPTLSClientCA != "" {
		b.WriteString(` --cert "$CLIENT_CERT" --key "$CLIENT_KEY"`)
	}
	if file.HTTPAuthTokenFile != "" {
		b.WriteString(` -H "Authorization: Bearer $TOKEN"`)
	}
	return b.String()
}

// curlNotes are the comment lines that say where curlAuth's files and
// variables come from.
func curlNotes(file *serving.File) string {
	var b strings.Builder
	if file.HTTPTLSCert != "" {
		b.WriteString("  # --cacert: the door's certificate (httpTlsCert), or the CA that signed it\n")
	}
	if file.HTTPTLSClientCA != "" {
		fmt.Fprintf(&b, "  # CLIENT_CERT, CLIENT_KEY: PEM files of a client certificate signed by a CA of %s (httpTlsClientCa), and its key\n",
			absPath(file.HTTPTLSClientCA))
	}
	if file.HTTPAuthTokenFile != "" {
		fmt.Fprintf(&b, "  # TOKEN: one of the tokens of %s (httpAuthTokenFile), one a line\n", absPath(file.HTTPAuthTokenFile))
	}
	return b.String()
}

// absPath is path made absolute, so that a printed command runs from any
// directory; path itself when that fails.
func absPath(path string) string {
	if p, err := filepath.Abs(path); err == nil {
		return p
	}
	return path
}

// natsCLIFlags are the flags of the banner's `nats req` line: the server
// (loopback for an unspecified host) and how to authenticate, with no
// secret in them. A password or token is read from the environment
// ("$NATS_PASSWORD", which the nats CLI also reads by itself); the
// .creds file and the TLS files by path.
func natsCLIFlags(file *serving.File, node *serving.Node) string {
	server, _, _ := strings.Cut(telemetry.RedactURL(file.NATSURL()), ",")
	if u, err := url.Parse(server); err == nil {
		u.User, u.Host = nil, dialable(u.Host)
		server = u.String()
	}
	words := []string{"-s", server}
	if file.NatsCredentials != "" {
		words = append(words, "--creds", absPath(file.NatsCredentials))
	}
	if file.NatsTLSCA != "" {
		words = append(words, "--tlsca", absPath(file.NatsTLSCA))
	}
	if file.NatsTLSCert != "" {
		words = append(words, "--tlscert", absPath(file.NatsTLSCert), "--tlskey", absPath(file.NatsTLSKey))
	}
	out := shellJoin(words...)
	if userAuth(file, node) {
		out += ` --user "$` + serving.EnvNATSUser + `" --password "$` + serving.EnvNATSPassword + `"`
	}
	return out + " "
}

// userAuth reports whether a client of the job authenticates with a user
// and password (or token): natsUrl carries a user, or the server asks
// for one.
func userAuth(file *serving.File, node *serving.Node) bool {
	return strings.Contains(telemetry.RedactURL(file.NatsURL), "@") || node.PasswordAuth()
}

// maxBannerBody is the longest request body the banner prints inline.
const maxBannerBody = 200

func shapeFlag(shape []int64) string {
	if len(shape) == 0 {
		return ""
	}
	dims := make([]string, len(shape))
	for i, d := range shape {
		dims[i] = strconv.FormatInt(d, 10)
	}
	return " -shape " + strings.Join(dims, ",")
}

// dynamicNote says so when -fill set dynamic dimensions to 1.
func dynamicNote(info infer.ModelInfo, batched bool) string {
	for _, in := range info.Inputs {
		if slices.Contains(wire.InstanceShape(in, batched), -1) {
			return "; dynamic dimensions set to 1: change -shape for a real size"
		}
	}
	return ""
}

// selfPath is the absolute path of this binary, so that the printed
// commands run from any directory; os.Args[0] when it cannot be found.
func selfPath() string {
	if p, err := os.Executable(); err == nil {
		return p
	}
	return os.Args[0]
}

// shellJoin quotes each word for a POSIX shell where it needs it and
// joins them with spaces; empty words are dropped.
func shellJoin(words ...string) string {
	var out []string
	for _, w := range words {
		switch {
		case w == "":
		case shellSafe.MatchString(w):
			out = append(out, w)
		default:
			out = append(out, "'"+strings.ReplaceAll(w, "'", `'\''`)+"'")
		}
	}
	return strings.Join(out, " ")
}

var shellSafe = regexp.MustCompile(`^[A-Za-z0-9_@%+=:,./-]+$`)

// dialable turns a listen address into one a client can dial: an
// unspecified host (0.0.0.0, ::) becomes loopback.
func dialable(addr string) string {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return addr
	}
	if ip := net.ParseIP(host); host == "" || (ip != nil && ip.IsUnspecified()) {
		host = "127.0.0.1"
	}
	return net.JoinHostPort(host, port)
}

// printOtherModels says where the HTTP door listens and, when there are
// several models, each model's NATS subject and HTTP route.
func printOtherModels(w io.Writer, file *serving.File, models []serving.Model) {
	if httpOn(file) {
		fmt.Fprintf(w, "  HTTP:    %s://%s   POST /predict, /v2/models/%s/infer; GET /models, /metrics, /v2/health/ready\n",
			httpScheme(file), httpAddr(file), models[0].Name)
		fmt.Fprintf(w, "  Status:  %s://%s/ui   the live status page (in a terminal: cluster-serving status)\n", httpScheme(file), dialable(httpAddr(file)))
	}
	if len(models) > 1 {
		for _, m := range models {
			fmt.Fprintf(w, "  model %s version %s: NATS subject %s", m.Name, m.Version, mesh.PredictSubject(m.Job))
			if httpOn(file) {
				fmt.Fprintf(w, ", HTTP /v2/models/%s/versions/%s/infer", m.Name, m.Version)
			}
			fmt.Fprintln(w)
		}
	}
	fmt.Fprintln(w)
}
