package main

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"

	"github.com/streamlearn/streamlearn/internal/checkpoint"
	"github.com/streamlearn/streamlearn/internal/config"
	"github.com/streamlearn/streamlearn/internal/pipeline"
	"github.com/streamlearn/streamlearn/internal/service"
)

const exportArgs = "[-c CONFIG] -o MODEL CHECKPOINT"

// runExport writes the model a checkpoint file holds to a model file: its
// state and report, without the source, partition and position, so that
// `run --warm-start` and `replay --warm-start` can start models of any
// source from it. The checkpoint is verified as inspect verifies it; with
// -c its state is also decoded into that configuration, so that a model
// that would not start is refused here rather than at the run.
func runExport(_ context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("export", exportArgs, stderr)
	out := fs.String("o", "", "write the model file to `file` (required)")
	cfgPath := fs.String("c", "", "config `file` the model is for: check that the checkpoint is of it and decodes")
	if err := parse(fs, args); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		return usageErr(fs, "want one checkpoint file, got %d arguments", fs.NArg())
	}
	if *out == "" {
		return usageErr(fs, "-o MODEL: the model file to write")
	}
	c, err := checkpoint.ReadFile(fs.Arg(0))
	if err != nil {
		return err
	}
	m := checkpoint.ModelOf(c)
	if *cfgPath != "" {
		cfg, err := config.Load(*cfgPath)
		if err != nil {
			return err
		}
		w := &service.WarmStart{Path: fs.Arg(0), Model: m}
		if err := w.Check(cfg); err != nil {
			return fmt.Errorf("export: %w", err)
		}
	}
	sum, err := checkpoint.WriteModel(*out, m)
	if err != nil {
		return err
	}
	var rep pipeline.Report
	if err := json.Unmarshal(c.Report, &rep); err != nil {
		return fmt.Errorf("export: the checkpoint's report: %w", err)
	}
	_, err = fmt.Fprintf(stdout, "%s: %d events, %d labeled, %d learners, from the %s\nsha256 %s\n",
		*out, rep.Events, rep.Labeled, len(rep.Learners), m.From, hex.EncodeToString(sum[:]))
	return err
}
