package main

// Checks of the docker-compose stack (docker-compose.yml, Dockerfile and
// deploy/) that run without a container engine: the compose file is
// validated by docker-compose itself, the Prometheus config and the
// dashboard's PromQL by promtool, streamlearn's config by the loader `run`
// uses, the Grafana dashboard against the metrics streamlearn exports, and
// the pieces against each other (addresses, ports, topics, mounts). The
// generator script runs for real against a Kafka broker process.
//
// docker-compose and promtool come from Debian (apt-get install
// docker-compose prometheus); without them those checks skip, except with
// STREAMLEARN_REQUIRE_COMPOSE=1 / STREAMLEARN_REQUIRE_PROMETHEUS=1 (set
// by .ci/run), where they fail. No test starts the stack.

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"go.yaml.in/yaml/v3"

	"github.com/streamlearn/streamlearn/internal/config"
	"github.com/streamlearn/streamlearn/internal/metrics"
	"github.com/streamlearn/streamlearn/internal/service"
	"github.com/streamlearn/streamlearn/internal/testproc"
)

// repoRoot is the repository's root, seen from this package's directory.
const repoRoot = "../.."

func repoPath(rel string) string { return filepath.Join(repoRoot, filepath.FromSlash(rel)) }

// composeFile is the part of docker-compose.yml the checks read.
type composeFile struct {
	Services map[string]composeService `yaml:"services"`
}

type composeService struct {
	Image string `yaml:"image"`
	Build *struct {
		Context string `yaml:"context"`
		Target  string `yaml:"target"`
	} `yaml:"build"`
	Command     any            `yaml:"command"`
	Environment map[string]any `yaml:"environment"`
	Volumes     []string       `yaml:"volumes"`
}

// words returns a command (a list, or a string split on white space) as words.
func (s composeService) words() []string {
	switch c := s.Command.(type) {
	case string:
		return strings.Fields(c)
	case []any:
		var out []string
		for _, w := range c {
			out = append(out, strings.Fields(fmt.Sprint(w))...)
		}
		return out
	}
	return nil
}

func (s composeService) env(name string) string {
	if v, ok := s.Environment[name]; ok && v != nil {
		return fmt.Sprint(v)
	}
	return ""
}

// mount returns the container path a bind mount of the host path src has
// (src relative to the repository, as in the compose file: ./deploy/...).
func (s composeService) mount(src string) string {
	for _, v := range s.Volumes {
		parts := strings.Split(v, ":")
		if len(parts) >= 2 && filepath.Clean(parts[0]) == filepath.Clean(src) {
			return parts[1]
		}
	}
	return ""
}

// flagValue returns the value of --name=v or --name v / -name v in words.
func flagValue(words []string, name string) string {
	for i, w := range words {
		if v, ok := strings.CutPrefix(w, name+"="); ok {
			return v
		}
		if w == name && i+1 < len(words) {
			return words[i+1]
		}
	}
	return ""
}

func loadCompose(t *testing.T) composeFile {
	t.Helper()
	data, err := os.ReadFile(repoPath("docker-compose.yml"))
	if err != nil {
		t.Fatal(err)
	}
	var c composeFile
	if err := yaml.Unmarshal(data, &c); err != nil {
		t.Fatalf("docker-compose.yml: %v", err)
	}
	return c
}

// pinned reports whether an image reference names an explicit tag other
// than latest (or a digest).
func pinned(image string) bool {
	if strings.Contains(image, "@sha256:") {
		return true
	}
	name := image[strings.LastIndex(image, "/")+1:]
	_, tag, ok := strings.Cut(name, ":")
	return ok && tag != "" && tag != "latest" && !strings.Contains(tag, "$")
}

// TestComposeConfig: `docker-compose config -q` accepts docker-compose.yml
// (and rejects a broken copy, so the check is not vacuous).
func TestComposeConfig(t *testing.T) {
	dc := requireTool(t, "STREAMLEARN_REQUIRE_COMPOSE", "docker-compose", "docker-compose")
	if out, err := testproc.Command(t, dc, "version", "--short").CombinedOutput(); err == nil {
		t.Logf("docker-compose %s", bytes.TrimSpace(out))
	}
	cmd := testproc.Command(t, dc, "-f", "docker-compose.yml", "config", "-q")
	cmd.Dir = repoRoot
	if out, err := cmd.CombinedOutput(); err != nil || len(bytes.TrimSpace(out)) != 0 {
		t.Fatalf("docker-compose -f docker-compose.yml config -q: %v\n%s", err, out)
	}

	data, err := os.ReadFile(repoPath("docker-compose.yml"))
	if err != nil {
		t.Fatal(err)
	}
	bad := bytes.Replace(data, []byte("condition: service_completed_successfully"), []byte("condition: service_finished"), 1)
	if bytes.Equal(bad, data) {
		t.Fatal("docker-compose.yml has no service_completed_successfully dependency to break")
	}
	path := filepath.Join(t.TempDir(), "docker-compose.yml")
	if err := os.WriteFile(path, bad, 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := testproc.Command(t, dc, "-f", path, "config", "-q").CombinedOutput(); err == nil {
		t.Errorf("docker-compose config -q accepts an invalid depends_on condition:\n%s", out)
	}
}

// TestComposeServices: the stack's services, pinned images, and the
// addresses, topics, ports and mounts that tie them together.
func TestComposeServices(t *testing.T) {
	c := loadCompose(t)
	for _, name := range []string{"kafka", "kafka-init", "nats", "streamlearn", "generator", "prometheus", "grafana"} {
		if _, ok := c.Services[name]; !ok {
			t.Errorf("docker-compose.yml has no %q service", name)
		}
	}
	stages := dockerStages(t)
	for name, s := range c.Services {
		switch {
		case s.Build != nil:
			if filepath.Clean(s.Build.Context) != "." || !slices.Contains(stages, s.Build.Target) {
				t.Errorf("service %s builds context %q target %q; want the repository's Dockerfile, one of stages %v", name, s.Build.Context, s.Build.Target, stages)
			}
		case !pinned(s.Image):
			t.Errorf("service %s: image %q is not pinned to a tag", name, s.Image)
		}
	}
	for service, repo := range map[string]string{"kafka": "apache/kafka", "kafka-init": "apache/kafka",
		"nats": "nats", "prometheus": "prom/prometheus", "grafana": "grafana/grafana"} {
		if img, _, _ := strings.Cut(c.Services[service].Image, ":"); img != repo {
			t.Errorf("service %s runs image %q, want the official %s", service, c.Services[service].Image, repo)
		}
	}

	// Kafka: KRaft, one node, with a listener other containers reach.
	kafka := c.Services["kafka"]
	if roles := kafka.env("KAFKA_PROCESS_ROLES"); !strings.Contains(roles, "broker") || !strings.Contains(roles, "controller") {
		t.Errorf("kafka: KAFKA_PROCESS_ROLES %q, want broker,controller (KRaft, one node)", roles)
	}
	advertised := map[string]bool{} // host:port
	for l := range strings.SplitSeq(kafka.env("KAFKA_ADVERTISED_LISTENERS"), ",") {
		if _, hp, ok := strings.Cut(strings.TrimSpace(l), "://"); ok {
			advertised[hp] = true
		}
	}
	if !advertised["kafka:9092"] {
		t.Errorf("kafka advertises %v; want kafka:9092 for the other containers", slices.Sorted(maps.Keys(advertised)))
	}
	if w := c.Services["nats"].words(); !slices.Contains(w, "-js") {
		t.Errorf("nats command %v: want -js (JetStream)", w)
	}

	// streamlearn: the mounted config, loaded as `run -c` loads it.
	sl := c.Services["streamlearn"]
	cfgPath := flagValue(sl.words(), "-c")
	if cfgPath == "" || sl.mount("./deploy/streamlearn.yaml") != cfgPath {
		t.Fatalf("streamlearn runs %v with ./deploy/streamlearn.yaml mounted at %q; want -c that path", sl.words(), sl.mount("./deploy/streamlearn.yaml"))
	}
	cfg, err := config.Load(repoPath("deploy/streamlearn.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	example, err := config.Load(repoPath("config.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(cfg.Learners, example.Learners) || !reflect.DeepEqual(cfg.Features, example.Features) {
		t.Errorf("deploy/streamlearn.yaml's features and learners differ from config.yaml's")
	}
	if d := cfg.Checkpoint.Dir; d != "" && !slices.ContainsFunc(sl.Volumes, func(v string) bool {
		parts := strings.Split(v, ":")
		return len(parts) >= 2 && !strings.HasPrefix(parts[0], ".") && parts[1] == d
	}) {
		t.Errorf("deploy/streamlearn.yaml: checkpoint.dir %q is not a volume of the streamlearn service: its state dies with the container", d)
	}
	if cfg.Source.Kind != "kafka" || len(cfg.Source.Brokers) == 0 || cfg.Source.Topic == "" {
		t.Fatalf("deploy/streamlearn.yaml: source %+v, want a Kafka topic", cfg.Source)
	}
	for _, b := range cfg.Source.Brokers {
		host, _, _ := net.SplitHostPort(b)
		if !advertised[b] || c.Services[host].Image == "" {
			t.Errorf("deploy/streamlearn.yaml: broker %q is not a listener the kafka service advertises (%v)", b, slices.Sorted(maps.Keys(advertised)))
		}
	}
	topics := []string{cfg.Source.Topic}
	for name, s := range map[string]*config.Sink{"predictions": cfg.Sinks.Predictions, "reports": cfg.Sinks.Reports, "dead_letters": cfg.Sinks.DeadLetters} {
		switch {
		case s == nil:
		case s.Kind == "kafka":
			topics = append(topics, s.Topic)
		case s.Kind == "nats" || s.Kind == "jetstream":
			if !strings.HasPrefix(s.URL, "nats://nats:4222") {
				t.Errorf("sinks.%s: url %q, want the nats service, nats://nats:4222", name, s.URL)
			}
		default:
			t.Errorf("sinks.%s: kind %s; a file in the distroless container is lost with it", name, s.Kind)
		}
	}
	// The sinks do not create topics: kafka-init must.
	initCmd := strings.Join(c.Services["kafka-init"].words(), " ")
	for _, topic := range topics {
		if !regexp.MustCompile(`\b` + regexp.QuoteMeta(topic) + `\b`).MatchString(initCmd) {
			t.Errorf("kafka-init does not create topic %q: %s", topic, initCmd)
		}
	}
	gen := strings.Fields(c.Services["generator"].env("PUBLISH_ARGS"))
	if flagValue(gen, "--kind") != "kafka" || flagValue(gen, "--topic") != cfg.Source.Topic || !slices.Contains(cfg.Source.Brokers, flagValue(gen, "--brokers")) {
		t.Errorf("generator PUBLISH_ARGS %q: want --kind kafka --brokers %s --topic %s", gen, cfg.Source.Brokers[0], cfg.Source.Topic)
	}

	// Prometheus scrapes streamlearn's http.addr.
	_, port, err := net.SplitHostPort(cfg.HTTP.Addr)
	if err != nil || !strings.HasPrefix(cfg.HTTP.Addr, "0.0.0.0:") {
		t.Errorf("deploy/streamlearn.yaml: http.addr %q, want 0.0.0.0:PORT (reachable from the prometheus container)", cfg.HTTP.Addr)
	}
	prom := c.Services["prometheus"]
	if p := flagValue(prom.words(), "--config.file"); p == "" || prom.mount("./deploy/prometheus/prometheus.yml") != p {
		t.Errorf("prometheus runs %v; want --config.file where ./deploy/prometheus/prometheus.yml is mounted", prom.words())
	}
	if targets := promTargets(t); !slices.Contains(targets, "streamlearn:"+port) {
		t.Errorf("deploy/prometheus/prometheus.yml scrapes %v, want streamlearn:%s", targets, port)
	}

	// Grafana: the provisioning and the dashboards where the provider looks.
	graf := c.Services["grafana"]
	if graf.mount("./deploy/grafana/provisioning") != "/etc/grafana/provisioning" {
		t.Errorf("grafana: ./deploy/grafana/provisioning is mounted at %q, want /etc/grafana/provisioning", graf.mount("./deploy/grafana/provisioning"))
	}
	var providers struct {
		Providers []struct {
			Options struct {
				Path string `yaml:"path"`
			} `yaml:"options"`
		} `yaml:"providers"`
	}
	readYAML(t, "deploy/grafana/provisioning/dashboards/streamlearn.yml", &providers)
	if len(providers.Providers) != 1 || graf.mount("./deploy/grafana/dashboards") != providers.Providers[0].Options.Path {
		t.Errorf("grafana: the dashboard provider reads %+v, ./deploy/grafana/dashboards is mounted at %q", providers, graf.mount("./deploy/grafana/dashboards"))
	}
	if home := graf.env("GF_DASHBOARDS_DEFAULT_HOME_DASHBOARD_PATH"); home != graf.mount("./deploy/grafana/dashboards")+"/streamlearn.json" {
		t.Errorf("grafana: home dashboard %q is not the mounted deploy/grafana/dashboards/streamlearn.json", home)
	}
	var sources struct {
		Datasources []struct {
			Name, UID, Type, URL string
			IsDefault            bool `yaml:"isDefault"`
		} `yaml:"datasources"`
	}
	readYAML(t, "deploy/grafana/provisioning/datasources/prometheus.yml", &sources)
	if len(sources.Datasources) != 1 {
		t.Fatalf("grafana data sources: %+v, want one", sources)
	}
	if ds := sources.Datasources[0]; ds.Type != "prometheus" || ds.URL != "http://prometheus:9090" || ds.UID != "prometheus" || !ds.IsDefault {
		t.Errorf("grafana data source %+v: want the default, uid prometheus, type prometheus, url http://prometheus:9090", ds)
	}
}

func readYAML(t *testing.T, rel string, v any) {
	t.Helper()
	data, err := os.ReadFile(repoPath(rel))
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(data, v); err != nil {
		t.Fatalf("%s: %v", rel, err)
	}
}

// promTargets returns the static targets of deploy/prometheus/prometheus.yml.
func promTargets(t *testing.T) []string {
	t.Helper()
	var cfg struct {
		ScrapeConfigs []struct {
			StaticConfigs []struct {
				Targets []string `yaml:"targets"`
			} `yaml:"static_configs"`
		} `yaml:"scrape_configs"`
	}
	readYAML(t, "deploy/prometheus/prometheus.yml", &cfg)
	var out []string
	for _, sc := range cfg.ScrapeConfigs {
		for _, s := range sc.StaticConfigs {
			out = append(out, s.Targets...)
		}
	}
	return out
}

// dockerStages parses the Dockerfile, checks what the stack relies on —
// every base image pinned, the Go of go.mod, a static binary, non-root
// runtime stages, the runtime as the default (last) stage — and returns
// the stage names.
func dockerStages(t *testing.T) []string {
	t.Helper()
	data, err := os.ReadFile(repoPath("Dockerfile"))
	if err != nil {
		t.Fatal(err)
	}
	gomod, err := os.ReadFile(repoPath("go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	goVersion := regexp.MustCompile(`(?m)^go (\S+)$`).FindSubmatch(gomod)
	if goVersion == nil {
		t.Fatal("go.mod has no go directive")
	}
	type stage struct {
		name, from string
		user       string
		static     bool
	}
	var stages []*stage
	for line := range strings.SplitSeq(strings.ReplaceAll(string(data), "\\\n", " "), "\n") {
		f := strings.Fields(line)
		if len(f) == 0 || strings.HasPrefix(f[0], "#") {
			continue
		}
		switch strings.ToUpper(f[0]) {
		case "FROM":
			s := &stage{from: f[1]}
			if len(f) == 4 && strings.EqualFold(f[2], "AS") {
				s.name = f[3]
			}
			stages = append(stages, s)
		case "USER":
			stages[len(stages)-1].user = f[1]
		case "RUN":
			if strings.Contains(line, "CGO_ENABLED=0") && strings.Contains(line, "go build") {
				stages[len(stages)-1].static = true
			}
		}
	}
	var names []string
	static := false
	for i, s := range stages {
		names = append(names, s.name)
		static = static || s.static
		if !slices.Contains(names[:i], s.from) && !pinned(s.from) {
			t.Errorf("Dockerfile: FROM %s is not pinned to a tag", s.from)
		}
		if strings.HasPrefix(s.from, "golang:") && s.from != "golang:"+string(goVersion[1]) {
			t.Errorf("Dockerfile: FROM %s, but go.mod says go %s (the golang images set GOTOOLCHAIN=local)", s.from, goVersion[1])
		}
		if (s.name == "runtime" || s.name == "generator") && (s.user == "" || s.user == "root" || strings.HasPrefix(s.user, "0")) {
			t.Errorf("Dockerfile: stage %s runs as %q, want a non-root user", s.name, s.user)
		}
	}
	if !static {
		t.Error("Dockerfile: no RUN builds with CGO_ENABLED=0 go build")
	}
	if len(names) == 0 || names[len(names)-1] != "runtime" {
		t.Errorf("Dockerfile: stages %v; want runtime last, the default target", names)
	}
	return names
}

// TestPromtoolCheckConfig: deploy/prometheus/prometheus.yml passes
// `promtool check config`, and a broken copy does not.
func TestPromtoolCheckConfig(t *testing.T) {
	promtool := requireTool(t, "STREAMLEARN_REQUIRE_PROMETHEUS", "promtool", "prometheus")
	path := repoPath("deploy/prometheus/prometheus.yml")
	if out, err := testproc.Command(t, promtool, "check", "config", path).CombinedOutput(); err != nil {
		t.Fatalf("promtool check config %s: %v\n%s", path, err, out)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	bad := filepath.Join(t.TempDir(), "prometheus.yml")
	if err := os.WriteFile(bad, bytes.Replace(data, []byte("scrape_interval: "), []byte("scrape_intervall: "), 1), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := testproc.Command(t, promtool, "check", "config", bad).CombinedOutput(); err == nil {
		t.Errorf("promtool check config accepts an unknown key:\n%s", out)
	}
}

// grafanaDashboard is the part of a dashboard's JSON model the checks read.
type grafanaDashboard struct {
	UID        string         `json:"uid"`
	Title      string         `json:"title"`
	Panels     []grafanaPanel `json:"panels"`
	Templating struct {
		List []struct {
			Name       string         `json:"name"`
			Type       string         `json:"type"`
			Query      any            `json:"query"`
			Definition string         `json:"definition"`
			Datasource *grafanaSource `json:"datasource"`
		} `json:"list"`
	} `json:"templating"`
}

type grafanaPanel struct {
	ID         int            `json:"id"`
	Type       string         `json:"type"`
	Title      string         `json:"title"`
	Repeat     string         `json:"repeat"`
	Datasource *grafanaSource `json:"datasource"`
	Targets    []struct {
		RefID      string         `json:"refId"`
		Expr       string         `json:"expr"`
		Datasource *grafanaSource `json:"datasource"`
	} `json:"targets"`
	Panels []grafanaPanel `json:"panels"` // a collapsed row's
}

type grafanaSource struct {
	Type string `json:"type"`
	UID  string `json:"uid"`
}

// dashQuery is one PromQL query of a panel.
type dashQuery struct {
	Panel, Expr string
}

// all returns every panel, those of collapsed rows included.
func (d *grafanaDashboard) all() []grafanaPanel {
	var out []grafanaPanel
	var walk func([]grafanaPanel)
	walk = func(ps []grafanaPanel) {
		for _, p := range ps {
			out = append(out, p)
			walk(p.Panels)
		}
	}
	walk(d.Panels)
	return out
}

func (d *grafanaDashboard) queries() []dashQuery {
	var out []dashQuery
	for _, p := range d.all() {
		for _, tg := range p.Targets {
			out = append(out, dashQuery{Panel: p.Title, Expr: tg.Expr})
		}
	}
	return out
}

func loadDashboard(t *testing.T) *grafanaDashboard {
	t.Helper()
	data, err := os.ReadFile(repoPath("deploy/grafana/dashboards/streamlearn.json"))
	if err != nil {
		t.Fatal(err)
	}
	var d grafanaDashboard
	if err := json.Unmarshal(data, &d); err != nil {
		t.Fatalf("deploy/grafana/dashboards/streamlearn.json: %v", err)
	}
	return &d
}

// grafanaVar matches the variable syntaxes Grafana interpolates: $name,
// ${name} and ${name:format}, [[name]].
var grafanaVar = regexp.MustCompile(`\$\{(\w+)(?::\w+)?\}|\$(\w+)|\[\[(\w+)\]\]`)

// grafanaExpand interpolates the dashboard's variables as Grafana would for
// one learner and a rate interval.
func grafanaExpand(expr, learner, rateInterval string) string {
	return grafanaVar.ReplaceAllStringFunc(expr, func(v string) string {
		name := strings.Trim(v, "${}[]")
		name, _, _ = strings.Cut(name, ":")
		switch name {
		case "learner":
			return learner
		case "__rate_interval", "__interval":
			return rateInterval
		case "__range":
			return "1h"
		}
		return v // unknown: left for the parser to reject
	})
}

// PromQL words that are not metric names.
var (
	promqlKeywords = map[string]bool{"by": true, "without": true, "on": true, "ignoring": true, "group_left": true,
		"group_right": true, "bool": true, "offset": true, "and": true, "or": true, "unless": true, "atan2": true,
		"Inf": true, "inf": true, "NaN": true, "nan": true}
	promqlAggregations = map[string]bool{"sum": true, "min": true, "max": true, "avg": true, "group": true,
		"stddev": true, "stdvar": true, "count": true, "count_values": true, "bottomk": true, "topk": true, "quantile": true}
	promqlGrouping = map[string]bool{"by": true, "without": true, "on": true, "ignoring": true, "group_left": true, "group_right": true}
)

// promqlMetricNames returns the metric names a PromQL expression selects:
// the identifiers outside strings, label matchers ({...}), ranges ([...])
// and grouping label lists that are neither keywords nor called as
// functions or aggregations.
func promqlMetricNames(expr string) ([]string, error) {
	if v := grafanaVar.FindString(expr); v != "" {
		return nil, fmt.Errorf("uninterpolated variable %s in %q", v, expr)
	}
	var names []string
	isIdentStart := func(c byte) bool { return c == '_' || c == ':' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' }
	isIdent := func(c byte) bool { return isIdentStart(c) || c >= '0' && c <= '9' }
	// next returns the index of the next non-space byte at or after i.
	next := func(i int) int {
		for i < len(expr) && strings.IndexByte(" \t\r\n", expr[i]) >= 0 {
			i++
		}
		return i
	}
	// skip returns the index after the bracket closing the one at i,
	// stepping over strings.
	skip := func(i int) (int, error) {
		open, depth := expr[i], 0
		closeBy := map[byte]byte{'{': '}', '[': ']', '(': ')'}[open]
		for j := i; j < len(expr); j++ {
			switch c := expr[j]; {
			case c == '"' || c == '\'' || c == '`':
				k := j + 1
				for k < len(expr) && expr[k] != c {
					if expr[k] == '\\' && c != '`' {
						k++
					}
					k++
				}
				j = k
			case c == open:
				depth++
			case c == closeBy:
				if depth--; depth == 0 {
					return j + 1, nil
				}
			}
		}
		return 0, fmt.Errorf("unbalanced %c in %q", open, expr)
	}
	depth := 0
	for i := 0; i < len(expr); {
		c := expr[i]
		switch {
		case c == '"' || c == '\'' || c == '`':
			k := i + 1
			for k < len(expr) && expr[k] != c {
				if expr[k] == '\\' && c != '`' {
					k++
				}
				k++
			}
			if k >= len(expr) {
				return nil, fmt.Errorf("unterminated string in %q", expr)
			}
			i = k + 1
		case c == '{' || c == '[':
			j, err := skip(i)
			if err != nil {
				return nil, err
			}
			i = j
		case c == '(' || c == ')':
			if c == '(' {
				depth++
			} else if depth--; depth < 0 {
				return nil, fmt.Errorf("unbalanced ) in %q", expr)
			}
			i++
		case c >= '0' && c <= '9' || c == '.':
			for i < len(expr) && (isIdent(expr[i]) || expr[i] == '.') {
				i++
			}
		case isIdentStart(c):
			j := i
			for j < len(expr) && isIdent(expr[j]) {
				j++
			}
			word, after := expr[i:j], next(j)
			i = j
			switch {
			case promqlGrouping[word] && after < len(expr) && expr[after] == '(':
				k, err := skip(after)
				if err != nil {
					return nil, err
				}
				i = k
			case promqlKeywords[word], promqlAggregations[word]:
			case after < len(expr) && expr[after] == '(':
				// a function call
			default:
				names = append(names, word)
			}
		default:
			i++
		}
	}
	if depth != 0 {
		return nil, fmt.Errorf("unbalanced ( in %q", expr)
	}
	return names, nil
}

// exportedMetricNames returns the names of the series streamlearn's
// /metrics can carry: every family the collector and the event-duration
// histogram describe (a histogram's _bucket, _sum and _count). The
// families of internal/metrics' golden exposition must be among them.
func exportedMetricNames(t *testing.T) map[string]bool {
	t.Helper()
	ch := make(chan *prometheus.Desc, 100)
	metrics.NewCollector(func() *service.Snapshot { return nil }).Describe(ch)
	close(ch)
	fqName := regexp.MustCompile(`fqName: "([^"]+)"`)
	names := map[string]bool{}
	for d := range ch {
		m := fqName.FindStringSubmatch(d.String())
		if m == nil {
			t.Fatalf("no fqName in %s", d)
		}
		names[m[1]] = true
	}
	hist := make(chan *prometheus.Desc, 1)
	metrics.NewEventDuration().Describe(hist)
	close(hist)
	for d := range hist {
		m := fqName.FindStringSubmatch(d.String())
		if m == nil {
			t.Fatalf("no fqName in %s", d)
		}
		for _, suffix := range []string{"_bucket", "_sum", "_count"} {
			names[m[1]+suffix] = true
		}
	}
	golden, err := filepath.Glob(repoPath("internal/metrics/testdata/*.prom"))
	if err != nil || len(golden) == 0 {
		t.Fatalf("no golden exposition in internal/metrics/testdata (%v)", err)
	}
	for _, g := range golden {
		f, err := os.Open(g)
		if err != nil {
			t.Fatal(err)
		}
		parser := expfmt.NewTextParser(model.UTF8Validation)
		mfs, err := parser.TextToMetricFamilies(f)
		f.Close()
		if err != nil {
			t.Fatalf("%s: %v", g, err)
		}
		for name := range mfs {
			if !names[name] {
				t.Errorf("%s has %s, which the collector does not describe", g, name)
			}
		}
	}
	return names
}

// TestGrafanaDashboard: the provisioned dashboard draws what DESIGN.md's
// metrics offer — per learner, mistakes against the mistake bound and
// regret against the regret bound (one row per learner), events/s by
// outcome, invalid events by reason, bound violations, the p99 event
// latency and the consumer lag — from the provisioned data source, and
// every query selects only metrics streamlearn exports.
func TestGrafanaDashboard(t *testing.T) {
	d := loadDashboard(t)
	if d.UID == "" || d.Title == "" {
		t.Errorf("dashboard uid %q title %q: want both", d.UID, d.Title)
	}
	exported := exportedMetricNames(t)
	vars := map[string]bool{}
	for _, v := range d.Templating.List {
		vars[v.Name] = true
		switch v.Type {
		case "datasource":
			if v.Query != "prometheus" {
				t.Errorf("variable %s: data sources of type %v, want prometheus", v.Name, v.Query)
			}
		case "query":
			m := regexp.MustCompile(`^label_values\((\w+),\s*(\w+)\)$`).FindStringSubmatch(v.Definition)
			if m == nil || !exported[m[1]] {
				t.Errorf("variable %s: %q, want label_values of an exported metric", v.Name, v.Definition)
			}
		}
	}
	if !vars["datasource"] || !vars["learner"] {
		t.Errorf("dashboard variables %v: want datasource and learner", slices.Sorted(maps.Keys(vars)))
	}

	ids := map[int]bool{}
	used := map[string]bool{}
	for _, p := range d.all() {
		if ids[p.ID] {
			t.Errorf("panel %q: id %d is not unique", p.Title, p.ID)
		}
		ids[p.ID] = true
		if p.Type == "row" {
			continue
		}
		if len(p.Targets) == 0 {
			t.Errorf("panel %q has no query", p.Title)
		}
		for _, ds := range append([]*grafanaSource{p.Datasource}, func() (out []*grafanaSource) {
			for _, tg := range p.Targets {
				out = append(out, tg.Datasource)
			}
			return out
		}()...) {
			if ds == nil || ds.Type != "prometheus" || (ds.UID != "${datasource}" && ds.UID != "prometheus") {
				t.Errorf("panel %q: data source %+v, want the prometheus one", p.Title, ds)
			}
		}
		for _, tg := range p.Targets {
			expr := grafanaExpand(tg.Expr, "pct", "1m")
			names, err := promqlMetricNames(expr)
			if err != nil {
				t.Errorf("panel %q query %s: %v", p.Title, tg.RefID, err)
				continue
			}
			if len(names) == 0 {
				t.Errorf("panel %q query %s selects no metric: %s", p.Title, tg.RefID, tg.Expr)
			}
			for _, n := range names {
				used[n] = true
				if !exported[n] {
					t.Errorf("panel %q query %s: %s is not a metric streamlearn exports (%s)", p.Title, tg.RefID, n, tg.Expr)
				}
			}
		}
	}
	for _, n := range []string{"streamlearn_mistakes_total", "streamlearn_bound", "streamlearn_regret", "streamlearn_regret_bound",
		"streamlearn_events_total", "streamlearn_invalid_events_total", "streamlearn_bound_violations_total",
		"streamlearn_event_duration_seconds_bucket", "streamlearn_consumer_lag"} {
		if !used[n] {
			t.Errorf("no dashboard panel draws %s", n)
		}
	}
	// The per-learner curves sit in a row repeated for each learner.
	repeated := false
	for _, p := range d.Panels {
		if p.Type == "row" && p.Repeat == "learner" {
			repeated = true
		}
	}
	if !repeated {
		t.Error("no row of the dashboard repeats per learner")
	}
}

// TestPromQLNames pins the name extraction the dashboard check relies on.
func TestPromQLNames(t *testing.T) {
	for _, c := range []struct {
		expr string
		want []string
	}{
		{`streamlearn_regret`, []string{"streamlearn_regret"}},
		{`sum by (outcome) (rate(streamlearn_events_total{source=~"a|b", outcome!="x{y}"}[5m]))`, []string{"streamlearn_events_total"}},
		{`histogram_quantile(0.99, sum(rate(x_bucket[1m] offset 1h30m)) by (le))`, []string{"x_bucket"}},
		{`a / on(learner) group_left(kind) b > bool 2e-3`, []string{"a", "b"}},
		{`max without (partition) (m:rule) or vector(0)`, []string{"m:rule"}},
		{`count(up == 1) unless absent(z)`, []string{"up", "z"}},
	} {
		got, err := promqlMetricNames(c.expr)
		if err != nil || !slices.Equal(got, c.want) {
			t.Errorf("promqlMetricNames(%q) = %q, %v; want %q", c.expr, got, err, c.want)
		}
	}
	for _, bad := range []string{`rate(x{a="b"[5m])`, `sum(rate(x[5m])`, `x{learner="$learner"}`} {
		if _, err := promqlMetricNames(bad); err == nil {
			t.Errorf("promqlMetricNames(%q): no error", bad)
		}
	}
}

// TestPromtoolCheckDashboardQueries: every dashboard query, interpolated
// as Grafana would, parses as PromQL (`promtool check rules` on recording
// rules made of them).
func TestPromtoolCheckDashboardQueries(t *testing.T) {
	promtool := requireTool(t, "STREAMLEARN_REQUIRE_PROMETHEUS", "promtool", "prometheus")
	type rule struct {
		Record string `yaml:"record"`
		Expr   string `yaml:"expr"`
	}
	var rules []rule
	for i, q := range loadDashboard(t).queries() {
		rules = append(rules, rule{Record: "dashboard:query_" + strconv.Itoa(i), Expr: grafanaExpand(q.Expr, "wm-h", "1m")})
	}
	data, err := yaml.Marshal(map[string]any{"groups": []any{map[string]any{"name": "dashboard", "rules": rules}}})
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "rules.yml")
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := testproc.Command(t, promtool, "check", "rules", path).CombinedOutput()
	if err != nil || !bytes.Contains(out, []byte(fmt.Sprintf("SUCCESS: %d rules found", len(rules)))) {
		t.Fatalf("promtool check rules (the dashboard's %d queries): %v\n%s\n%s", len(rules), err, out, data)
	}
}

// TestComposeGenerator runs deploy/generator/generate.sh — the generator
// service's loop — with the built binary against a Kafka broker process:
// the topic then holds exactly the batches `streamlearn generate` gives
// for the successive seeds.
func TestComposeGenerator(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end test (builds binaries, runs a broker): skipped in -short mode")
	}
	sh, err := exec.LookPath("sh")
	if err != nil {
		t.Skip("no sh")
	}
	sl, kfake := e2eBuild(t)
	ctx, dir := e2eStart(t, e2eTimeout)
	bootstrap := startKfake(t, ctx, dir, kfake, 1)
	script, err := filepath.Abs(repoPath("deploy/generator/generate.sh"))
	if err != nil {
		t.Fatal(err)
	}
	const batch, batches = 150, 3
	cmd := testproc.CommandContext(t, ctx, sh, script)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(),
		"PATH="+filepath.Dir(sl)+string(os.PathListSeparator)+os.Getenv("PATH"),
		"PUBLISH_ARGS=--kind kafka --brokers "+bootstrap+" --topic events",
		"BATCH="+strconv.Itoa(batch), "ITERATIONS="+strconv.Itoa(batches), "INTERVAL=0", "NOISE=0.05", "SEED=7",
		"TMPDIR="+dir, "GORACE=atexit_sleep_ms=0")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%s: %v\n%s", script, err, out)
	}
	t.Logf("%s", bytes.TrimSpace(out))
	if leftover, _ := filepath.Glob(filepath.Join(dir, "streamlearn-batch.*")); len(leftover) != 0 {
		t.Errorf("the script left %v behind", leftover)
	}
	var want bytes.Buffer
	for i := range batches {
		want.Write(runProc(t, ctx, dir, sl, "generate", "-n", strconv.Itoa(batch), "--seed", strconv.Itoa(7+i), "--noise", "0.05"))
	}
	got := runProc(t, ctx, dir, sl, "record", "--kind", "kafka", "--brokers", bootstrap, "--topic", "events")
	if !bytes.Equal(got, want.Bytes()) {
		t.Errorf("topic events holds %d lines, want the %d of %d generated batches (seeds 7..%d)",
			bytes.Count(got, []byte("\n")), bytes.Count(want.Bytes(), []byte("\n")), batches, 7+batches-1)
	}
}
