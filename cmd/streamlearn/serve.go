package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/streamlearn/streamlearn/internal/api"
	"github.com/streamlearn/streamlearn/internal/checkpoint"
	"github.com/streamlearn/streamlearn/internal/config"
	"github.com/streamlearn/streamlearn/internal/serving"
)

const serveArgs = "(--model MODEL [-c config.yaml] | -c config.yaml [--checkpoint-dir DIR] [--poll D]) [--http ADDR] [--http-token-file FILE] [--log-level LEVEL]"

// runServe answers predictions, reports and metrics from models it does
// not learn — a model file, or the checkpoints the learning service
// saves, read again as they change — until stopped. It consumes nothing:
// replicas behind a load balancer serve beside the one run that learns.
// A model file carries its configuration's model sections, so --model
// needs no -c; one given must be of the same model (serveModel).
func runServe(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("serve", serveArgs, stderr)
	cfgPath := fs.String("c", "", "config `file` of the models served (required but with --model, whose file carries its own)")
	model := fs.String("model", "", "serve the model `file` written by export or replay --save, as partition 0, with the configuration it carries")
	ckptDir := fs.String("checkpoint-dir", "", "serve the checkpoints in `dir`, every partition's, and follow them (default: the config's checkpoint.dir or checkpoint.bucket)")
	poll := fs.Duration("poll", serving.DefaultPoll, "how often the checkpoints are read for newer ones (`duration`)")
	httpAddr := fs.String("http", "", "serve /v1/predict, /v1/report, /metrics, the probes and the dashboard on `addr` (default: the config's http.addr, else 127.0.0.1:8080)")
	tokenFile := fs.String("http-token-file", "", "require \"Authorization: Bearer <token>\" on the HTTP API, the token in `file` (default: $"+tokenEnv+", else the config's http.token_file)")
	logLevel := fs.String("log-level", "warn", "log `level`: debug, info (also each model loaded), warn or error")
	if err := parse(fs, args); err != nil {
		return err
	}
	if (*cfgPath == "" && *model == "") || fs.NArg() > 0 {
		return usageErr(fs, "want --model MODEL or -c config.yaml, and no arguments")
	}
	if *poll <= 0 {
		return usageErr(fs, "--poll %v: want a positive duration", *poll)
	}
	var level slog.Level
	if err := level.UnmarshalText([]byte(*logLevel)); err != nil {
		return usageErr(fs, "--log-level %q: want debug, info, warn or error", *logLevel)
	}
	logger := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: level}))
	if *model != "" && *ckptDir != "" {
		return usageErr(fs, "--model and --checkpoint-dir: choose one")
	}
	var (
		cfg *config.Config
		err error
	)
	if *cfgPath != "" {
		if cfg, err = loadConfig(ctx, *cfgPath); err != nil {
			return err
		}
	}
	opt := serving.ServeOptions{Poll: *poll, Logger: logger}
	if *model != "" {
		if opt.Model, cfg, err = serveModel(*model, cfg, *cfgPath); err != nil {
			return err
		}
	} else if dir := cmp.Or(*ckptDir, cfg.Checkpoint.Dir); dir != "" {
		if opt.WarmStart, err = keyedWarmStart(cfg); err != nil {
			return err
		}
		// Read only: a replica never writes, and a mistyped directory is
		// an error rather than an empty store created.
		st, err := checkpoint.OpenDirReadOnly(dir)
		if err != nil {
			return err
		}
		opt.Checkpoints = st
	} else {
		if opt.WarmStart, err = keyedWarmStart(cfg); err != nil {
			return err
		}
		st, closeStore, err := openCheckpoints(ctx, "", cfg)
		if err != nil {
			return err
		}
		defer closeStore()
		if st == nil {
			return usageErr(fs, "nothing to serve: give --model, --checkpoint-dir, or a config with checkpoint.dir or checkpoint.bucket")
		}
		opt.Checkpoints = st
	}
	opt.Config = cfg
	srv, err := serving.NewReplica(ctx, opt)
	if err != nil {
		return err
	}
	if n := len(srv.Snapshot().Reports); n == 0 {
		fmt.Fprintf(stderr, "streamlearn: no checkpoint yet in %s: predictions answer 503 until the learning service saves one\n", opt.Checkpoints)
	}
	addr := cmp.Or(*httpAddr, cfg.HTTP.Addr, "127.0.0.1:8080")
	if addr == "off" {
		return usageErr(fs, "--http off: serve has nothing to do without its HTTP API")
	}
	h, err := startHTTP(addr, *tokenFile, cfg, api.Options{Snapshot: srv.Snapshot, Predictor: srv.Predictor}, stderr, logger)
	if err != nil {
		return err
	}
	runErr := srv.Run(ctx)
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	return errors.Join(runErr, h.Shutdown(sctx))
}

// keyedWarmStart returns, with models per key, the warm start new keys'
// models start from (models.warm_start), which a replica answers new keys
// with as the learning service does; nil otherwise.
func keyedWarmStart(cfg *config.Config) (*serving.WarmStart, error) {
	if cfg.Models.By != "key" {
		return nil, nil
	}
	return loadWarmStart(cfg.Models.WarmStart, cfg)
}

// serveModel reads the model file at path and returns it with the
// configuration it is served with: cfg, read from cfgPath, when given,
// which must then be of the file's model (the same input, features,
// learners and labels; its answer and its other sections, the HTTP
// API's above all, are its own); else the one the file carries. A file without one (of
// format version 1, or exported without -c) needs cfg.
func serveModel(path string, cfg *config.Config, cfgPath string) (*serving.WarmStart, *config.Config, error) {
	w, err := serving.LoadWarmStart(path)
	if err != nil {
		return nil, nil, err
	}
	own, err := w.Config()
	if err != nil {
		return nil, nil, err
	}
	switch {
	case cfg != nil:
		if err := w.Check(cfg); err != nil {
			return nil, nil, fmt.Errorf("serve: -c %s: %w", cfgPath, err)
		}
		return w, cfg, nil
	case own == nil:
		return nil, nil, fmt.Errorf("serve: the model %s carries no configuration (a model file of format version %d, or a checkpoint exported without -c): give -c, the configuration that wrote it", path, w.Model.Format)
	}
	if err := w.Check(own); err != nil {
		return nil, nil, fmt.Errorf("serve: %w", err)
	}
	return w, own, nil
}
