package deploy_test

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/compose-spec/compose-go/v2/loader"
	"github.com/compose-spec/compose-go/v2/types"
	kedav1alpha1 "github.com/kedacore/keda/v2/apis/keda/v1alpha1"
	"github.com/nats-io/nats-server/v2/server"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
)

// scheme knows every built-in Kubernetes kind and KEDA's.
var scheme = func() *runtime.Scheme {
	s := runtime.NewScheme()
	if err := errors.Join(clientgoscheme.AddToScheme(s), kedav1alpha1.AddToScheme(s)); err != nil {
		panic(err)
	}
	return s
}()

// strict decodes YAML or JSON into the typed object its apiVersion and
// kind name, the way the API server's strict field validation does: an
// unknown field, a duplicate field or a wrong type is an error.
var strict = serializer.NewCodecFactory(scheme, serializer.EnableStrict).UniversalDeserializer()

// decodeObject decodes one Kubernetes document strictly. A kind the
// scheme does not know is an error too.
func decodeObject(doc []byte) (runtime.Object, error) {
	obj, _, err := strict.Decode(doc, nil, nil)
	return obj, err
}

// kubeObjects decodes every document of every file under kubernetes/.
func kubeObjects(t *testing.T) map[string][]runtime.Object {
	t.Helper()
	files, err := filepath.Glob("kubernetes/*.yaml")
	if err != nil || len(files) == 0 {
		t.Fatalf("kubernetes/*.yaml: %v, %d files", err, len(files))
	}
	out := map[string][]runtime.Object{}
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		r := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(data)))
		for i := 0; ; i++ {
			doc, err := r.Read()
			if err == io.EOF {
				break
			}
			if err != nil {
				t.Fatalf("%s document %d: %v", f, i, err)
			}
			if len(bytes.TrimSpace(stripComments(doc))) == 0 {
				continue
			}
			obj, err := decodeObject(doc)
			if err != nil {
				t.Errorf("%s document %d: %v", f, i, err)
				continue
			}
			out[f] = append(out[f], obj)
		}
	}
	return out
}

func stripComments(doc []byte) []byte {
	var b bytes.Buffer
	for line := range bytes.Lines(doc) {
		if !bytes.HasPrefix(bytes.TrimSpace(line), []byte("#")) {
			b.Write(line)
		}
	}
	return b.Bytes()
}

// The strict decoder must refuse what a lax one lets through (laxOK), or
// the manifest test proves nothing.
func TestStrictDecodeRefuses(t *testing.T) {
	const so = "apiVersion: keda.sh/v1alpha1\nkind: ScaledObject\nmetadata: {name: a}\nspec: {scaleTargetRef: {name: w}, triggers: "
	tests := []struct {
		name, doc, want string
		laxOK           bool
	}{
		{"unknown field", "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: a}\nspec: {replica: 2}\n", `unknown field "spec.replica"`, true},
		{"field in the wrong case", "apiVersion: v1\nkind: Service\nmetadata: {name: a}\nspec: {ClusterIP: None}\n", `unknown field "spec.ClusterIP"`, true},
		{"duplicate field", "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\ndata: {k: a}\ndata: {k: b}\n", `"data" already set`, true},
		{"unknown KEDA field", so + "[{type: nats-jetstream, metadta: {}}]}\n", `unknown field "spec.triggers[0].metadta"`, true},
		{"unknown kind", "apiVersion: apps/v1\nkind: Deploymnet\nmetadata: {name: a}\n", "no kind", false},
		{"wrong type", so + "[{type: nats-jetstream, metadata: {lagThreshold: 20}}]}\n", "cannot unmarshal number", false},
	}
	lax := serializer.NewCodecFactory(scheme).UniversalDeserializer()
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := decodeObject([]byte(tt.doc)); err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("strict: got %v, want an error containing %q", err, tt.want)
			}
			if _, _, err := lax.Decode([]byte(tt.doc), nil, nil); tt.laxOK && err != nil {
				t.Errorf("lax: got %v, want it accepted (the case is about strictness)", err)
			}
		})
	}
}

// TestKubernetesManifests decodes every Kubernetes document strictly and
// checks that the parts fit: the NATS cluster, the cluster-serving
// containers and their config, the KEDA ScaledObject.
func TestKubernetesManifests(t *testing.T) {
	objs := kubeObjects(t)
	var (
		configMaps   = map[string]*corev1.ConfigMap{}
		deployments  = map[string]*appsv1.Deployment{}
		statefulSets = map[string]*appsv1.StatefulSet{}
		services     = map[string]*corev1.Service{}
		scaled       []*kedav1alpha1.ScaledObject
	)
	for _, list := range objs {
		for _, o := range list {
			switch o := o.(type) {
			case *corev1.ConfigMap:
				configMaps[o.Name] = o
			case *appsv1.Deployment:
				deployments[o.Name] = o
			case *appsv1.StatefulSet:
				statefulSets[o.Name] = o
			case *corev1.Service:
				services[o.Name] = o
			case *kedav1alpha1.ScaledObject:
				scaled = append(scaled, o)
			}
		}
	}
	t.Run("nats", func(t *testing.T) { checkNATS(t, configMaps, statefulSets, services) })
	t.Run("cluster-serving", func(t *testing.T) { checkServing(t, configMaps, deployments, statefulSets) })
	t.Run("keda", func(t *testing.T) {
		if len(scaled) != 1 {
			t.Fatalf("ScaledObjects: got %d, want 1", len(scaled))
		}
		checkScaledObject(t, scaled[0], deployments, services)
	})
}

// checkNATS parses nats.conf with nats-server's own parser (an unknown
// key is an error there too) and checks the cluster it describes.
func checkNATS(t *testing.T, cms map[string]*corev1.ConfigMap, sts map[string]*appsv1.StatefulSet, svcs map[string]*corev1.Service) {
	ss, cm := sts["nats"], cms["nats-config"]
	if ss == nil || cm == nil {
		t.Fatalf("want StatefulSet nats and ConfigMap nats-config; got %v, %v", ss != nil, cm != nil)
	}
	if ss.Spec.Replicas == nil || *ss.Spec.Replicas != 3 || len(ss.Spec.VolumeClaimTemplates) != 1 {
		t.Errorf("StatefulSet nats: want 3 replicas, each with a PVC")
	}
	if h := svcs[ss.Spec.ServiceName]; h == nil || h.Spec.ClusterIP != corev1.ClusterIPNone {
		t.Errorf("StatefulSet nats: serviceName %q is not a headless Service", ss.Spec.ServiceName)
	}
	t.Setenv("POD_NAME", "nats-0")
	opts := &server.Options{}
	if err := opts.ProcessConfigString(cm.Data["nats.conf"]); err != nil {
		t.Fatalf("nats.conf: %v", err)
	}
	if !opts.JetStream || opts.ServerName != "nats-0" || opts.Cluster.Name == "" || len(opts.Routes) != 3 {
		t.Errorf("nats.conf: got jetstream %v, server_name %q, cluster %q, %d routes; want JetStream, nats-0, a cluster, 3 routes",
			opts.JetStream, opts.ServerName, opts.Cluster.Name, len(opts.Routes))
	}
	if !opts.SyncAlways {
		t.Errorf("nats.conf: jetstream sync_interval is not always: an acknowledged request would not survive a power loss")
	}
	for i, r := range opts.Routes {
		if want := fmt.Sprintf("nats-%d.%s", i, ss.Spec.ServiceName); r.Hostname() != want {
			t.Errorf("route %d: got %s, want host %s", i, r, want)
		}
	}
	if !mounts(ss.Spec.Template.Spec.Containers[0], ss.Spec.VolumeClaimTemplates[0].Name, opts.StoreDir) {
		t.Errorf("store_dir %s is not the PVC's mount", opts.StoreDir)
	}
}

// checkServing checks every cluster-serving container: it runs a
// subcommand with -c at the mounted ConfigMap's config.yaml, and the
// config lists all three NATS servers and replicates the streams.
func checkServing(t *testing.T, cms map[string]*corev1.ConfigMap, deps map[string]*appsv1.Deployment, sts map[string]*appsv1.StatefulSet) {
	specs := map[string]corev1.PodSpec{}
	for n, d := range deps {
		specs[n] = d.Spec.Template.Spec
	}
	for n, s := range sts {
		specs[n] = s.Spec.Template.Spec
	}
	roles := map[string]bool{}
	for name, spec := range specs {
		for _, c := range spec.Containers {
			if !strings.HasPrefix(c.Image, "cluster-serving:") {
				continue
			}
			if len(c.Args) != 3 || c.Args[1] != "-c" {
				t.Errorf("%s: args %q, want <command> -c <config>", name, c.Args)
				continue
			}
			roles[c.Args[0]] = true
			cm := mountedConfigMap(spec, c, filepath.Dir(c.Args[2]))
			if cms[cm] == nil || cms[cm].Data[filepath.Base(c.Args[2])] == "" {
				t.Errorf("%s: %s is not a key of a ConfigMap mounted there (got %q)", name, c.Args[2], cm)
				continue
			}
			checkServingConfig(t, name, cms[cm].Data[filepath.Base(c.Args[2])], natsClientURLs())
		}
	}
	for _, r := range []string{"worker", "http", "bridge"} {
		if !roles[r] {
			t.Errorf("no container runs cluster-serving %s", r)
		}
	}
	if roles["start"] {
		t.Error("a cluster deployment runs no start process: the workers and doors serve the NATS door")
	}
}

func natsClientURLs() []string {
	return []string{"nats://nats-0.nats-headless:4222", "nats://nats-1.nats-headless:4222", "nats://nats-2.nats-headless:4222"}
}

// checkServingConfig checks the keys of a cluster deployment's config;
// mesh/serving's deploy_config_test.go parses the same files with the
// real config parser.
func checkServingConfig(t *testing.T, where, cfg string, urls []string) {
	t.Helper()
	want := "natsUrl: " + strings.Join(urls, ",")
	if !strings.Contains(cfg, "\n"+want+"\n") {
		t.Errorf("%s: config lacks %q", where, want)
	}
	if !strings.Contains(cfg, "\nqueueReplicas: 3\n") {
		t.Errorf("%s: config lacks queueReplicas: 3", where)
	}
}

func mountedConfigMap(spec corev1.PodSpec, c corev1.Container, dir string) string {
	for _, m := range c.VolumeMounts {
		if m.MountPath != dir {
			continue
		}
		for _, v := range spec.Volumes {
			if v.Name == m.Name && v.ConfigMap != nil {
				return v.ConfigMap.Name
			}
		}
	}
	return ""
}

func mounts(c corev1.Container, volume, path string) bool {
	return slices.ContainsFunc(c.VolumeMounts, func(m corev1.VolumeMount) bool { return m.Name == volume && m.MountPath == path })
}

// checkScaledObject runs KEDA's own checks of triggers and replica bounds,
// then checks each nats-jetstream trigger's metadata against the keys the
// scaler reads (natsJetStreamMetadata in KEDA's source, see kedaKeys).
func checkScaledObject(t *testing.T, so *kedav1alpha1.ScaledObject, deps map[string]*appsv1.Deployment, svcs map[string]*corev1.Service) {
	if err := kedav1alpha1.ValidateTriggers(so.Spec.Triggers); err != nil {
		t.Errorf("ValidateTriggers: %v", err)
	}
	if err := kedav1alpha1.CheckReplicaCountBoundsAreValid(so); err != nil {
		t.Errorf("replica bounds: %v", err)
	}
	if deps[so.Spec.ScaleTargetRef.Name] == nil {
		t.Errorf("scaleTargetRef %q is no Deployment of the manifests", so.Spec.ScaleTargetRef.Name)
	}
	known, required := kedaKeys(t)
	streams := map[string]bool{}
	for i, tr := range so.Spec.Triggers {
		if tr.Type != "nats-jetstream" {
			t.Errorf("trigger %d: type %q, want nats-jetstream", i, tr.Type)
		}
		for k := range tr.Metadata {
			if !known[k] {
				t.Errorf("trigger %d: metadata key %q is not one the nats-jetstream scaler reads (%v)", i, k, slices.Sorted(maps.Keys(known)))
			}
		}
		for k := range required {
			if tr.Metadata[k] == "" {
				t.Errorf("trigger %d: required metadata key %q missing", i, k)
			}
		}
		if tr.Metadata["consumer"] != "workers" {
			t.Errorf("trigger %d: consumer %q, want workers (mesh.WorkersConsumer)", i, tr.Metadata["consumer"])
		}
		host, _, _ := strings.Cut(tr.Metadata["natsServerMonitoringEndpoint"], ".")
		if s := svcs[host]; s == nil || !slices.ContainsFunc(s.Spec.Ports, func(p corev1.ServicePort) bool { return p.Port == 8222 }) {
			t.Errorf("trigger %d: natsServerMonitoringEndpoint %q is no Service with port 8222", i, tr.Metadata["natsServerMonitoringEndpoint"])
		}
		streams[tr.Metadata["stream"]] = true
	}
	// One trigger per partition stream of job serving_stream (3 partitions).
	for _, s := range []string{"SERVING_serving_stream", "SERVING_serving_stream~1", "SERVING_serving_stream~2"} {
		if !streams[s] {
			t.Errorf("no trigger on stream %s", s)
		}
	}
}

// TestComposeFiles loads each compose file with compose-go, schema
// validation on (an unknown key is an error), and checks the NATS
// servers' flags with nats-server's own flag parser.
func TestComposeFiles(t *testing.T) {
	for _, tt := range []struct {
		file        string
		natsServers int
		roles       []string
	}{
		{"compose.yaml", 3, []string{"worker", "worker", "http", "bridge"}},
		{"compose.single.yaml", 1, []string{"start", "worker"}},
	} {
		t.Run(tt.file, func(t *testing.T) {
			p := loadCompose(t, tt.file)
			var nats []types.ServiceConfig
			var roles []string
			for _, name := range slices.Sorted(maps.Keys(p.Services)) {
				s := p.Services[name]
				switch {
				case strings.HasPrefix(s.Image, "nats:"):
					nats = append(nats, s)
				case strings.HasPrefix(s.Image, "cluster-serving:"):
					roles = append(roles, s.Command[0])
					checkComposeServing(t, p, s)
				}
			}
			if len(nats) != tt.natsServers {
				t.Errorf("NATS servers: got %d, want %d", len(nats), tt.natsServers)
			}
			for _, s := range nats {
				checkComposeNATS(t, s, len(nats))
			}
			slices.Sort(roles)
			want := slices.Sorted(slices.Values(tt.roles))
			if !slices.Equal(roles, want) {
				t.Errorf("cluster-serving services: got %v, want %v", roles, want)
			}
		})
	}
}

func loadCompose(t *testing.T, file string) *types.Project {
	t.Helper()
	abs, err := filepath.Abs(file)
	if err != nil {
		t.Fatal(err)
	}
	p, err := loader.LoadWithContext(context.Background(), types.ConfigDetails{
		WorkingDir:  filepath.Dir(abs),
		ConfigFiles: []types.ConfigFile{{Filename: abs}},
		Environment: types.Mapping{},
	}, func(o *loader.Options) { o.SetProjectName("deploy", true) })
	if err != nil {
		t.Fatalf("%s: %v", file, err)
	}
	return p
}

// checkComposeServing checks a cluster-serving service: its command reads
// the mounted config file, which exists in the repository.
func checkComposeServing(t *testing.T, p *types.Project, s types.ServiceConfig) {
	t.Helper()
	cmd := []string(s.Command)
	if len(cmd) != 3 || cmd[1] != "-c" {
		t.Errorf("%s: command %q, want <command> -c <config>", s.Name, cmd)
		return
	}
	for _, v := range s.Volumes {
		if v.Target != cmd[2] {
			continue
		}
		if _, err := os.Stat(v.Source); err != nil {
			t.Errorf("%s: config %s: %v", s.Name, v.Source, err)
		}
		if !strings.HasPrefix(v.Source, filepath.Join(p.WorkingDir, "config")+string(filepath.Separator)) {
			t.Errorf("%s: config %s is not under deploy/config (which mesh/serving's test parses)", s.Name, v.Source)
		}
		return
	}
	t.Errorf("%s: no volume mounts %s", s.Name, cmd[2])
}

// checkComposeNATS parses a NATS service's command with nats-server's
// flag parser: an unknown flag is an error. A clustered server has
// JetStream, a store on its own volume and routes to every server.
func checkComposeNATS(t *testing.T, s types.ServiceConfig, servers int) {
	t.Helper()
	fs := flag.NewFlagSet("nats-server", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	opts, err := server.ConfigureOptions(fs, hostPaths(s), func() {}, func() {}, func() {})
	if err != nil {
		t.Errorf("%s: nats-server %q: %v", s.Name, s.Command, err)
		return
	}
	if !opts.JetStream || opts.StoreDir == "" || opts.HTTPPort == 0 {
		t.Errorf("%s: want JetStream, a store dir and the monitoring port (health check)", s.Name)
	}
	if !opts.SyncAlways {
		t.Errorf("%s: jetstream sync_interval is not always (-c deploy/config/nats.conf): an acknowledged request would not survive a power loss", s.Name)
	}
	if !slices.ContainsFunc(s.Volumes, func(v types.ServiceVolumeConfig) bool {
		return v.Type == types.VolumeTypeVolume && v.Target == opts.StoreDir
	}) {
		t.Errorf("%s: store dir %s is not on a volume", s.Name, opts.StoreDir)
	}
	if servers == 1 {
		return
	}
	if opts.ServerName != s.Name || opts.Cluster.Name == "" || len(opts.Routes) != servers {
		t.Errorf("%s: got name %q, cluster %q, %d routes; want %s, a cluster, %d routes", s.Name, opts.ServerName, opts.Cluster.Name, len(opts.Routes), s.Name, servers)
	}
	if s.HealthCheck == nil || len(s.HealthCheck.Test) == 0 {
		t.Errorf("%s: no health check", s.Name)
	}
}

// hostPaths is s's command with each argument that is a bind mount's
// target (the -c config file) replaced by the file on this machine.
func hostPaths(s types.ServiceConfig) []string {
	cmd := slices.Clone([]string(s.Command))
	for i, a := range cmd {
		for _, v := range s.Volumes {
			if v.Type == types.VolumeTypeBind && v.Target == a {
				cmd[i] = v.Source
			}
		}
	}
	return cmd
}

// kedaKeys reads the metadata keys of KEDA's nats-jetstream scaler from
// its source (the keda struct tags of natsJetStreamMetadata in the
// module this test builds against): every key it reads, and those without
// optional or default, which it requires. The scaler package itself is not
// imported: it links every KEDA scaler and their cloud SDKs.
func kedaKeys(t *testing.T) (known, required map[string]bool) {
	t.Helper()
	out, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", "github.com/kedacore/keda/v2").Output()
	if err != nil {
		t.Fatalf("go list the KEDA module: %v", err)
	}
	src := filepath.Join(strings.TrimSpace(string(out)), "pkg", "scalers", "nats_jetstream_scaler.go")
	f, err := parser.ParseFile(token.NewFileSet(), src, nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	known, required = map[string]bool{}, map[string]bool{}
	ast.Inspect(f, func(n ast.Node) bool {
		ts, ok := n.(*ast.TypeSpec)
		if !ok || ts.Name.Name != "natsJetStreamMetadata" {
			return true
		}
		for _, fld := range ts.Type.(*ast.StructType).Fields.List {
			if fld.Tag == nil {
				continue
			}
			tag, _ := strconv.Unquote(fld.Tag.Value)
			spec, ok := reflect.StructTag(tag).Lookup("keda")
			if !ok {
				continue
			}
			var name string
			optional := false
			for part := range strings.SplitSeq(spec, ",") {
				part = strings.TrimSpace(part)
				switch {
				case strings.HasPrefix(part, "name="):
					name = strings.TrimPrefix(part, "name=")
				case part == "optional", strings.HasPrefix(part, "default="):
					optional = true
				}
			}
			known[name] = true
			if !optional {
				required[name] = true
			}
		}
		return false
	})
	if len(known) == 0 {
		t.Fatalf("%s: no keda tags on natsJetStreamMetadata", src)
	}
	return known, required
}
