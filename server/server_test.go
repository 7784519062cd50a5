package server

import (
	"context"
	"fmt"
	"hash/fnv"
	"io"
	"log/slog"
	"math"
	"path/filepath"
	"strings"
	"testing"
	"time"
	"unicode"
	"unicode/utf8"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/classifierd/classifierd/catalog"
	"github.com/classifierd/classifierd/embed/embederr"
	pb "github.com/classifierd/classifierd/gen/classifier/v1"
	terminalpb "github.com/classifierd/classifierd/gen/terminal/v1"
	"github.com/classifierd/classifierd/index"
	"github.com/classifierd/classifierd/internal/testgrpc"
	"github.com/classifierd/classifierd/labels"
	"github.com/classifierd/classifierd/request"
	"github.com/classifierd/classifierd/session"
	"github.com/classifierd/classifierd/terminal"
)

// These tests drive the gRPC boundary through bufconn with the generated
// clients. The model's numbers do not matter here, so a fake embedder
// stands in: what is tested is translation and error codes.

const fakeDims = 64

// bagOfWords is a deterministic fake Embedder: a hashed bag of lower-cased
// words, L2-normalised. Like a real tokenizer it has nothing to embed in a
// text without letters or digits, and says so with embederr.ErrEmptyText.
type bagOfWords struct{}

func (bagOfWords) Embed(_ context.Context, texts []string) ([][]float32, error) {
	out := make([][]float32, len(texts))
	for i, t := range texts {
		v := make([]float32, fakeDims)
		words := strings.FieldsFunc(strings.ToLower(t), func(r rune) bool { return !unicode.IsLetter(r) && !unicode.IsDigit(r) })
		if len(words) == 0 {
			return nil, embederr.ErrEmptyText
		}
		for _, w := range words {
			h := fnv.New32a()
			h.Write([]byte(w))
			v[h.Sum32()%fakeDims]++
		}
		var s float64
		for _, x := range v {
			s += float64(x * x)
		}
		for k := range v {
			v[k] /= float32(math.Sqrt(s))
		}
		out[i] = v
	}
	return out, nil
}

const testCatalog = `{
 "categories": [
  {"id": "github", "description": "github repositories issues pull requests notifications",
   "examples": ["check github notifications", "list open pull requests"], "keywords": ["github"]},
  {"id": "filesystem", "description": "read write list local files directories",
   "examples": ["read file config json", "list files directory"]},
  {"id": "meta", "description": "what tools can you do help", "examples": ["what can you do"]}
 ],
 "servers": [
  {"id": "github", "description": "github api", "categories": ["github"],
   "tools": [{"name": "list_notifications", "description": "list github notifications"}]},
  {"id": "filesystem", "description": "local files", "categories": ["filesystem"],
   "tools": [{"name": "read_file", "description": "read file contents"}]},
  {"id": "meta", "description": "meta tools", "categories": ["meta"],
   "tools": [{"name": "analyze_prompt", "description": "which tools a prompt needs"}]}
 ]
}`

// testIndex builds the test catalog's index with the fake.
func testIndex(t *testing.T) *index.Index {
	t.Helper()
	cat, err := catalog.Parse([]byte(testCatalog), "")
	if err != nil {
		t.Fatal(err)
	}
	idx, err := labels.Embed(context.Background(), cat, bagOfWords{},
		labels.Model{Name: "bow", Fingerprint: "f", Dims: fakeDims}, labels.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return idx
}

// maxTextBytes is the test daemon's text limit.
const maxTextBytes = 256

// dial serves the registered services on bufconn and returns a client connection.
func dial(t *testing.T, register func(*grpc.Server)) *grpc.ClientConn {
	t.Helper()
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	unary, stream := Interceptors(log, nil, 0)
	gs := grpc.NewServer(grpc.ChainUnaryInterceptor(unary), grpc.ChainStreamInterceptor(stream))
	register(gs)
	return testgrpc.Serve(t, gs)
}

// newClassifierClient serves ClassifierService over the test index.
func newClassifierClient(t *testing.T, withSessions bool) pb.ClassifierServiceClient {
	t.Helper()
	idx := testIndex(t)
	dom, err := NewDomain(idx, bagOfWords{}, request.Limits{MaxTextBytes: maxTextBytes, MaxMessages: 4})
	if err != nil {
		t.Fatal(err)
	}
	cfg := Config{MaxEmbedBatch: 2}
	if withSessions {
		st, err := session.NewStore(session.Config{AllCategories: []string{"filesystem", "github", "meta"}})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { st.Close() })
		cfg.Sessions = st
	}
	srv, err := New(cfg, dom, bagOfWords{}, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	conn := dial(t, func(gs *grpc.Server) { pb.RegisterClassifierServiceServer(gs, srv) })
	return pb.NewClassifierServiceClient(conn)
}

func wantCode(t *testing.T, err error, want codes.Code) {
	t.Helper()
	if got := status.Code(err); got != want {
		t.Fatalf("got %v (%v), want %v", got, err, want)
	}
	if msg := status.Convert(err).Message(); !utf8.ValidString(msg) {
		t.Fatalf("message %q is not valid UTF-8", msg)
	}
}

func TestClassifierServiceHappyPaths(t *testing.T) {
	c := newClassifierClient(t, true)
	ctx := context.Background()
	zero := float32(0)

	t.Run("Classify", func(t *testing.T) {
		resp, err := c.Classify(ctx, &pb.ClassifyRequest{Text: "check github notifications", MinConfidence: &zero})
		if err != nil {
			t.Fatal(err)
		}
		if len(resp.GetCategories()) == 0 || resp.GetReasoning() == "" {
			t.Fatalf("got %v, want categories and reasoning", resp)
		}
	})
	t.Run("Route", func(t *testing.T) {
		resp, err := c.Route(ctx, &pb.RouteRequest{Query: "check github notifications", MinConfidence: &zero,
			Messages: []*pb.Message{{Role: "user", Content: "hello"}}})
		if err != nil {
			t.Fatal(err)
		}
		if resp.GetStats().GetTotalTools() != 3 {
			t.Fatalf("stats %v, want 3 tools in total", resp.GetStats())
		}
	})
	t.Run("Embed", func(t *testing.T) {
		resp, err := c.Embed(ctx, &pb.EmbedRequest{Texts: []string{"read file", "github"}})
		if err != nil {
			t.Fatal(err)
		}
		if resp.GetDimensions() != fakeDims || len(resp.GetVectors()) != 2 || len(resp.GetVectors()[0].GetValues()) != fakeDims {
			t.Fatalf("got %d vectors of dims %d, want 2 of %d", len(resp.GetVectors()), resp.GetDimensions(), fakeDims)
		}
	})
	t.Run("GetIndexInfo", func(t *testing.T) {
		resp, err := c.GetIndexInfo(ctx, &pb.GetIndexInfoRequest{})
		if err != nil {
			t.Fatal(err)
		}
		if resp.GetCategories() != 3 || resp.GetTools() != 3 || resp.GetLimits().GetMaxTextBytes() != maxTextBytes {
			t.Fatalf("got %v", resp)
		}
	})
	t.Run("AnalyzePrompt", func(t *testing.T) {
		resp, err := c.AnalyzePrompt(ctx, &pb.AnalyzePromptRequest{Prompt: "read file config json"})
		if err != nil {
			t.Fatal(err)
		}
		if len(resp.GetCategories()) == 0 {
			t.Fatalf("got %v, want categories", resp)
		}
	})
	t.Run("AnalyzePrompt on a blank prompt is meta with confidence 0", func(t *testing.T) {
		for _, p := range []string{"", " \t\n", "\u200b", "\u200b\u200b \ufeff"} {
			resp, err := c.AnalyzePrompt(ctx, &pb.AnalyzePromptRequest{Prompt: p})
			if err != nil {
				t.Fatalf("%q: %v", p, err)
			}
			if len(resp.GetCategories()) != 1 || resp.GetCategories()[0] != "meta" || resp.GetConfidence() != 0 || resp.GetDegraded() {
				t.Fatalf("%q: got %v, want [meta] at confidence 0", p, resp)
			}
		}
	})
	t.Run("DetectContexts", func(t *testing.T) {
		resp, err := c.DetectContexts(ctx, &pb.DetectContextsRequest{Text: "is there anything on github"})
		if err != nil {
			t.Fatal(err)
		}
		if len(resp.GetContexts()) == 0 && resp.GetReason() == "" {
			t.Fatalf("got %v, want contexts or a reason", resp)
		}
	})
	t.Run("sessions", func(t *testing.T) {
		cr, err := c.CreateSession(ctx, &pb.CreateSessionRequest{SessionId: "s1", DefaultExposure: "zero"})
		if err != nil || cr.GetSession().GetId() != "s1" {
			t.Fatalf("CreateSession: %v, %v", cr, err)
		}
		watch, err := c.WatchExposure(ctx, &pb.WatchExposureRequest{SessionId: "s1"})
		if err != nil {
			t.Fatal(err)
		}
		// The watch registers when the server runs the handler, which the
		// client does not wait for: update until an event arrives.
		events := make(chan *pb.WatchExposureResponse, 1)
		go func() {
			ev, err := watch.Recv()
			if err != nil {
				close(events)
				return
			}
			events <- ev
		}()
		var ev *pb.WatchExposureResponse
		for i := 0; ev == nil; i++ {
			cats := []string{"github", "filesystem"}[i%2 : i%2+1]
			up, err := c.UpdateExposure(ctx, &pb.UpdateExposureRequest{SessionId: "s1", Categories: cats, Mode: "replacement"})
			if err != nil || !up.GetChanged() || up.GetTotal() != 1 {
				t.Fatalf("UpdateExposure: %v, %v", up, err)
			}
			select {
			case ev = <-events:
				if ev == nil {
					t.Fatal("watch ended before an event")
				}
			case <-time.After(20 * time.Millisecond):
			}
		}
		if len(ev.GetExposedCategories()) != 1 {
			t.Fatalf("WatchExposure: got %v, want one exposed category", ev)
		}
		if _, err := c.UpdateExposure(ctx, &pb.UpdateExposureRequest{SessionId: "s1", Categories: []string{"github"}, Mode: "replacement"}); err != nil {
			t.Fatal(err)
		}
		lt, err := c.ListTools(ctx, &pb.ListToolsRequest{SessionId: "s1"})
		if err != nil {
			t.Fatal(err)
		}
		if len(lt.GetTools()) != 1 || lt.GetTools()[0].GetName() != "list_notifications" || lt.GetStats().GetTotalTools() != 3 {
			t.Fatalf("ListTools: got %v, want list_notifications of 3 tools", lt)
		}
		an, err := c.AnalyzePrompt(ctx, &pb.AnalyzePromptRequest{Prompt: "read file config json", SessionId: "s1"})
		if err != nil || an.GetTotal() < 1 {
			t.Fatalf("AnalyzePrompt with a session: %v, %v", an, err)
		}
		gs, err := c.GetSession(ctx, &pb.GetSessionRequest{SessionId: "s1"})
		if err != nil || len(gs.GetSession().GetHistory()) < 2 {
			t.Fatalf("GetSession: %v, %v", gs, err)
		}
		if _, err := c.DeleteSession(ctx, &pb.DeleteSessionRequest{SessionId: "s1"}); err != nil {
			t.Fatal(err)
		}
		for {
			if _, err := watch.Recv(); err != nil {
				wantCode(t, err, codes.NotFound) // the session ended
				break
			}
		}
	})
	t.Run("GetStats", func(t *testing.T) {
		resp, err := c.GetStats(ctx, &pb.GetStatsRequest{})
		if err != nil {
			t.Fatal(err)
		}
		if resp.GetToolListAnswers() == 0 {
			t.Fatalf("got %v, want counted tool-list answers", resp)
		}
	})
}

func TestClassifierServiceErrors(t *testing.T) {
	c := newClassifierClient(t, true)
	if _, err := c.CreateSession(context.Background(), &pb.CreateSessionRequest{SessionId: "s"}); err != nil {
		t.Fatal(err)
	}
	long := strings.Repeat("a", maxTextBytes+1)
	// 63 ASCII bytes then a two-byte character: a 64-byte cut splits it.
	splitAt64 := strings.Repeat("x", 63) + "é" + strings.Repeat("y", 10)
	minus := float32(-1)
	ctx := context.Background()
	for _, tc := range []struct {
		name string
		call func() error
		want codes.Code
	}{
		{"Classify empty", func() error { _, err := c.Classify(ctx, &pb.ClassifyRequest{Text: " "}); return err }, codes.InvalidArgument},
		{"Classify zero-width space only", func() error { _, err := c.Classify(ctx, &pb.ClassifyRequest{Text: "\u200b"}); return err }, codes.InvalidArgument},
		{"Classify nothing a tokenizer keeps", func() error { _, err := c.Classify(ctx, &pb.ClassifyRequest{Text: "?!"}); return err }, codes.InvalidArgument},
		{"Classify too long", func() error { _, err := c.Classify(ctx, &pb.ClassifyRequest{Text: long}); return err }, codes.InvalidArgument},
		{"Classify top_k", func() error { _, err := c.Classify(ctx, &pb.ClassifyRequest{Text: "github", TopK: 1000}); return err }, codes.InvalidArgument},
		{"Classify min_confidence", func() error {
			_, err := c.Classify(ctx, &pb.ClassifyRequest{Text: "github", MinConfidence: &minus})
			return err
		}, codes.InvalidArgument},
		{"Route empty", func() error { _, err := c.Route(ctx, &pb.RouteRequest{}); return err }, codes.InvalidArgument},
		{"Route zero-width space only", func() error { _, err := c.Route(ctx, &pb.RouteRequest{Query: "\u200b"}); return err }, codes.InvalidArgument},
		{"Route unknown policy", func() error { _, err := c.Route(ctx, &pb.RouteRequest{Query: "github", OnNoMatch: 9}); return err }, codes.InvalidArgument},
		{"Route unknown server", func() error {
			_, err := c.Route(ctx, &pb.RouteRequest{Query: "github", IncludeServers: []string{splitAt64}})
			return err
		}, codes.InvalidArgument},
		{"Route too many messages", func() error {
			m := &pb.Message{Role: "user", Content: "github"}
			_, err := c.Route(ctx, &pb.RouteRequest{Messages: []*pb.Message{m, m, m, m, m}})
			return err
		}, codes.InvalidArgument},
		{"Embed none", func() error { _, err := c.Embed(ctx, &pb.EmbedRequest{}); return err }, codes.InvalidArgument},
		{"Embed too many", func() error { _, err := c.Embed(ctx, &pb.EmbedRequest{Texts: []string{"a", "b", "c"}}); return err }, codes.InvalidArgument},
		{"Embed zero-width space only", func() error { _, err := c.Embed(ctx, &pb.EmbedRequest{Texts: []string{"\u200b"}}); return err }, codes.InvalidArgument},
		{"AnalyzePrompt bad mode", func() error {
			_, err := c.AnalyzePrompt(ctx, &pb.AnalyzePromptRequest{Prompt: "github", SessionId: "s", Mode: splitAt64})
			return err
		}, codes.InvalidArgument},
		{"AnalyzePrompt unknown session", func() error {
			_, err := c.AnalyzePrompt(ctx, &pb.AnalyzePromptRequest{Prompt: "github", SessionId: "nobody"})
			return err
		}, codes.NotFound},
		{"AnalyzePrompt too long", func() error { _, err := c.AnalyzePrompt(ctx, &pb.AnalyzePromptRequest{Prompt: long}); return err }, codes.InvalidArgument},
		{"DetectContexts empty", func() error { _, err := c.DetectContexts(ctx, &pb.DetectContextsRequest{}); return err }, codes.InvalidArgument},
		{"CreateSession exists", func() error { _, err := c.CreateSession(ctx, &pb.CreateSessionRequest{SessionId: "s"}); return err }, codes.AlreadyExists},
		{"CreateSession bad id", func() error { _, err := c.CreateSession(ctx, &pb.CreateSessionRequest{SessionId: "a/b"}); return err }, codes.InvalidArgument},
		{"CreateSession bad exposure", func() error {
			_, err := c.CreateSession(ctx, &pb.CreateSessionRequest{DefaultExposure: splitAt64})
			return err
		}, codes.InvalidArgument},
		{"GetSession unknown", func() error { _, err := c.GetSession(ctx, &pb.GetSessionRequest{SessionId: "nobody"}); return err }, codes.NotFound},
		{"DeleteSession unknown", func() error {
			_, err := c.DeleteSession(ctx, &pb.DeleteSessionRequest{SessionId: "nobody"})
			return err
		}, codes.NotFound},
		{"UpdateExposure unknown category", func() error {
			_, err := c.UpdateExposure(ctx, &pb.UpdateExposureRequest{SessionId: "s", Categories: []string{splitAt64}})
			return err
		}, codes.InvalidArgument},
		{"UpdateExposure bad mode", func() error {
			_, err := c.UpdateExposure(ctx, &pb.UpdateExposureRequest{SessionId: "s", Mode: "merge"})
			return err
		}, codes.InvalidArgument},
		{"UpdateExposure unknown session", func() error {
			_, err := c.UpdateExposure(ctx, &pb.UpdateExposureRequest{SessionId: "nobody"})
			return err
		}, codes.NotFound},
		{"ListTools unknown session", func() error { _, err := c.ListTools(ctx, &pb.ListToolsRequest{SessionId: "nobody"}); return err }, codes.NotFound},
		{"WatchExposure unknown session", func() error {
			w, err := c.WatchExposure(ctx, &pb.WatchExposureRequest{SessionId: "nobody"})
			if err != nil {
				return err
			}
			_, err = w.Recv()
			return err
		}, codes.NotFound},
		{"Classify after the deadline", func() error {
			dctx, cancel := context.WithCancel(ctx)
			cancel()
			_, err := c.Classify(dctx, &pb.ClassifyRequest{Text: "github"})
			return err
		}, codes.Canceled},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.call()
			wantCode(t, err, tc.want)
			// Messages say what is wrong without naming our packages.
			msg := status.Convert(err).Message()
			for _, p := range packagePrefixes {
				if strings.HasPrefix(msg, p) {
					t.Errorf("message %q starts with the package prefix %q", msg, p)
				}
			}
		})
	}
}

func TestSessionRPCsWithoutSessions(t *testing.T) {
	c := newClassifierClient(t, false)
	_, err := c.ListTools(context.Background(), &pb.ListToolsRequest{SessionId: "s"})
	wantCode(t, err, codes.FailedPrecondition)
}

func TestUnexpectedErrorsAreInternalAndGeneric(t *testing.T) {
	m := errorMapper{log: slog.New(slog.NewTextHandler(io.Discard, nil))}
	err := m.status(context.Background(), "Test", io.ErrUnexpectedEOF)
	wantCode(t, err, codes.Internal)
	if msg := status.Convert(err).Message(); msg != internalMessage {
		t.Fatalf("message %q leaks detail, want %q", msg, internalMessage)
	}
}

// zeroEmbedder is the terminal detector's fake: detection then rests on
// the structural patterns, which is what these tests exercise.
type zeroEmbedder struct{}

func (zeroEmbedder) Embed(_ context.Context, texts []string) ([][]float32, error) {
	out := make([][]float32, len(texts))
	for i := range out {
		out[i] = make([]float32, fakeDims)
		out[i][i%fakeDims] = 1
	}
	return out, nil
}

func newTerminalClient(t *testing.T) terminalpb.TerminalServiceClient {
	t.Helper()
	c, _, _ := newTerminalServer(t, zeroEmbedder{}, terminal.StoreConfig{})
	return c
}

// newTerminalServer serves TerminalService over emb and a real SQLite
// store in a temp dir; it returns the client, the store and its path.
func newTerminalServer(t *testing.T, emb terminal.Embedder, cfg terminal.StoreConfig) (terminalpb.TerminalServiceClient, *terminal.Store, string) {
	t.Helper()
	ctx := context.Background()
	det, err := terminal.NewDetector(ctx, emb)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	path := filepath.Join(dir, "state", "events.db")
	store, err := terminal.OpenStore(path, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	srv, err := NewTerminalServer(det, dir, store, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	conn := dial(t, func(gs *grpc.Server) { terminalpb.RegisterTerminalServiceServer(gs, srv) })
	return terminalpb.NewTerminalServiceClient(conn), store, path
}

func TestTerminalService(t *testing.T) {
	c := newTerminalClient(t)
	ctx := context.Background()

	t.Run("happy paths", func(t *testing.T) {
		d, err := c.DetectInputPrompt(ctx, &terminalpb.DetectInputPromptRequest{Text: "Continue? [y/N] "})
		if err != nil || !d.GetDetected() || d.GetPrompt().GetPromptType() != terminal.TypeYesNo {
			t.Fatalf("DetectInputPrompt: %v, %v", d, err)
		}
		inf, err := c.InferExpectedInput(ctx, &terminalpb.InferExpectedInputRequest{PromptText: "Continue? [y/N] "})
		if err != nil || len(inf.GetSuggestions()) == 0 {
			t.Fatalf("InferExpectedInput: %v, %v", inf, err)
		}
		tr, err := c.TrackInputEvent(ctx, &terminalpb.TrackInputEventRequest{SessionId: "t1", PromptText: "Continue? [y/N] ",
			InputText: "n", Success: true, InputSource: "user_typed"})
		if err != nil || !tr.GetRecorded() {
			t.Fatalf("TrackInputEvent: %v, %v", tr, err)
		}
		h, err := c.GetSessionHistory(ctx, &terminalpb.GetSessionHistoryRequest{SessionId: "t1"})
		if err != nil || len(h.GetEvents()) != 1 {
			t.Fatalf("GetSessionHistory: %v, %v", h, err)
		}
	})
	t.Run("a danger reason clipped inside a character is still sent", func(t *testing.T) {
		// The warning line's 80th byte falls inside "é": the reason is
		// clipped there, and must stay valid UTF-8 or the response cannot
		// be marshalled (it used to answer INTERNAL).
		warning := "WARNING: this disk contains data " + strings.Repeat("x", 46) + "ééééé"
		d, err := c.DetectInputPrompt(ctx, &terminalpb.DetectInputPromptRequest{Text: warning + "\nProceed anyway? (y/n) "})
		if err != nil {
			t.Fatal(err)
		}
		if !d.GetPrompt().GetIsDangerous() || !utf8.ValidString(d.GetPrompt().GetDangerReason()) {
			t.Fatalf("got %v, want a dangerous prompt with a valid reason", d.GetPrompt())
		}
	})
	t.Run("empty or whitespace text is not waiting", func(t *testing.T) {
		for _, text := range []string{"", " ", "\n\n", " \t\r\n "} {
			d, err := c.DetectInputPrompt(ctx, &terminalpb.DetectInputPromptRequest{Text: text})
			if err != nil || d.GetDetected() {
				t.Fatalf("text %q: got %v, %v, want detected false", text, d, err)
			}
		}
	})
	t.Run("the command line is evidence of danger", func(t *testing.T) {
		req := &terminalpb.DetectInputPromptRequest{Text: "Command (m for help): "}
		d, err := c.DetectInputPrompt(ctx, req)
		if err != nil || !d.GetDetected() || d.GetPrompt().GetIsDangerous() {
			t.Fatalf("screen only: got %v, %v, want a prompt that is not dangerous", d, err)
		}
		req.CommandLine, req.Program = "fdisk disk.img", "fdisk"
		d, err = c.DetectInputPrompt(ctx, req)
		if err != nil || !d.GetPrompt().GetIsDangerous() || !strings.Contains(d.GetPrompt().GetDangerReason(), "fdisk") {
			t.Fatalf("with the command line: got %v, %v, want dangerous, naming fdisk", d, err)
		}
	})
	nan := float32(math.NaN())
	for _, tc := range []struct {
		name   string
		call   func() error
		want   codes.Code
		reason string
	}{
		{"DetectInputPrompt command line too long", func() error {
			_, err := c.DetectInputPrompt(ctx, &terminalpb.DetectInputPromptRequest{Text: "x", CommandLine: strings.Repeat("x", 5000)})
			return err
		}, codes.InvalidArgument, ""},
		{"DetectInputPrompt bad confidence", func() error {
			_, err := c.DetectInputPrompt(ctx, &terminalpb.DetectInputPromptRequest{Text: "x", MinConfidence: &nan})
			return err
		}, codes.InvalidArgument, "INVALID_CONFIDENCE"},
		{"DetectInputPrompt bad session id", func() error {
			_, err := c.DetectInputPrompt(ctx, &terminalpb.DetectInputPromptRequest{SessionId: "../etc"})
			return err
		}, codes.InvalidArgument, "INVALID_SESSION_ID"},
		{"DetectInputPrompt unknown session", func() error {
			_, err := c.DetectInputPrompt(ctx, &terminalpb.DetectInputPromptRequest{SessionId: "nobody"})
			return err
		}, codes.NotFound, "SESSION_NOT_FOUND"},
		{"InferExpectedInput empty", func() error {
			_, err := c.InferExpectedInput(ctx, &terminalpb.InferExpectedInputRequest{})
			return err
		}, codes.InvalidArgument, ""},
		{"TrackInputEvent bad prompt type", func() error {
			_, err := c.TrackInputEvent(ctx, &terminalpb.TrackInputEventRequest{SessionId: "t", PromptText: "x", PromptType: "nope"})
			return err
		}, codes.InvalidArgument, ""},
		{"TrackInputEvent long bad prompt type: quoted clipped", func() error {
			_, err := c.TrackInputEvent(ctx, &terminalpb.TrackInputEventRequest{SessionId: "t", PromptText: "x", PromptType: strings.Repeat("\x7f", 100_000)})
			if err != nil && len(err.Error()) > 1024 {
				return fmt.Errorf("an error of %d bytes", len(err.Error()))
			}
			return err
		}, codes.InvalidArgument, ""},
		{"TrackInputEvent bad source", func() error {
			_, err := c.TrackInputEvent(ctx, &terminalpb.TrackInputEventRequest{SessionId: "t", PromptText: "Password:",
				PromptType: terminal.TypePassword, InputSource: strings.Repeat("ü", 40)})
			return err
		}, codes.InvalidArgument, ""},
		{"GetSessionHistory bad limit", func() error {
			_, err := c.GetSessionHistory(ctx, &terminalpb.GetSessionHistoryRequest{SessionId: "t", Limit: -1})
			return err
		}, codes.InvalidArgument, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.call()
			wantCode(t, err, tc.want)
			if got := errorReason(err); got != tc.reason {
				t.Fatalf("reason %q, want %q", got, tc.reason)
			}
		})
	}
}

// TestWatchHeadersMeanRegistered: once a watch's response headers arrived,
// the very next change is delivered (no retry loop needed).
func TestWatchHeadersMeanRegistered(t *testing.T) {
	c := newClassifierClient(t, true)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for i := 0; i < 20; i++ {
		id := fmt.Sprintf("hdr-%d", i)
		if _, err := c.CreateSession(ctx, &pb.CreateSessionRequest{SessionId: id, DefaultExposure: "zero"}); err != nil {
			t.Fatal(err)
		}
		wctx, wcancel := context.WithCancel(ctx)
		watch, err := c.WatchExposure(wctx, &pb.WatchExposureRequest{SessionId: id})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := watch.Header(); err != nil {
			t.Fatalf("headers: %v", err)
		}
		if _, err := c.UpdateExposure(ctx, &pb.UpdateExposureRequest{SessionId: id, Categories: []string{"github"}}); err != nil {
			t.Fatal(err)
		}
		ev, err := watch.Recv()
		if err != nil || ev.GetSessionId() != id {
			t.Fatalf("round %d: got %v, %v; want the change made after the headers", i, ev, err)
		}
		wcancel()
	}
}
