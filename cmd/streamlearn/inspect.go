package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/streamlearn/streamlearn/internal/checkpoint"
	"github.com/streamlearn/streamlearn/internal/pipeline"
)

const inspectArgs = "[--report text|json] CHECKPOINT..."

// inspected is one checkpoint as `inspect --report json` prints it.
type inspected struct {
	File        string          `json:"file"`
	Format      int             `json:"format"`
	Bytes       int64           `json:"bytes"`
	Created     string          `json:"created"`
	Fingerprint string          `json:"fingerprint"`
	Source      string          `json:"source"`
	Partition   int32           `json:"partition"`
	Position    int64           `json:"position"`
	Origin      string          `json:"origin,omitempty"`
	StateBytes  int             `json:"state_bytes"`
	Report      pipeline.Report `json:"report"`
}

// runInspect prints what checkpoint files hold: where their model stands
// in the source, and its report (learners, rounds, mistakes, digests). A
// directory stands for every checkpoint in it. The checksum of each file
// is verified; a damaged file is an error naming it.
func runInspect(_ context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("inspect", inspectArgs, stderr)
	format := fs.String("report", "text", "output: text or json")
	if err := parse(fs, args); err != nil {
		return err
	}
	if *format != "text" && *format != "json" {
		return usageErr(fs, "--report: want text or json, got %q", *format)
	}
	if fs.NArg() == 0 {
		return usageErr(fs, "no checkpoint given")
	}
	var files []string
	for _, arg := range fs.Args() {
		st, err := os.Stat(arg)
		if err != nil {
			return err
		}
		if !st.IsDir() {
			files = append(files, arg)
			continue
		}
		d, err := checkpoint.OpenDirReadOnly(arg)
		if err != nil {
			return err
		}
		parts, err := d.Partitions(context.Background())
		if err != nil {
			return err
		}
		if len(parts) == 0 {
			return fmt.Errorf("%s: no checkpoint in the directory", arg)
		}
		for _, p := range parts {
			files = append(files, d.File(p))
		}
	}
	var out []inspected
	for _, f := range files {
		c, err := checkpoint.ReadFile(f)
		if err != nil {
			return err
		}
		st, err := os.Stat(f)
		if err != nil {
			return err
		}
		in := inspected{
			File: filepath.Clean(f), Format: int(c.Format), Bytes: st.Size(),
			Created: c.Created.UTC().Format("2006-01-02T15:04:05.000Z07:00"), Fingerprint: fmt.Sprintf("%x", c.Fingerprint),
			Source: c.Source, Partition: c.Partition, Position: c.Position, Origin: c.Origin, StateBytes: len(c.State),
		}
		if err := json.Unmarshal(c.Report, &in.Report); err != nil {
			return fmt.Errorf("%s: the report it holds: %w", f, err)
		}
		out = append(out, in)
	}
	if *format == "json" {
		b, err := json.MarshalIndent(out, "", "  ")
		if err != nil {
			return err
		}
		_, err = fmt.Fprintf(stdout, "%s\n", b)
		return err
	}
	for i, in := range out {
		if i > 0 {
			fmt.Fprintln(stdout)
		}
		fmt.Fprintf(stdout, "%s: checkpoint format %d, %d bytes, checksum ok\n", in.File, in.Format, in.Bytes)
		fmt.Fprintf(stdout, "source %s  partition %d  position %d  created %s\n", in.Source, in.Partition, in.Position, in.Created)
		if in.Origin != "" {
			fmt.Fprintf(stdout, "of %s\n", in.Origin)
		}
		fmt.Fprintf(stdout, "configuration fingerprint %s\n", in.Fingerprint[:16])
		if err := writeTextReport(stdout, in.Report); err != nil {
			return err
		}
	}
	return nil
}
