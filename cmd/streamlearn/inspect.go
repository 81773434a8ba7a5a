package main

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/streamlearn/streamlearn/internal/checkpoint"
	"github.com/streamlearn/streamlearn/internal/config"
	"github.com/streamlearn/streamlearn/internal/pipeline"
	"github.com/streamlearn/streamlearn/internal/regret"
	"github.com/streamlearn/streamlearn/internal/service"
)

const inspectArgs = "[-c CONFIG] [--report text|json] [--all-keys] (CHECKPOINT | MODEL)... | --config MODEL"

// inspected is one checkpoint or model file as `inspect --report json`
// prints it, a line each; a model file has no source, partition or
// position.
type inspected struct {
	File string `json:"file"`
	// Kind is "checkpoint", or "model" for a model file.
	Kind        string `json:"kind"`
	Format      int    `json:"format"`
	Bytes       int64  `json:"bytes"`
	Created     string `json:"created"`
	Fingerprint string `json:"fingerprint"`
	Source      string `json:"source"`
	Partition   int32  `json:"partition"`
	Position    int64  `json:"position"`
	Origin      string `json:"origin,omitempty"`
	Consumer    string `json:"consumer,omitempty"`
	StateBytes  int    `json:"state_bytes"`
	// ModelSHA256 is the model's digest (pipeline.ModelDigest), as
	// export prints it and serve's answers carry it; absent when the
	// state cannot be read for it.
	ModelSHA256 string          `json:"model_sha256,omitempty"`
	Report      pipeline.Report `json:"report"`
	// Verified says whether the report's counts and digests were
	// recomputed from the state (inspect -c) and found equal.
	Verified bool `json:"verified"`
	// ModelsPerKey, of a checkpoint of models per key, is what its state
	// holds of its keys.
	ModelsPerKey *inspectedKeys `json:"models_per_key,omitempty"`
	// Of a model file: where it was taken, the SHA-256 of the file (what
	// sha256sum prints), and the configuration it carries (its model
	// sections, a configuration file; empty when it carries none).
	From       string `json:"from,omitempty"`
	FileSHA256 string `json:"file_sha256,omitempty"`
	Config     string `json:"config,omitempty"`
}

// inspectedKeys is what a checkpoint of models per key holds of its keys
// (pipeline.ReadKeyed): how many, the global model's digest, and the keys
// shown: the topKeys of the most records (ties by key), or every key in
// key order (--all-keys).
type inspectedKeys struct {
	Keys              int            `json:"keys"`
	All               bool           `json:"all"`
	GlobalModelSHA256 string         `json:"global_model_sha256,omitempty"`
	Shown             []inspectedKey `json:"shown"`
}

// inspectedKey is one key of a checkpoint of models per key: its records,
// each learner's mistakes, and its model's digest (the model_sha256 of
// answers of the key's model).
type inspectedKey struct {
	Key         string                `json:"key"`
	Events      uint64                `json:"events"`
	Learners    []inspectedKeyLearner `json:"learners"`
	ModelSHA256 string                `json:"model_sha256"`
	StateBytes  int                   `json:"state_bytes"`
}

// inspectedKeyLearner is one learner of a key's model, in the learners'
// order: its name, its mistakes by the key's own model and, with a
// global model, those of what was served (the choice between the two).
type inspectedKeyLearner struct {
	Name     string  `json:"name"`
	Mistakes uint64  `json:"mistakes"`
	Served   *uint64 `json:"served,omitempty"`
}

// topKeys is how many keys inspect shows of a checkpoint of models per
// key without --all-keys: as many as a running service reports.
const topKeys = service.TopKeys

// runInspect prints what checkpoint files hold: where their model stands
// in the source, and its report (learners, rounds, mistakes, digests). A
// directory stands for every checkpoint in it. A model file is shown as
// well, with the configuration it carries, against which its report is
// verified when no -c is given; --config prints that configuration alone,
// a file for -c. The checksum of each file
// is verified (its size checked before it is read); a damaged file is an
// error naming it, and so is a checkpoint whose partition is not the one
// its file name says or whose report counts more events than its
// position allows. With -c, the model configuration that wrote the
// checkpoints, the state is decoded and its report recomputed: every
// count and digest printed is then verified, and a difference is an
// error.
func runInspect(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("inspect", inspectArgs, stderr)
	format := fs.String("report", "text", "output: text or json")
	cfgPath := fs.String("c", "", "config `file` that wrote the checkpoints: verify their reports against their state")
	allKeys := fs.Bool("all-keys", false, "with models per key: show every key, in key order, not the 10 of the most records")
	onlyConfig := fs.Bool("config", false, "print the configuration the model file carries (its model sections), and nothing else: a file for -c")
	if err := parse(fs, args); err != nil {
		return err
	}
	if *onlyConfig {
		if fs.NArg() != 1 {
			return usageErr(fs, "--config prints one model file's configuration: give one model file")
		}
		return printModelConfig(stdout, fs.Arg(0))
	}
	if *format != "text" && *format != "json" {
		return usageErr(fs, "--report: want text or json, got %q", *format)
	}
	if fs.NArg() == 0 {
		return usageErr(fs, "no checkpoint given")
	}
	var cfg *config.Config
	if *cfgPath != "" {
		var err error
		if cfg, err = loadConfig(ctx, *cfgPath); err != nil {
			return err
		}
	}
	files, err := checkpointFiles(fs.Args())
	if err != nil {
		return err
	}
	var out []inspected
	digestErr := map[int]error{} // by index in out: why a model digest is not known
	for _, f := range files {
		in, derr, err := inspectFile(f, cfg, *allKeys)
		if err != nil {
			return err
		}
		if derr != nil {
			digestErr[len(out)] = derr
		}
		out = append(out, in)
	}
	if *format == "json" {
		// JSON Lines, as every --report json: a checkpoint a line.
		enc := json.NewEncoder(stdout)
		for _, in := range out {
			if err := enc.Encode(in); err != nil {
				return err
			}
		}
		return nil
	}
	return writeInspected(stdout, out, digestErr)
}

// checkpointFiles returns the checkpoint files args name: a file as it
// is, a directory as every checkpoint in it, in its partitions' order. A
// directory without one is an error.
func checkpointFiles(args []string) ([]string, error) {
	var files []string
	for _, arg := range args {
		st, err := os.Stat(arg)
		if err != nil {
			return nil, err
		}
		if !st.IsDir() {
			files = append(files, arg)
			continue
		}
		d, err := checkpoint.OpenDirReadOnly(arg)
		if err != nil {
			return nil, err
		}
		parts, err := d.Partitions(context.Background())
		if err != nil {
			return nil, err
		}
		if len(parts) == 0 {
			return nil, fmt.Errorf("%s: no checkpoint in the directory", arg)
		}
		for _, p := range parts {
			files = append(files, d.File(p))
		}
	}
	return files, nil
}

// inspectFile reads the checkpoint file f, checks it (consistent) and,
// with cfg not nil, verifies its report against its state. digestErr
// says why its model digest is not known (a state this build cannot
// walk), which is not an error: the report as saved is still printed.
// Of a checkpoint of models per key it reads the keys (every one with
// allKeys, else the topKeys of the most records).
func inspectFile(f string, cfg *config.Config, allKeys bool) (in inspected, digestErr, err error) {
	if ok, _ := checkpoint.IsModelFile(f); ok {
		return inspectModel(f, cfg)
	}
	c, err := checkpoint.ReadFile(f)
	if err != nil {
		return in, nil, err
	}
	in = inspected{Kind: "checkpoint", Format: int(c.Format), Source: c.Source, Partition: c.Partition, Position: c.Position, Origin: c.Origin, Consumer: c.Consumer}
	if digestErr, err = in.fill(f, c.Created, c.Fingerprint, c.State, c.Report); err != nil {
		return in, nil, err
	}
	if err := consistent(f, c, in.Report); err != nil {
		return in, nil, err
	}
	if pipeline.IsKeyedState(c.State) {
		if in.ModelsPerKey, err = inspectKeys(c.State, in.Report, allKeys); err != nil {
			return in, nil, fmt.Errorf("%s: %w", f, err)
		}
	}
	if cfg != nil {
		if err := verifyReport(cfg, c, in.Report); err != nil {
			return in, nil, fmt.Errorf("%s: %w", f, err)
		}
		in.Verified = true
	}
	return in, digestErr, nil
}

// fill sets what a checkpoint and a model file f both have in in: its
// file name and size, the time, fingerprint and state of its model, the
// model's digest (digestErr says why it is not known: a state this build
// cannot walk, whose report as saved is still worth printing) and its
// report.
func (in *inspected) fill(f string, created time.Time, fingerprint [32]byte, state, report []byte) (digestErr, err error) {
	st, err := os.Stat(f)
	if err != nil {
		return nil, err
	}
	in.File, in.Bytes, in.StateBytes = filepath.Clean(f), st.Size(), len(state)
	in.Created, in.Fingerprint = created.UTC().Format("2006-01-02T15:04:05.000Z07:00"), fmt.Sprintf("%x", fingerprint)
	if in.ModelSHA256, err = modelDigest(state); err != nil {
		in.ModelSHA256, digestErr = "", err
	}
	if err := json.Unmarshal(report, &in.Report); err != nil {
		return nil, fmt.Errorf("%s: the report it holds: %w", f, err)
	}
	return digestErr, nil
}

// epoch is a model file's time as inspect prints it when the file has
// none: a replay's, which depends on its inputs and configuration only
// (checkpoint.Model.Created).
var epoch = time.Unix(0, 0).UTC().Format("2006-01-02T15:04:05.000Z07:00")

// writeInspected writes the checkpoints and model files out as text,
// each with its report (and a model file's configuration); digestErr, by index in out, says why a model digest is not
// known.
func writeInspected(stdout io.Writer, out []inspected, digestErr map[int]error) error {
	for i, in := range out {
		if i > 0 {
			fmt.Fprintln(stdout)
		}
		if in.Kind == "model" {
			fmt.Fprintf(stdout, "%s: model file format %d, %d bytes, checksum ok\n", in.File, in.Format, in.Bytes)
			created := "created " + in.Created
			if in.Created == epoch {
				created = "no time: the same inputs make the same file"
			}
			fmt.Fprintf(stdout, "from the %s  %s\nfile_sha256 %s\n", in.From, created, in.FileSHA256)
		} else {
			fmt.Fprintf(stdout, "%s: checkpoint format %d, %d bytes, checksum ok\n", in.File, in.Format, in.Bytes)
			fmt.Fprintf(stdout, "source %s  partition %d  position %d  created %s\n", in.Source, in.Partition, in.Position, in.Created)
		}
		if in.Origin != "" {
			fmt.Fprintf(stdout, "of %s\n", in.Origin)
		}
		if in.Consumer != "" {
			fmt.Fprintf(stdout, "consumer %s\n", in.Consumer)
		}
		fmt.Fprintf(stdout, "configuration fingerprint %s\n", in.Fingerprint[:16])
		if err := digestErr[i]; err != nil {
			fmt.Fprintf(stdout, "model_sha256 unknown: %v\n", err)
		} else {
			fmt.Fprintf(stdout, "model_sha256 %s\n", in.ModelSHA256)
		}
		if in.Verified {
			fmt.Fprintf(stdout, "report verified: counts and digests recomputed from the state\n")
		} else {
			fmt.Fprintf(stdout, "report as saved: give -c CONFIG to verify it against the state\n")
		}
		// No rate: the model may have learned in several processes, and
		// its report's seconds are the last one's.
		if err := writeReportText(stdout, in.Report, nil); err != nil {
			return err
		}
		if k := in.ModelsPerKey; k != nil {
			if err := writeInspectedKeys(stdout, in.Report, k); err != nil {
				return err
			}
		}
		if in.Kind == "model" {
			writeModelConfig(stdout, in)
		}
	}
	return nil
}

// consistent checks what a checkpoint file says of itself: the partition
// its name says (Dir's "partition-N.ckpt"; other names say nothing) and,
// for a source whose positions count its records (a Kafka offset from 0,
// a JetStream sequence from 1), no more events than positions up to its
// own.
func consistent(file string, c *checkpoint.Checkpoint, rep pipeline.Report) error {
	name := filepath.Base(file)
	if n, ok := strings.CutPrefix(name, "partition-"); ok {
		if n, ok := strings.CutSuffix(n, ".ckpt"); ok {
			if p, err := strconv.ParseInt(n, 10, 32); err == nil && int32(p) != c.Partition {
				return fmt.Errorf("%s: inconsistent: the file name says partition %d, the checkpoint holds partition %d (copied from another partition?)",
					file, p, c.Partition)
			}
		}
	}
	most := int64(-1) // no bound
	switch {
	case strings.HasPrefix(c.Source, "kafka:"):
		most = c.Position + 1
	case strings.HasPrefix(c.Source, "jetstream:"):
		most = c.Position
	}
	// A model started from a model file counts the file's events too.
	var warm uint64
	if w := rep.WarmStart; w != nil {
		warm = w.Events
	}
	if most >= 0 && rep.Events > uint64(max(most, 0))+warm {
		room := fmt.Sprint(max(most, 0))
		if warm > 0 {
			room += fmt.Sprintf(" beside the %d of the model file it started from", warm)
		}
		return fmt.Errorf("%s: inconsistent: its model counted %d events, but position %d of %s leaves room for %s",
			file, rep.Events, c.Position, c.Source, room)
	}
	return nil
}

// verifyReport decodes c's state into a model of cfg and checks that its
// report has the counts and digests of rep, the one c holds.
func verifyReport(cfg *config.Config, c *checkpoint.Checkpoint, rep pipeline.Report) error {
	if c.Fingerprint != service.Fingerprint(cfg) {
		diff := "input, features or learners differ"
		if ch, err := pipeline.CompareState(c.State, cfg); err == nil {
			diff = ch.String() // from the state's settings digests
		}
		return fmt.Errorf("written by another model configuration than -c's (%s): its state cannot be decoded with it", diff)
	}
	var got pipeline.Report
	if pipeline.IsKeyedState(c.State) {
		k, err := pipeline.NewKeyed(cfg, pipeline.KeyedOptions{Global: cfg.Models.Global})
		if err != nil {
			return err
		}
		if err := k.UnmarshalBinary(c.State); err != nil {
			return fmt.Errorf("its state: %w", err)
		}
		got = k.Report()
		if rep.Keys == nil || got.Keys.Keys != rep.Keys.Keys {
			return fmt.Errorf("the state holds the models of %d keys, the report says %s", got.Keys.Keys, keysOf(rep))
		}
		if (got.Global == nil) != (rep.Global == nil) {
			return fmt.Errorf("the state and the report differ on a global model (models.global)")
		}
		if got.Global != nil {
			if err := sameLearners(got.Global.Learners, rep.Global.Learners); err != nil {
				return fmt.Errorf("the global model: %w", err)
			}
		}
	} else {
		p, err := pipeline.New(cfg)
		if err != nil {
			return err
		}
		if err := p.UnmarshalBinary(c.State); err != nil {
			return fmt.Errorf("its state: %w", err)
		}
		if got, err = p.Report(); err != nil {
			return err
		}
	}
	if got.Events != rep.Events || got.Labeled != rep.Labeled || got.Predicted != rep.Predicted || got.Invalid != rep.Invalid {
		return fmt.Errorf("the state holds %d events (%d labeled, %d predicted, %d invalid), the report says %d (%d, %d, %d)",
			got.Events, got.Labeled, got.Predicted, got.Invalid, rep.Events, rep.Labeled, rep.Predicted, rep.Invalid)
	}
	return sameLearners(got.Learners, rep.Learners)
}

// keysOf says how many keys' models r counts.
func keysOf(r pipeline.Report) string {
	if r.Keys == nil {
		return "none (not models per key)"
	}
	return fmt.Sprint(r.Keys.Keys)
}

// sameLearners checks that got, the learners of a report recomputed from
// a state, have the names, rounds, mistakes and digests of rep's.
func sameLearners(got, rep []regret.LearnerReport) error {
	if len(got) != len(rep) {
		return fmt.Errorf("the state holds %d learners, the report %d", len(got), len(rep))
	}
	for i, l := range got {
		r := rep[i]
		if l.Name != r.Name || l.Rounds != r.Rounds || l.Mistakes != r.Mistakes || l.StateSHA256 != r.StateSHA256 {
			return fmt.Errorf("learner %s: the state has %d rounds, %d mistakes, digest %.12s; the report says %s: %d, %d, %.12s",
				l.Name, l.Rounds, l.Mistakes, l.StateSHA256, r.Name, r.Rounds, r.Mistakes, r.StateSHA256)
		}
	}
	return nil
}

// modelDigest returns the model's digest of state, hex
// (pipeline.ModelDigest: the SHA-256 of the state without the dashboard's
// curves), the one export prints, serve logs and every answer of
// /v1/predict carries as model_sha256. A model file's own SHA-256 is
// file_sha256.
func modelDigest(state []byte) (string, error) {
	sum, err := pipeline.ModelDigest(state)
	if err != nil {
		return "", err
	}
	return hex.EncodeToString(sum[:]), nil
}
