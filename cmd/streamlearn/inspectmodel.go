package main

import (
	"encoding/hex"
	"fmt"
	"io"
	"strings"

	"github.com/streamlearn/streamlearn/internal/checkpoint"
	"github.com/streamlearn/streamlearn/internal/config"
	"github.com/streamlearn/streamlearn/internal/serving"
)

// inspectModel reads the model file f, as inspectFile a checkpoint: its
// report is verified against its state with cfg, or, without, with the
// configuration the file carries (when it carries one).
func inspectModel(f string, cfg *config.Config) (in inspected, digestErr, err error) {
	w, err := serving.LoadWarmStart(f)
	if err != nil {
		return in, nil, err
	}
	m := w.Model
	in = inspected{Kind: "model", Format: int(m.Format), From: m.From, FileSHA256: hex.EncodeToString(w.SHA256[:]), Config: string(m.Config)}
	if digestErr, err = in.fill(f, m.Created, m.Fingerprint, m.State, m.Report); err != nil {
		return in, nil, err
	}
	if cfg == nil {
		if cfg, err = w.Config(); err != nil {
			return in, nil, err
		}
	}
	if cfg != nil {
		c := &checkpoint.Checkpoint{Fingerprint: m.Fingerprint, State: m.State}
		if err := verifyReport(cfg, c, in.Report); err != nil {
			return in, nil, fmt.Errorf("%s: %w", f, err)
		}
		in.Verified = true
	}
	return in, digestErr, nil
}

// writeModelConfig writes the configuration a model file carries, below
// its report, or says it carries none.
func writeModelConfig(w io.Writer, in inspected) {
	if in.Config == "" {
		fmt.Fprintf(w, "\nconfiguration: none (a model file of format version 1, or a checkpoint exported without -c): serve --model needs -c\n")
		return
	}
	fmt.Fprintf(w, "\nconfiguration it carries (inspect --config writes it alone; serve --model needs no -c):\n")
	for _, line := range strings.SplitAfter(strings.TrimSuffix(in.Config, "\n"), "\n") {
		fmt.Fprintf(w, "  %s", line)
	}
	fmt.Fprintln(w)
}

// printModelConfig writes the configuration the model file at path
// carries, as a configuration file (its model sections); an error when
// it carries none.
func printModelConfig(stdout io.Writer, path string) error {
	w, err := serving.LoadWarmStart(path)
	if err != nil {
		return err
	}
	if len(w.Model.Config) == 0 {
		return fmt.Errorf("inspect: the model %s carries no configuration (a model file of format version %d, or a checkpoint exported without -c)", path, w.Model.Format)
	}
	_, err = stdout.Write(w.Model.Config)
	return err
}
