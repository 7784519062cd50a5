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
	"github.com/classifierd/classifierd/models"
	"github.com/classifierd/classifierd/request"
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
	man, err := models.Resolve(cfg.Model, cfg.Manifest)
	if err != nil {
		return err
	}
	op, err := openOps(cfg.Ops, log)
	if err != nil {
		return err
	}
	idx, err := index.LoadLimit(cfg.Index, cfg.Ops.MaxIndexBytes)
	if err != nil {
		return fmt.Errorf("load index %s: %w", cfg.Index, err)
	}
	rt, err := embed.InitRuntime(cfg.ORTLib)
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, rt.Close()) }()
	eng, err := embed.Open(rt, embed.Config{ModelDir: cfg.Model, Manifest: man,
		IntraOpThreads: cfg.Threads, MaxConcurrent: cfg.Concurrency, MaxBatch: max(cfg.MaxBatch, 1024)})
	if err != nil {
		return fmt.Errorf("load model %s: %w", cfg.Model, err)
	}
	defer func() { err = errors.Join(err, eng.Close()) }()
	if err := idx.CheckModel(eng.Fingerprint(), eng.Dims()); err != nil {
		return fmt.Errorf("index %s does not match model %s: %w", cfg.Index, cfg.Model, err)
	}
	op.indexLoaded(idx, cfg.Index, 1)
	emb := op.embedder(eng)
	dom, err := server.NewDomain(idx, emb, request.Limits{MaxTextBytes: cfg.MaxTextBytes, MaxMessages: cfg.MaxMessages})
	if err != nil {
		return err
	}
	policy := map[string]route.NoMatch{"none": route.NoMatchNone, "meta": route.NoMatchMeta, "all": route.NoMatchAll}[cfg.NoMatch]
	var catIDs []string
	for _, li := range idx.LabelsOf(index.KindCategory) {
		catIDs = append(catIDs, idx.Labels[li].ID)
	}
	sessions, err := session.NewStore(session.Config{TTL: cfg.SessionTTL, MaxSessions: cfg.MaxSessions, MaxPerOwner: op.sessionOwnerLimit(),
		DefaultExposure: session.Exposure(cfg.Exposure), AllCategories: catIDs, MinimalCategories: splitList(cfg.Minimal)})
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, sessions.Close()) }()
	if err := op.watchSessions(sessions); err != nil {
		return err
	}
	counter, err := tokens.NewCounter()
	if err != nil {
		return err
	}
	svc, err := server.New(server.Config{MaxEmbedBatch: cfg.MaxBatch, DefaultNoMatch: policy, MaxTokens: man.MaxTokens,
		Sessions: sessions, Tokens: counter}, dom, emb, log)
	if err != nil {
		return err
	}
	var term *server.TerminalServer
	var store *terminal.Store
	if cfg.Terminal {
		term, store, err = openTerminal(ctx, cfg, emb, log)
		if err != nil {
			return err
		}
		defer func() { err = errors.Join(err, store.Close()) }()
	}
	janitorCtx, stopJanitor := context.WithCancel(ctx)
	defer stopJanitor()
	go sessions.Run(janitorCtx)
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

	lis, err := listen(cfg.Listen)
	if err != nil {
		return fmt.Errorf("listen: %w", err)
	}
	gs := grpc.NewServer(append(op.serverOptions(log, svc.Stats(), cfg.Timeout),
		grpc.MaxRecvMsgSize(cfg.MaxRecvBytes),
		grpc.KeepaliveEnforcementPolicy(keepalive.EnforcementPolicy{MinTime: 10 * time.Second, PermitWithoutStream: true}),
	)...)
	hs := server.NewHealth()
	register(gs, hs, svc, term)
	opsCtx, stopOps := context.WithCancel(context.Background())
	waitMetrics, err := op.serveMetrics(opsCtx)
	if err != nil {
		stopOps()
		return err
	}
	waitReloads := reloadOnHUP(opsCtx, log, op.reloaders)
	defer func() { stopOps(); waitReloads(); waitMetrics() }()

	log.Info("classifierd serving", "addr", lis.Addr().String(), "model", man.Name, "dims", eng.Dims(),
		"ort", rt.Version(), "categories", len(idx.LabelsOf(index.KindCategory)),
		"servers", len(idx.LabelsOf(index.KindServer)), "tools", len(idx.LabelsOf(index.KindTool)),
		"calibrated", dom.Calibration.Fitted, "terminal", cfg.Terminal)

	serveErr := make(chan error, 1)
	go func() { serveErr <- gs.Serve(lis) }()
	select {
	case err := <-serveErr:
		return fmt.Errorf("serve: %w", err)
	case <-ctx.Done():
	}
	log.Info("shutting down", "wait", cfg.ShutdownWait)
	hs.Shutdown() // NOT_SERVING for every service, so balancers drain us; ends health watches
	// End WatchExposure streams (their channels close), or GracefulStop
	// would wait for them until the deadline.
	_ = sessions.Close()
	stopped := make(chan struct{})
	go func() { gs.GracefulStop(); close(stopped) }()
	select {
	case <-stopped:
	case <-time.After(cfg.ShutdownWait):
		log.Warn("graceful stop timed out; closing connections")
		gs.Stop()
		<-stopped
	}
	log.Info("stopped")
	return nil
}

// openTerminal opens what TerminalService needs (the log directory, the
// SQLite store, the prompt detector); the caller closes the store.
func openTerminal(ctx context.Context, cfg Config, eng terminal.Embedder, log *slog.Logger) (_ *server.TerminalServer, _ *terminal.Store, err error) {
	if err := os.MkdirAll(cfg.TermLogs, 0o755); err != nil {
		return nil, nil, fmt.Errorf("terminal logs: %w", err)
	}
	store, err := terminal.OpenStore(cfg.TermDB, cfg.TermStore)
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
