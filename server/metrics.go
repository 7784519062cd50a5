package server

import (
	"context"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	pb "github.com/classifierd/classifierd/gen/classifier/v1"
	"github.com/classifierd/classifierd/index"
	"github.com/classifierd/classifierd/rank"
)

// Metrics are classifierd's Prometheus series (docs/operations.md lists
// them). They are registered on the registry given to NewMetrics, never a
// global one.
type Metrics struct {
	rpcs          *prometheus.CounterVec
	rpcSeconds    *prometheus.HistogramVec
	embedSeconds  prometheus.Histogram
	embedBatch    prometheus.Histogram
	embedErrors   prometheus.Counter
	rejected      *prometheus.CounterVec
	admitWait     prometheus.Histogram
	admitted      prometheus.Histogram
	authDenied    *prometheus.CounterVec
	indexLabels   *prometheus.GaugeVec
	indexVectors  prometheus.Gauge
	indexBytes    prometheus.Gauge
	indexGen      prometheus.Gauge
	answers       *prometheus.CounterVec
	abstained     *prometheus.CounterVec
	topConfidence *prometheus.HistogramVec
	mcpRefused    *prometheus.CounterVec
	displaced     prometheus.Counter
	mcpDisplaced  prometheus.Counter
	reg           prometheus.Registerer
}

// NewMetrics creates the series and registers them on reg.
func NewMetrics(reg prometheus.Registerer) (*Metrics, error) {
	m := &Metrics{
		reg: reg,
		rpcs: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "classifierd_rpc_requests_total",
			Help: "gRPC calls handled, by full method and status code."}, []string{"method", "code"}),
		rpcSeconds: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "classifierd_rpc_duration_seconds",
			Help:    "Time to answer a gRPC call (streams: their whole life), by full method.",
			Buckets: []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10}}, []string{"method"}),
		embedSeconds: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "classifierd_embed_duration_seconds",
			Help:    "Time of one embedding call into the model (all its texts).",
			Buckets: []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5}}),
		embedBatch: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "classifierd_embed_batch_texts",
			Help: "Texts in one embedding call.", Buckets: prometheus.ExponentialBuckets(1, 2, 11)}),
		embedErrors: prometheus.NewCounter(prometheus.CounterOpts{Name: "classifierd_embed_errors_total",
			Help: "Embedding calls that failed (including cancelled ones)."}),
		rejected: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "classifierd_admission_rejected_total",
			Help: "Calls refused with RESOURCE_EXHAUSTED because the admission queue was full, by method."}, []string{"method"}),
		admitWait: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "classifierd_admission_wait_seconds",
			Help: "Time an admitted model call waited for a place.", Buckets: admissionBuckets}),
		admitted: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "classifierd_admitted_call_seconds",
			Help: "Time of an admitted model call from its arrival at admission to its answer (waiting and running): the server-side latency of the calls not refused.", Buckets: admissionBuckets}),
		authDenied: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "classifierd_auth_denied_total",
			Help: "Calls refused by authentication or authorisation, by method and code."}, []string{"method", "code"}),
		indexLabels: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "classifierd_index_labels",
			Help: "Labels of the index in use, by kind."}, []string{"kind"}),
		indexVectors: prometheus.NewGauge(prometheus.GaugeOpts{Name: "classifierd_index_vectors", Help: "Vectors of the index in use."}),
		indexBytes:   prometheus.NewGauge(prometheus.GaugeOpts{Name: "classifierd_index_file_bytes", Help: "Size of the index file in use."}),
		indexGen: prometheus.NewGauge(prometheus.GaugeOpts{Name: "classifierd_index_generation",
			Help: "Generation of the index in use: 1 at start, one more per reload."}),
		answers: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "classifierd_answers_total",
			Help: "Successful Classify/Route/AnalyzePrompt answers, by method."}, []string{"method"}),
		abstained: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "classifierd_abstained_total",
			Help: "Answers that abstained (nothing above threshold), by method; divide by classifierd_answers_total for the abstain rate."}, []string{"method"}),
		topConfidence: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "classifierd_top_confidence",
			Help:    "Confidence of the best label of each answer, by method: a shift of this distribution is input drift.",
			Buckets: prometheus.LinearBuckets(0.05, 0.05, 20)}, []string{"method"}),
		mcpRefused: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "classifierd_mcp_sessions_refused_total",
			Help: "MCP sessions --mcp-listen refused with RESOURCE_EXHAUSTED, by the limit reached: per_client (--max-sessions-per-client) or total (--max-sessions)."}, []string{"limit"}),
		displaced: prometheus.NewCounter(prometheus.CounterOpts{Name: "classifierd_sessions_displaced_total",
			Help: "Hub sessions closed at --max-sessions to make room for a caller holding fewer than the busiest caller (its least recently used)."}),
		mcpDisplaced: prometheus.NewCounter(prometheus.CounterOpts{Name: "classifierd_mcp_sessions_displaced_total",
			Help: "MCP sessions on --mcp-listen closed at --max-sessions to make room for a caller holding fewer than the busiest caller (its least recently used)."}),
	}
	for _, c := range []prometheus.Collector{m.rpcs, m.rpcSeconds, m.embedSeconds, m.embedBatch, m.embedErrors, m.rejected, m.admitWait, m.admitted,
		m.authDenied, m.indexLabels, m.indexVectors, m.indexBytes, m.indexGen, m.answers, m.abstained, m.topConfidence, m.mcpRefused, m.displaced, m.mcpDisplaced} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return m, nil
}

// admissionBuckets resolve the tens of milliseconds a latency target
// of admitted calls is set in.
var admissionBuckets = []float64{.001, .0025, .005, .01, .015, .02, .025, .03, .04, .05, .075, .1, .25, .5, 1, 2.5, 5}

// Gauge registers a gauge whose value f reads at scrape time (queue depth,
// sessions).
func (m *Metrics) Gauge(name, help string, f func() float64) error {
	return m.reg.Register(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: name, Help: help}, f))
}

// SessionDisplaced counts a hub session closed to make room for a
// quieter caller (session.Config.Displaced).
func (m *Metrics) SessionDisplaced() { m.displaced.Inc() }

// MCPSessionDisplaced counts an MCP session closed to make room for a
// quieter caller (mcpplaces.New).
func (m *Metrics) MCPSessionDisplaced() { m.mcpDisplaced.Inc() }

// MCPSessionRefused counts an MCP session refused at limit (per_client
// or total).
func (m *Metrics) MCPSessionRefused(limit string) { m.mcpRefused.WithLabelValues(limit).Inc() }

// SetIndex records the index in use: call it at start and after each
// reload with the generation it got.
func (m *Metrics) SetIndex(idx *index.Index, fileBytes int64, generation uint64) {
	for _, k := range []struct {
		name string
		kind index.Kind
	}{{"category", index.KindCategory}, {"server", index.KindServer}, {"tool", index.KindTool}} {
		m.indexLabels.WithLabelValues(k.name).Set(float64(len(idx.LabelsOf(k.kind))))
	}
	m.indexVectors.Set(float64(idx.NumVectors()))
	m.indexBytes.Set(float64(fileBytes))
	m.indexGen.Set(float64(generation))
}

// Embedder wraps e so each call is timed and its batch size counted.
func (m *Metrics) Embedder(e Embedder) Embedder { return &measuredEmbedder{e: e, m: m} }

type measuredEmbedder struct {
	e Embedder
	m *Metrics
}

// EmbedSpans measures a span embedding as one model call (one text), and
// is the wrapped embedder's when it has one (rank.SpanEmbedder); without
// it every span comes back nil and is embedded alone.
func (me *measuredEmbedder) EmbedSpans(ctx context.Context, text string, spans [][2]int) ([]float32, [][]float32, error) {
	se, ok := me.e.(rank.SpanEmbedder)
	if !ok {
		v, err := me.Embed(ctx, []string{text})
		if err != nil {
			return nil, nil, err
		}
		return v[0], make([][]float32, len(spans)), nil
	}
	start := time.Now()
	v, parts, err := se.EmbedSpans(ctx, text, spans)
	me.m.embedSeconds.Observe(time.Since(start).Seconds())
	me.m.embedBatch.Observe(1)
	if err != nil {
		me.m.embedErrors.Inc()
	}
	return v, parts, err
}

func (me *measuredEmbedder) Embed(ctx context.Context, texts []string) ([][]float32, error) {
	start := time.Now()
	out, err := me.e.Embed(ctx, texts)
	me.m.embedSeconds.Observe(time.Since(start).Seconds())
	me.m.embedBatch.Observe(float64(len(texts)))
	if err != nil {
		me.m.embedErrors.Inc()
	}
	return out, err
}

func (m *Metrics) observe(method string, start time.Time, err error) {
	m.rpcs.WithLabelValues(method, status.Code(err).String()).Inc()
	m.rpcSeconds.WithLabelValues(method).Observe(time.Since(start).Seconds())
}

// observeAnswer records abstention and the top confidence of an answer.
func (m *Metrics) observeAnswer(method string, resp any) {
	var top float32
	var abstained bool
	switch r := resp.(type) {
	case *pb.ClassifyResponse:
		if len(r.GetCategories()) > 0 {
			top = r.GetCategories()[0].GetConfidence()
		}
		abstained = r.GetAbstained()
	case *pb.RouteResponse:
		if len(r.GetServers()) > 0 {
			top = r.GetServers()[0].GetConfidence()
		}
		abstained = r.GetAbstained()
	case *pb.AnalyzePromptResponse:
		top, abstained = r.GetConfidence(), len(r.GetCategories()) == 0
	default:
		return
	}
	m.answers.WithLabelValues(method).Inc()
	if abstained {
		m.abstained.WithLabelValues(method).Inc()
	}
	m.topConfidence.WithLabelValues(method).Observe(float64(top))
}

func (m *Metrics) interceptors() (grpc.UnaryServerInterceptor, grpc.StreamServerInterceptor) {
	unary := func(ctx context.Context, req any, info *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
		start := time.Now()
		resp, err := h(ctx, req)
		m.observe(info.FullMethod, start, err)
		if err == nil {
			m.observeAnswer(shortMethod(info.FullMethod), resp)
		}
		return resp, err
	}
	stream := func(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, h grpc.StreamHandler) error {
		start := time.Now()
		err := h(srv, ss)
		m.observe(info.FullMethod, start, err)
		return err
	}
	return unary, stream
}

// Denied counts a call refused by authentication or authorisation
// (classifierd_auth_denied_total); the gRPC edge counts its own, and the
// HTTP listeners, which refuse callers before a call exists, theirs.
func (m *Metrics) Denied(method string, code codes.Code) { m.denied(method, code) }

func (m *Metrics) denied(method string, code codes.Code) {
	m.authDenied.WithLabelValues(method, code.String()).Inc()
}
