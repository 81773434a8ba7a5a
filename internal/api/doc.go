// Package api is streamlearn's read-only HTTP interface: Prometheus
// metrics, health and readiness probes, the regret report and the
// configured learners.
//
//	GET /metrics       Prometheus text exposition of Options.Gatherer
//	GET /healthz       200 "ok" while the process serves HTTP
//	GET /readyz        200 "ok" once the service has started consuming, else 503 and a one-line reason
//	GET /v1/report     JSON array of every model's report (service.Report), ordered by partition;
//	                   ?partition=N: that model's report alone, 404 if there is none
//	GET /v1/learners   JSON array of {"name", "algorithm"} in configuration order
//
// Other methods get 405 with an Allow header, other paths 404. Every
// handler reads the latest service.Snapshot, an immutable copy the service
// loop publishes; the metrics collector (package metrics) reads the same
// snapshots, so /metrics and /v1/report give the same numbers for the
// same snapshot. A /v1/report object is what the reports sink publishes:
// the JSON encoding of service.Report.
//
// Wiring (cmd/streamlearn run): create the histogram before the service,
// the registry and handler after it, serve on cfg.HTTP.Addr, and shut the
// server down after Run returns:
//
//	hist := metrics.NewEventDuration()
//	opt.EventDuration = hist
//	svc, err := service.New(opt)
//	reg := prometheus.NewRegistry()
//	reg.MustRegister(metrics.NewCollector(svc.Snapshot), hist,
//		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
//	srv := api.NewServer(cfg.HTTP.Addr, api.New(api.Options{Snapshot: svc.Snapshot, Gatherer: reg, Config: cfg}))
//	go srv.ListenAndServe() // report an error other than http.ErrServerClosed
//	runErr := svc.Run(ctx)
//	srv.Shutdown(shutdownCtx)
package api
