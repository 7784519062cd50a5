package main

import (
	"context"
	"fmt"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/net/http2"
	"google.golang.org/protobuf/proto"

	pb "github.com/classifierd/classifierd/gen/classifier/v1"
	"github.com/classifierd/classifierd/server"
)

// unreadConn is a raw HTTP/2 client that announces
// SETTINGS_INITIAL_WINDOW_SIZE 0 and starts calls carrying whole
// messages, so that their answers cannot be sent; with steady it opens
// each stream's window by a little every 100ms (a slow but steady
// reader).
type unreadConn struct {
	nc       net.Conn
	closed   <-chan struct{} // the server closed the connection
	data     atomic.Int64    // answer bytes received
	statuses sync.Map        // grpc-status value -> *atomic.Int64
	answered atomic.Int64    // answers begun: headers with no status
	unread   atomic.Int64    // calls refused for their caller's unread answers
}

func (u *unreadConn) status(code string) int64 {
	if v, ok := u.statuses.Load(code); ok {
		return v.(*atomic.Int64).Load()
	}
	return 0
}

// done: the server closed the connection, or ended all its streams
// calls with a status and no answer.
func (u *unreadConn) done(streams int) bool {
	select {
	case <-u.closed:
		return true
	default:
	}
	n := int64(0)
	u.statuses.Range(func(_, v any) bool { n += v.(*atomic.Int64).Load(); return true })
	return n == int64(streams)
}

func dialUnread(t *testing.T, addr, path, token string, msg []byte, streams int, steady bool) *unreadConn {
	t.Helper()
	nc, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = nc.Close() })
	u := &unreadConn{nc: nc}
	c := dialH2C(t, nc, addr, func(f http2.Frame) {
		switch f := f.(type) {
		case *http2.DataFrame:
			u.data.Add(int64(len(f.Data())))
		case *http2.MetaHeadersFrame:
			ended := false
			for _, h := range f.Fields {
				switch h.Name {
				case "grpc-status":
					ended = true
					v, _ := u.statuses.LoadOrStore(h.Value, new(atomic.Int64))
					v.(*atomic.Int64).Add(1)
				case "grpc-message":
					if strings.HasPrefix(h.Value, "too many answer bytes not yet read") {
						u.unread.Add(1)
					}
				}
			}
			if !ended {
				u.answered.Add(1)
			}
		}
	}, http2.Setting{ID: http2.SettingInitialWindowSize, Val: 0})
	u.closed = c.gone
	for s := range streams {
		if err := c.call(uint32(2*s+1), path, token, msg); err != nil {
			t.Fatal(err)
		}
	}
	if steady {
		// 2 KiB a stream every 100ms (and as much on the connection):
		// 20 KiB a second for each stream whose answer is ready. At 512
		// bytes a stream, a reader whose other answers still waited for
		// the model (a loaded machine) read 5 KiB a second, under the
		// 16 KiB in 2 s the stall rule asks, and was closed.
		go func() {
			for {
				select {
				case <-u.closed:
					return
				case <-time.After(100 * time.Millisecond):
				}
				_ = c.write(func(fr *http2.Framer) error {
					_ = fr.WriteWindowUpdate(0, uint32(2048*streams))
					for s := range streams {
						_ = fr.WriteWindowUpdate(uint32(2*s+1), 2048)
					}
					return nil
				})
			}
		}()
	}
	return u
}

// embedMsg is an EmbedRequest of 64 short texts: its answer, 64 vectors,
// is about 100 KB.
func embedMsg(t *testing.T) []byte {
	t.Helper()
	req := &pb.EmbedRequest{}
	for i := range 64 {
		req.Texts = append(req.Texts, fmt.Sprintf("embed hello%d", i%10))
	}
	b, err := proto.Marshal(req)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestGRPCUnreadAnswersClosed: a client that shuts its HTTP/2 windows
// (SETTINGS_INITIAL_WINDOW_SIZE 0) and sends calls whose answers it
// never reads. grpc-go has no write deadline: the answers (about 100 KB
// each) were queued on the connection, or held by their handler, for as
// long as the client kept the connection open (the tenth hostile pass:
// 100 connections × 64 Embed calls, RSS 225 → 712 MB, held 150 s, past
// --idle-timeout). Now a connection that owed answers for all of
// --write-stall-timeout and wrote under 16 KiB of them is closed, which
// frees them; a client reading as slowly as 20 KiB a second an answer
// keeps its connection; another identity's Routes are answered throughout.
func TestGRPCUnreadAnswersClosed(t *testing.T) {
	idx := genIndex(t, "testdata/mini.json")
	maddr, addr := freeAddr(t), freeAddr(t)
	const stall = 2 * time.Second
	_, conn := opsDaemon(t, addr, insecureDial, "--index", idx, "--auth-token-file", recvTokens(t), "--metrics-listen", maddr,
		"--write-stall-timeout", stall.String(), "--idle-timeout", "60s")
	c := pb.NewClassifierServiceClient(conn)
	if _, err := c.Route(bearerCtx(context.Background(), bobToken), &pb.RouteRequest{Query: "warm up"}); err != nil {
		t.Fatal(err)
	}
	msg := embedMsg(t)
	const path = "/classifier.v1.ClassifierService/Embed"

	stop := make(chan struct{})
	victim := victimRoutes(t, c, bobToken, stop)
	const conns, streams = 6, 32
	var hogs []*unreadConn
	for range conns {
		hogs = append(hogs, dialUnread(t, addr, path, aliceToken, msg, streams, false))
	}
	// Steady: 8 calls read at 20 KiB/s each, each answer (~100 KB) done
	// in about 5 s: longer than the stall limit, never stalled.
	steady := dialUnread(t, addr, path, bobToken, msg, 8, true)
	start := time.Now()
	// A connection whose calls were all refused (RESOURCE_EXHAUSTED:
	// the caller's unread answers, or the model's queue) owes nothing
	// and may stay; every other must be closed.
	deadline := start.Add(3*stall + 5*time.Second)
	for i, h := range hogs {
		for !h.done(streams) && time.Now().Before(deadline) {
			time.Sleep(50 * time.Millisecond)
		}
		if !h.done(streams) {
			t.Errorf("connection %d not closed %v after its answers went unread (--write-stall-timeout %v); %d answer bytes read, %d calls refused",
				i, time.Since(start).Round(time.Millisecond), stall, h.data.Load(), h.status("8"))
		}
	}
	took := time.Since(start)
	refused := int64(0)
	for _, h := range hogs {
		refused += h.status("8")
	}
	// The steady reader, watched for three stall limits once its answers
	// flow: it owes answers throughout and is kept.
	for steady.data.Load() == 0 && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	from := steady.data.Load()
	select {
	case <-steady.closed:
	case <-time.After(3 * stall):
	}
	select {
	case <-steady.closed:
		t.Errorf("a client reading 20 KiB a second an answer was closed after %v (%d answer bytes read), want it kept", time.Since(start), steady.data.Load())
	default:
		if got := steady.data.Load() - from; got < 3*server.StallProgressBytes {
			t.Errorf("the steady reader read %d bytes in %v, want at least %d", got, 3*stall, 3*server.StallProgressBytes)
		}
	}
	close(stop)
	v := <-victim
	t.Logf("%d connections × %d Embeds never read: closed after %v (limit %v), %d calls refused RESOURCE_EXHAUSTED (the model's queue, or past %d MiB unread); steady reader got %d bytes and was kept; victim %v; load %s",
		conns, streams, took.Round(time.Millisecond), stall, refused, server.MaxUnreadPerCaller>>20, steady.data.Load(), v, loadavg())
	if len(v.errs) > 0 || len(v.lat) == 0 {
		t.Errorf("victim's Routes: %v (first error %v), want every one answered", v, firstErr(v.errs))
	}
	if n := scrape(t, maddr)["classifierd_grpc_stalled_connections_closed_total"]; n < 1 {
		t.Errorf("classifierd_grpc_stalled_connections_closed_total = %v, want at least 1", n)
	}
}

// TestGRPCUnreadAnswersPerCaller: a caller whose connections hold 16 MiB
// of answers unread (windows shut, --write-stall-timeout long) has its
// new calls refused RESOURCE_EXHAUSTED from their headers, on any
// connection, while another identity's calls are answered; once its
// connections are gone it may call again.
func TestGRPCUnreadAnswersPerCaller(t *testing.T) {
	idx := genIndex(t, "testdata/mini.json")
	maddr, addr := freeAddr(t), freeAddr(t)
	_, conn := opsDaemon(t, addr, insecureDial, "--index", idx, "--auth-token-file", recvTokens(t), "--metrics-listen", maddr,
		"--write-stall-timeout", "5m")
	c := pb.NewClassifierServiceClient(conn)
	if _, err := c.Route(bearerCtx(context.Background(), bobToken), &pb.RouteRequest{Query: "warm up"}); err != nil {
		t.Fatal(err)
	}
	msg := embedMsg(t)
	const path, streams = "/classifier.v1.ClassifierService/Embed", 32
	stop := make(chan struct{})
	victim := victimRoutes(t, c, bobToken, stop)
	// One connection at a time, each until all its calls are answered
	// (headers sent, the message held by the shut window) or refused.
	var hogs []*unreadConn
	refused := int64(0)
	for i := 0; i < 12 && refused == 0; i++ {
		h := dialUnread(t, addr, path, aliceToken, msg, streams, false)
		hogs = append(hogs, h)
		deadline := time.Now().Add(30 * time.Second)
		for h.answered.Load()+h.unread.Load() < streams && !h.done(streams) && time.Now().Before(deadline) {
			time.Sleep(20 * time.Millisecond)
		}
		refused = h.unread.Load()
	}
	held := scrape(t, maddr)["classifierd_grpc_unread_answer_bytes"]
	answered := int64(0)
	for _, h := range hogs {
		answered += h.answered.Load()
	}
	close(stop)
	v := <-victim
	t.Logf("%d connections × %d Embeds never read: %d answered, then %d refused for unread answers; %.1f MiB unread; victim %v; load %s",
		len(hogs), streams, answered, refused, held/(1<<20), v, loadavg())
	if refused == 0 {
		t.Errorf("no call refused with %d answers of ~100 KB unread, want refusals past %d MiB", answered, server.MaxUnreadPerCaller>>20)
	}
	if limit := float64(server.MaxUnreadPerCaller + streams*110_000); held > limit {
		t.Errorf("%.1f MiB of answers unread, want at most %.1f MiB (the cap and one connection's calls)", held/(1<<20), limit/(1<<20))
	}
	if len(v.errs) > 0 || len(v.lat) == 0 {
		t.Errorf("victim's Routes: %v (first error %v), want every one answered", v, firstErr(v.errs))
	}
	if _, err := c.Embed(bearerCtx(context.Background(), bobToken), &pb.EmbedRequest{Texts: []string{"another caller"}}); err != nil {
		t.Errorf("another identity's Embed: %v, want it answered", err)
	}
	for _, h := range hogs {
		_ = h.nc.Close()
	}
	deadline := time.Now().Add(10 * time.Second)
	for scrape(t, maddr)["classifierd_grpc_unread_answer_bytes"] > 0 && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	if _, err := c.Embed(bearerCtx(context.Background(), aliceToken), &pb.EmbedRequest{Texts: []string{"read this time"}}); err != nil {
		t.Errorf("the caller's Embed once its connections are gone: %v, want it answered", err)
	}
}
