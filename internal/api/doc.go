// Package api is streamlearn's read-only HTTP interface: a live dashboard,
// Prometheus metrics, health and readiness probes, the regret report, the
// learners' curves and the configured learners.
//
//	GET /              the dashboard: per model and learner, the report's numbers, a badge
//	                   saying whether the bound holds, and mistakes and regret against their
//	                   bounds over rounds, and how soon predictions go out; it polls
//	                   /v1/report, /v1/history and /v1/latency every second
//	GET /dashboard/... its script, style sheet and icon (embedded: the page works offline)
//	GET /metrics       Prometheus text exposition of Options.Gatherer
//	GET /healthz       200 "ok" while the process serves HTTP
//	GET /readyz        200 "ok" once the service has started consuming, else 503 and a one-line reason
//	GET /v1/report     JSON array of every model's report (serving.Report), ordered by partition;
//	                   ?partition=N: that model's report alone, 404 if there is none
//	GET /v1/learners   JSON array of {"name", "algorithm"} in configuration order
//	GET /v1/history    JSON array of every model's sampled curves (History), ordered by
//	                   partition; ?partition=N as for /v1/report
//	GET /v1/latency    JSON array of every partition's histogram of prediction latencies
//	                   (Latency: LatencyMetric of Options.Gatherer), ordered by partition;
//	                   ?partition=N: that partition's alone (an empty array when none)
//
// A /v1/history object, with columns of equal length per learner (element
// k of each is the k-th sample; at most service.Options.HistoryPoints
// samples plus the current round, so the last element is the report's):
//
//	{"source": "jetstream:EVENTS/streamlearn", "partition": 0,
//	 "learners": [{"name": "pct", "algorithm": "perceptron",
//	   "round": [1, 2, ...], "mistakes": [1, 1, ...], "loss": [1, 1, ...], "regret": [0, 0, ...],
//	   "mistake_bound": [3.2, 6.1, ...], "regret_bound": [0, 0, ...]}]}
//
// The dashboard's responses carry ContentSecurityPolicy (the page runs
// only its own script: no inline code, nothing from other hosts), nosniff
// and X-Frame-Options: DENY; the page inserts names as text, never as
// markup. /v1/history and the dashboard's files carry an ETag, so polling
// an idle service costs a 304.
//
// # Authentication
//
// The listener defaults to loopback. With Options.Token (config
// http.token_file, STREAMLEARN_HTTP_TOKEN or `run --http-token-file`),
// every request needs "Authorization: Bearer <token>", compared in
// constant time, and gets 401 with a WWW-Authenticate: Bearer challenge
// and a one-line reason otherwise — except /healthz and /readyz
// (Kubernetes probes cannot send a token; they tell only up and started)
// and the dashboard's constant files (/, /dashboard/*: a browser's page
// load cannot send a header). Open the dashboard as /#token=TOKEN: the
// fragment never reaches a server, proxy or log; the page keeps the token
// for the tab's session, drops it from the address bar and sends it as a
// header with its requests for data. Prometheus scrapes with
// `authorization: {credentials_file: FILE}` in its scrape config. The
// token only authenticates: serve plain HTTP on loopback, or behind a
// TLS-terminating proxy, or the token travels in clear.
//
// Every request body is capped at MaxPredictBody; the server's timeouts
// (NewServer) disconnect clients that send their headers or body too
// slowly.
//
// Other methods get 405 with an Allow header, other paths 404; under
// /v1/ both are ErrorBodies, of code method_not_allowed and not_found. Every
// handler reads the latest serving.Snapshot, an immutable copy the service
// loop publishes; the metrics collector (package metrics) reads the same
// snapshots, so /metrics and /v1/report give the same numbers for the
// same snapshot. A /v1/report object is what the reports sink publishes:
// the JSON encoding of serving.Report.
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
//	srv := api.NewServer(cfg.HTTP.Addr, api.New(api.Options{Snapshot: svc.Snapshot, Gatherer: reg, Config: cfg, Token: token}))
//	go srv.ListenAndServe() // report an error other than http.ErrServerClosed
//	runErr := svc.Run(ctx)
//	srv.Shutdown(shutdownCtx)
package api
