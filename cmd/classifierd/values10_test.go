package main

import (
	"bytes"
	"encoding/binary"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// TestHostileManyValuesRefusedBeforeDecoding reproduces the tenth hostile
// pass's MED finding through the real daemon on --http-listen: a Route
// body just under --max-recv-bytes (4 MiB) holding 1.4 million empty
// messages ({} each in JSON, 2 bytes each in protobuf). Before, it was
// decoded whole and then refused "1398070 messages, limit 64": 470 MB
// and 7.6 s of CPU for one JSON body, +1.5 GB for three at once by one
// identity (the body budget's share), +350 MB for one over gRPC-Web. Now
// the body's values are counted before it is decoded and it is refused
// 400 (httpguard.MaxElements), with the daemon's peak memory rising by
// less than 150 MB for three JSON and three gRPC-Web bodies at once (it
// rose by over 1 GB on main).
func TestHostileManyValuesRefusedBeforeDecoding(t *testing.T) {
	idx := genIndex(t, "testdata/mini.json")
	tokens := filepath.Join(t.TempDir(), "tokens")
	if err := os.WriteFile(tokens, []byte("hog route "+aliceToken+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	httpAddr := freeAddr(t)
	d, _ := opsDaemon(t, freeAddr(t), insecureDial, "--index", idx, "--auth-token-file", tokens, "--http-listen", httpAddr)
	const limit = 4<<20 - 64

	n := (limit - 30) / 3
	jsonBody := append([]byte(`{"query":"x","messages":[`), bytes.Repeat([]byte(`{},`), n)...)
	jsonBody = append(jsonBody[:len(jsonBody)-1], "]}"...)
	msg := append([]byte("\x0a\x01x"), bytes.Repeat([]byte("\x12\x00"), (limit-16)/2)...)
	webBody := make([]byte, 5, 5+len(msg))
	binary.BigEndian.PutUint32(webBody[1:], uint32(len(msg)))
	webBody = append(webBody, msg...)

	post := func(ct string, body []byte) (int, string, string) {
		req, err := http.NewRequest(http.MethodPost, "http://"+httpAddr+"/classifier.v1.ClassifierService/Route", bytes.NewReader(body))
		if err != nil {
			t.Error(err)
			return 0, "", ""
		}
		req.Header.Set("Content-Type", ct)
		req.Header.Set("Authorization", "Bearer "+aliceToken)
		resp, err := (&http.Client{Timeout: 2 * time.Minute}).Do(req)
		if err != nil {
			t.Error(err)
			return 0, "", ""
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b), resp.Header.Get("Grpc-Message")
	}
	// A small Route passes, so the refusal below is the count's.
	if code, body, _ := post("application/json", []byte(`{"query":"open a pull request, then {merge} it [now]","messages":[{"role":"user","content":"a, b"}]}`)); code != http.StatusOK {
		t.Fatalf("a small Route: %d %s", code, body)
	}

	meter := startPeakMeter(t, d.cmd.Process.Pid)
	var wg sync.WaitGroup
	for i := 0; i < 3; i++ {
		wg.Add(2)
		go func() {
			defer wg.Done()
			code, body, _ := post("application/json", jsonBody)
			if code != http.StatusBadRequest || !strings.Contains(body, "values") {
				t.Errorf("JSON Route of %d empty messages: %d %.200s; want 400 counting its values", n, code, body)
			}
		}()
		go func() {
			defer wg.Done()
			code, body, gm := post("application/grpc-web+proto", webBody)
			if !strings.Contains(gm, "values") {
				t.Errorf("gRPC-Web Route of %d empty messages: %d %.200s grpc-message %q; want refused counting its values", len(msg)/2, code, body, gm)
			}
		}()
	}
	wg.Wait()
	grew, how := meter.growth()
	t.Logf("3 JSON and 3 gRPC-Web bodies of 4 MiB at once: peak +%d MB (%s)", grew>>20, how)
	if grew > 150<<20 {
		t.Errorf("peak memory rose by %d MB for six 4 MiB bodies (%s); want under 150 MB", grew>>20, how)
	}
}
