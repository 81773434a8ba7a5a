package main

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"

	"github.com/streamlearn/streamlearn/internal/checkpoint"
	"github.com/streamlearn/streamlearn/internal/config"
	"github.com/streamlearn/streamlearn/internal/pipeline"
	"github.com/streamlearn/streamlearn/internal/service"
)

const exportArgs = "[-c CONFIG] -o MODEL (CHECKPOINT | --partition N)"

// runExport writes the model a checkpoint holds to a model file: its
// state and report, without the source, partition and position, so that
// `run --warm-start`, `replay --warm-start` and `serve --model` can start
// or serve models of any source from it. The checkpoint is a file, or,
// with --partition, partition N's in the store the config names
// (checkpoint.dir or checkpoint.bucket). It is verified as inspect
// verifies it; with -c its state is also decoded into that configuration,
// so that a model that would not start is refused here rather than at the
// run, and the model file carries that configuration's model sections
// (config.Config.ModelYAML), with which `serve --model` needs no -c.
func runExport(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fls := newFlagSet("export", exportArgs, stderr)
	out := fls.String("o", "", "write the model file to `file` (required)")
	cfgPath := fls.String("c", "", "config `file` the model is for: check that the checkpoint is of it and decodes; with --partition, its checkpoint store")
	partition := fls.Int("partition", -1, "export partition `N`'s checkpoint from the config's checkpoint store (checkpoint.dir or checkpoint.bucket) instead of a file")
	if err := parse(fls, args); err != nil {
		return err
	}
	switch {
	case *out == "":
		return usageErr(fls, "-o MODEL: the model file to write")
	case *partition >= 0 && (fls.NArg() != 0 || *cfgPath == ""):
		return usageErr(fls, "--partition %d reads the store of -c's config: give -c and no checkpoint file", *partition)
	case *partition < -1:
		return usageErr(fls, "--partition %d: a partition is 0 or more", *partition)
	case *partition < 0 && fls.NArg() != 1:
		return usageErr(fls, "want one checkpoint file (flags first), got %d arguments", fls.NArg())
	}
	var cfg *config.Config
	if *cfgPath != "" {
		var err error
		if cfg, err = loadConfig(ctx, *cfgPath); err != nil {
			return err
		}
	}
	if err := notOverwritten(*out, fls.Args()); err != nil {
		return fmt.Errorf("export: %w", err)
	}
	var (
		c    *checkpoint.Checkpoint
		what string
		err  error
	)
	if *partition >= 0 {
		st, closeStore, err := openCheckpoints(ctx, cfg.Checkpoint.Dir, cfg)
		if err != nil {
			return err
		}
		defer closeStore()
		if st == nil {
			return fmt.Errorf("export: %s has no checkpoint store (checkpoint.dir or checkpoint.bucket)", *cfgPath)
		}
		if c, err = st.Load(ctx, int32(*partition)); err != nil {
			return fmt.Errorf("export: %w", err)
		}
		what = fmt.Sprintf("partition %d in %s", *partition, st)
	} else {
		if c, err = checkpoint.ReadFile(fls.Arg(0)); err != nil {
			return err
		}
		what = fls.Arg(0)
	}
	if pipeline.IsKeyedState(c.State) {
		return fmt.Errorf("export: %s holds the models of every key of its partition (models.by: key): a model file holds one model, which every new key's model can start from; train it with replay --save of a configuration without models.by", what)
	}
	m := checkpoint.ModelOf(c)
	if cfg != nil {
		w := &service.WarmStart{Path: what, Model: m}
		if err := w.Check(cfg); err != nil {
			return fmt.Errorf("export: %w", err)
		}
		if m.Config, err = cfg.ModelYAML(); err != nil {
			return fmt.Errorf("export: %w", err)
		}
	}
	var rep pipeline.Report
	if err := json.Unmarshal(c.Report, &rep); err != nil {
		return fmt.Errorf("export: the checkpoint's report: %w", err)
	}
	if err := writeModel(stdout, *out, m, &rep); err != nil {
		return fmt.Errorf("export: %s: %w", what, err)
	}
	// A checkpoint does not hold its configuration: -c gives it.
	if m.Config == nil {
		_, err = fmt.Fprintf(stdout, "configuration: none (export with -c to carry it; serve --model then needs -c)\n")
	} else {
		_, err = fmt.Fprintf(stdout, "configuration: the model sections of %s (inspect --config %s prints them)\n", *cfgPath, *out)
	}
	return err
}

// writeModel writes m, whose report is rep, to the model file path
// (checkpoint.WriteModel) and says on w what it wrote: the path, its
// events, labeled events and learners, where it came from, the model's
// digest as inspect prints it and serve's answers carry it
// (model_sha256), and the file's own as sha256sum prints it
// (file_sha256).
func writeModel(w io.Writer, path string, m *checkpoint.Model, rep *pipeline.Report) error {
	digest, err := modelDigest(m.State)
	if err != nil {
		return fmt.Errorf("its state: %w", err)
	}
	sum, err := checkpoint.WriteModel(path, m)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(w, "%s: %d events, %d labeled, %s, from the %s\nmodel_sha256 %s\nfile_sha256 %s\n",
		path, rep.Events, rep.Labeled, learnerCount(len(rep.Learners)), m.From, digest, hex.EncodeToString(sum[:]))
	return err
}

// notOverwritten refuses out, a model file to write, when it is one of
// inputs or holds a checkpoint: a mistyped command must not replace a
// model's only copy.
func notOverwritten(out string, inputs []string) error {
	st, err := os.Stat(out)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	for _, in := range inputs {
		if ist, err := os.Stat(in); err == nil && os.SameFile(st, ist) {
			return fmt.Errorf("-o %s is the input %s: write the model file elsewhere", out, in)
		}
	}
	ckpt, err := checkpoint.IsCheckpointFile(out)
	if err == nil && ckpt {
		err = fmt.Errorf("-o %s holds a checkpoint: write the model file elsewhere", out)
	}
	return err
}
