package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"time"

	"google.golang.org/grpc"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/keepalive"
	"google.golang.org/grpc/reflection"

	"github.com/classifierd/classifierd/embed"
	pb "github.com/classifierd/classifierd/gen/classifier/v1"
	terminalpb "github.com/classifierd/classifierd/gen/terminal/v1"
	"github.com/classifierd/classifierd/index"
	"github.com/classifierd/classifierd/internal/learning"
	"github.com/classifierd/classifierd/internal/listeners"
	"github.com/classifierd/classifierd/internal/memlimit"
	"github.com/classifierd/classifierd/internal/ops"
	"github.com/classifierd/classifierd/internal/reload"
	"github.com/classifierd/classifierd/internal/security"
	"github.com/classifierd/classifierd/internal/state"
	"github.com/classifierd/classifierd/internal/telemetry"
	"github.com/classifierd/classifierd/models"
	"github.com/classifierd/classifierd/route"
	"github.com/classifierd/classifierd/server"
	"github.com/classifierd/classifierd/session"
	"github.com/classifierd/classifierd/terminal"
	"github.com/classifierd/classifierd/tokens"
)

func splitList(s string) []string {
	var out []string
	for _, x := range strings.Split(s, ",") {
		if x = strings.TrimSpace(x); x != "" {
			out = append(out, x)
		}
	}
	return out
}

// run loads the model and index, serves until ctx ends, then shuts down
// gracefully within cfg.ShutdownWait.
func run(ctx context.Context, cfg Config, log *slog.Logger) (err error) {
	limit, from := memlimit.Apply(cfg.Ops.MemoryLimit)
	log.Info("memory limit", "bytes", limit, "from", from)
	man, err := models.Resolve(cfg.Model, cfg.Manifest)
	if err != nil {
		return err
	}
	op, err := ops.Open(cfg.Ops, log)
	if err != nil {
		return err
	}
	httpTLS, mcpTLS := op.ListenerTLS(cfg.Ops.PlainHTTP), op.ListenerTLS(cfg.Ops.PlainMCP)
	op.LogTLS(log, cfg.MCPStdio, cfg.HTTPListen, cfg.MCPListen, httpTLS, mcpTLS)
	if cfg.MCPListen != "" && cfg.offersCallTool() {
		if open, _ := security.OpenListen(cfg.MCPListen, cfg.Ops.Config); open { // Validate refused it without --insecure-mcp-listen
			security.WarnOpenListen(log, cfg.MCPListen, "--insecure-mcp-listen")
		}
	}
	tracer, err := telemetry.Open(ctx, cfg.OTel, version, log)
	if err != nil {
		return err
	}
	defer func() {
		// Last: every span has ended. A collector that is down is no
		// reason to fail the exit.
		if err := tracer.Shutdown(min(cfg.ShutdownWait, telemetry.FlushWait)); err != nil {
			log.Warn("tracing: spans lost at exit", "err", err)
		}
	}()
	var idx *index.Index
	if cfg.Index != "" {
		// Fail fast on a bad index before loading the runtime and model.
		loadStart := time.Now()
		if idx, err = index.LoadWith(cfg.Index, cfg.Ops.IndexLoad()); err != nil {
			return fmt.Errorf("load index %s: %w", cfg.Index, err)
		}
		log.Info("index loaded", "path", cfg.Index, "vectors", idx.NumVectors(), "mapped", idx.Mapped(),
			"took", time.Since(loadStart).Round(time.Millisecond))
	}
	rt, err := embed.InitRuntime(cfg.ORTLib)
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, rt.Close()) }()
	eng, err := embed.Open(rt, embed.Config{ModelDir: cfg.Model, Manifest: man,
		IntraOpThreads: cfg.Threads, MaxConcurrent: cfg.Concurrency, MaxBatch: max(cfg.MaxBatch, 1024),
		ChunkSize: cfg.BatchSize, MaxQueue: cfg.MaxQueue, BatchWindow: cfg.BatchWindow, MaxQueueWait: cfg.MaxQueueWait})
	if err != nil {
		return fmt.Errorf("load model %s: %w", cfg.Model, err)
	}
	defer func() { err = errors.Join(err, eng.Close()) }()
	rl, err := reload.New(reload.Options{Index: cfg.Index, Model: cfg.Model, Reload: cfg.Reload, Load: cfg.Ops.IndexLoad(), Domain: cfg.domain(),
		ServesIdentified: cfg.Ops.Identifies() && cfg.MCPServers == "" && (cfg.MCPStdio || cfg.MCPListen != "")}, eng, log)
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, rl.Close()) }()
	idx, source, err := rl.Initial(ctx, idx)
	if err != nil {
		return err
	}
	emb := server.CachedEmbedder(op.Embedder(eng))
	indexPath := cfg.Index
	if cfg.Reload.MCPConfig != "" {
		indexPath = "" // built from live tools: no file
	}
	op.IndexLoaded(idx, indexPath, 1)
	rl.Use(emb, op)
	domStart := time.Now()
	dcfg := cfg.domain()
	var catIDs []string
	for _, li := range idx.LabelsOf(index.KindCategory) {
		catIDs = append(catIDs, idx.Labels[li].ID)
	}
	st, err := state.Open(ctx, cfg.State, session.Config{TTL: cfg.SessionTTL, MaxSessions: cfg.MaxSessions, MaxPerOwner: op.SessionOwnerLimit(),
		DefaultExposure: session.Exposure(cfg.Exposure), AllCategories: catIDs, MinimalCategories: splitList(cfg.Minimal),
		Displaced: op.Metrics.SessionDisplaced}, log)
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, st.Close()) }() // after the stores
	learner, err := learning.Open(ctx, cfg.Learn, st.Redis(), log)
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, learner.Close()) }()
	rl.Learn(learner)
	dcfg.Learned = learner.View(idx)
	dom, err := server.NewDomainConfig(idx, emb, dcfg)
	if err != nil {
		return err
	}
	reload.LogShortlist(log, dom, domStart)
	policy := map[string]route.NoMatch{"none": route.NoMatchNone, "meta": route.NoMatchMeta, "all": route.NoMatchAll}[cfg.NoMatch]
	sessions := st.Sessions
	defer func() { err = errors.Join(err, sessions.Close()) }()
	if err := op.WatchSessions(sessions); err != nil {
		return err
	}
	counter, err := tokens.NewCounter()
	if err != nil {
		return err
	}
	watches, err := op.Watches()
	if err != nil {
		return err
	}
	svc, err := server.New(server.Config{MaxEmbedBatch: cfg.MaxBatch, DefaultNoMatch: policy, MaxTokens: man.MaxTokens,
		Sessions: sessions, Tokens: counter, Source: source, Sources: rl.Sources, Watches: watches, Learner: learner}, dom, emb, log)
	if err != nil {
		return err
	}
	if err := svc.RegisterLearningMetrics(op.Registry); err != nil {
		return err
	}
	var term *server.TerminalServer
	var store state.TerminalStore
	if cfg.Terminal {
		term, store, err = openTerminal(ctx, cfg, emb, st, log)
		if err != nil {
			return err
		}
		defer func() { err = errors.Join(err, store.Close()) }()
	}
	janitorCtx, stopJanitor := context.WithCancel(ctx)
	defer stopJanitor()
	go sessions.Run(janitorCtx)
	if learner != nil {
		synced := make(chan struct{})
		go func() {
			defer close(synced)
			learner.Sync(janitorCtx, time.Second, func(err error) { log.Warn("learning store sync failed", "err", err) })
		}()
		defer func() { stopJanitor(); <-synced }()
	}
	if store != nil {
		// Retention by age for an idle store; the store is closed only
		// after the sweep has returned.
		swept := make(chan struct{})
		go func() {
			defer close(swept)
			store.Run(janitorCtx, time.Minute, func(err error) { log.Warn("terminal retention sweep failed", "err", err) })
		}()
		defer func() { stopJanitor(); <-swept }()
	}

	edge := mcpEdge{sec: op.Security, metrics: op.Metrics, tracer: tracer, tls: mcpTLS, admission: op.Admission, conns: op.Conns, resets: op.Recv.Peers()}
	if cfg.MCPStdio {
		return serveMCPStdio(ctx, cfg, edge, svc, term, idx, rl.Caller(), log)
	}
	lis, err := listeners.Listen(cfg.Listen)
	if err != nil {
		return fmt.Errorf("listen: %w", err)
	}
	lis = op.Recv.Listener(op.Conns.Wrap("grpc", listeners.WithUserTimeout(lis, listeners.GRPCUserTimeout)))
	gs := grpc.NewServer(append(append(op.ServerOptions(log, svc.Stats(), cfg.Timeout), tracer.ServerOptions()...),
		grpc.MaxRecvMsgSize(cfg.MaxRecvBytes),
		grpc.KeepaliveEnforcementPolicy(keepalive.EnforcementPolicy{MinTime: 10 * time.Second, PermitWithoutStream: true}),
		// A connection with no call in flight for --idle-timeout gets a
		// GOAWAY and is closed (its client reconnects when it next
		// calls): idle connections cannot pile up, each holding its
		// buffers and a file descriptor. Pings do not count as use.
		grpc.KeepaliveParams(keepalive.ServerParameters{MaxConnectionIdle: cfg.Ops.IdleTimeout}),
	)...)
	hs := server.NewHealth()
	register(gs, hs, svc, term)
	var hsrv *listeners.HTTP
	if cfg.HTTPListen != "" {
		if hsrv, err = listeners.NewHTTP(listeners.HTTPConfig{Addr: cfg.HTTPListen, MaxRecvBytes: cfg.MaxRecvBytes, Timeout: cfg.Timeout, IdleTimeout: cfg.Ops.IdleTimeout, TLS: httpTLS, Conns: op.Conns, Resets: op.Recv.Peers()}, gs, op.HTTPGuard(int64(cfg.MaxRecvBytes), gs.GetServiceInfo()), log); err != nil {
			_ = lis.Close()
			return err
		}
	}
	opsCtx, stopOps := context.WithCancel(context.Background())
	waitMetrics, err := op.ServeMetrics(opsCtx)
	if err != nil {
		stopOps()
		_ = lis.Close()
		return err
	}
	waitReloads := security.ReloadOnHUP(opsCtx, log, op.Reloaders)
	defer func() { stopOps(); waitReloads(); waitMetrics() }()

	log.Info("classifierd serving", "addr", lis.Addr().String(), "model", man.Name, "dims", eng.Dims(),
		"ort", rt.Version(), "categories", len(idx.LabelsOf(index.KindCategory)),
		"servers", len(idx.LabelsOf(index.KindServer)), "tools", len(idx.LabelsOf(index.KindTool)),
		"calibrated", dom.Calibration.Fitted, "terminal", cfg.Terminal, "state", state.Redact(cfg.State))

	reloaded := make(chan struct{})
	go func() { defer close(reloaded); rl.Run(janitorCtx, svc, hs.Server) }()
	defer func() { stopJanitor(); <-reloaded }()
	stopMCP, err := startMCPHTTP(cfg, edge, svc, term, idx, rl.Caller(), log)
	if err != nil {
		_ = lis.Close()
		return err
	}
	defer stopMCP()
	serveErr := make(chan error, 2)
	go func() { serveErr <- gs.Serve(lis) }()
	if hsrv != nil {
		log.Info("classifierd serving HTTP/JSON and the explain page", "addr", hsrv.Addr(), "url", hsrv.URL(), "tls", httpTLS != nil)
		go func() {
			if err := hsrv.Serve(); err != nil {
				serveErr <- err
			}
		}()
	}
	select {
	case err := <-serveErr:
		return fmt.Errorf("serve: %w", err)
	case <-ctx.Done():
	}
	log.Info("shutting down", "wait", cfg.ShutdownWait)
	deadline := time.Now().Add(cfg.ShutdownWait) // one budget for HTTP and gRPC
	hs.Shutdown()                                // NOT_SERVING for every service, so balancers drain us; ends health watches
	// End WatchExposure streams (their channels close), or GracefulStop
	// would wait for them until the deadline.
	_ = sessions.Close()
	if hsrv != nil {
		// Before gs: HTTP calls run on gs, and would be cut by its stop.
		hsrv.Shutdown(time.Until(deadline))
	}
	stopped := make(chan struct{})
	go func() { gs.GracefulStop(); close(stopped) }()
	select {
	case <-stopped:
	case <-time.After(time.Until(deadline)):
		log.Warn("graceful stop timed out; closing connections")
		gs.Stop()
		<-stopped
	}
	qs := eng.QueueStats()
	log.Info("stopped", "model_runs", qs.Runs, "texts_embedded", qs.Items, "calls_refused_queue_full", qs.Rejected)
	return nil
}

// openTerminal opens what TerminalService needs (the log directory, the
// store: SQLite, or Redis with --state; the prompt detector); the caller
// closes the store.
func openTerminal(ctx context.Context, cfg Config, eng terminal.Embedder, st state.State, log *slog.Logger) (_ *server.TerminalServer, _ state.TerminalStore, err error) {
	// 0700: the logs are whole terminal sessions, named by session id.
	if err := os.MkdirAll(cfg.TermLogs, 0o700); err != nil {
		return nil, nil, fmt.Errorf("terminal logs: %w", err)
	}
	store, err := state.OpenTerminalStore(cfg.TermDB, cfg.TermStore, st)
	if err != nil {
		return nil, nil, err
	}
	det, err := terminal.NewDetector(ctx, eng)
	if err != nil {
		return nil, nil, errors.Join(err, store.Close())
	}
	term, err := server.NewTerminalServer(det, cfg.TermLogs, store, log)
	if err != nil {
		return nil, nil, errors.Join(err, store.Close())
	}
	return term, store, nil
}

// register puts the services on gs and marks them SERVING. TerminalService
// is registered only when term is set (--terminal): an unregistered service
// answers UNIMPLEMENTED, which is what a client of a daemon without it
// should see.
func register(gs *grpc.Server, hs *server.Health, svc *server.Server, term *server.TerminalServer) {
	pb.RegisterClassifierServiceServer(gs, svc)
	if term != nil {
		terminalpb.RegisterTerminalServiceServer(gs, term)
	}
	healthpb.RegisterHealthServer(gs, hs)
	reflection.Register(gs)
	hs.SetServingStatus("", healthpb.HealthCheckResponse_SERVING)
	hs.SetServingStatus(pb.ClassifierService_ServiceDesc.ServiceName, healthpb.HealthCheckResponse_SERVING)
	if term != nil {
		hs.SetServingStatus(terminalpb.TerminalService_ServiceDesc.ServiceName, healthpb.HealthCheckResponse_SERVING)
	}
}
