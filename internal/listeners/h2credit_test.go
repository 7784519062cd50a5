package listeners

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/classifierd/classifierd/internal/rapidreset"
)

// TestH2BodyReadCredits: over TLS, every HTTP/2 DATA frame no handler
// reads is charged to its connection's rapidreset.FrameBudget, those of
// DataFrameBytes or more by their size, and a body its handler reads
// costs nothing. A body of 16 MiB written a KiB at a time (16,384 DATA
// frames of 1 KiB, four times the peer's burst), all read by its
// handler, has no read held: read at once, and read a window
// (H2ConnWindow) at a time with 10 ms between (a handler behind its
// client's frames, as on a busy machine: the window fills while it
// sleeps). Charged at arrival and credited by the reads (credits past
// the burst lost), the lagging reader's connection was held, and so was
// the steady one's on a machine with both cores taken (29-35 reads
// held, 6 runs in 6); without the reads counted, both were held past
// the connection's burst and its peer's.
func TestH2BodyReadCredits(t *testing.T) {
	for _, lag := range []time.Duration{0, 10 * time.Millisecond} {
		t.Run(fmt.Sprintf("lag=%v", lag), func(t *testing.T) { h2Upload(t, lag) })
	}
}

// h2Upload posts 16 MiB over HTTP/2 to a handler that reads it all,
// a window at a time with lag between reads, and checks that no read of
// its connection was held.
func h2Upload(t *testing.T, lag time.Duration) {
	cert := selfSigned(t)
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var read int64
	done := make(chan struct{}, 1)
	hs := &http.Server{
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			for {
				n, err := io.CopyN(io.Discard, r.Body, H2ConnWindow)
				read += n
				if err != nil {
					break
				}
				time.Sleep(lag)
			}
			done <- struct{}{}
		}),
		TLSConfig:         &tls.Config{Certificates: []tls.Certificate{cert}},
		ReadHeaderTimeout: 5 * time.Second,
		HTTP2:             h2Config(),
	}
	peers := rapidreset.New()
	served := make(chan error, 1)
	go func() { served <- serveOn(hs, lis, peers) }()
	t.Cleanup(func() {
		_ = hs.Close()
		if err := <-served; err != nil && !errors.Is(err, http.ErrServerClosed) {
			t.Errorf("serve: %v", err)
		}
	})

	const size = 16 << 20
	pr, pw := io.Pipe()
	go func() {
		piece := make([]byte, rapidreset.DataFrameBytes)
		for sent := 0; sent < size; sent += len(piece) {
			if _, err := pw.Write(piece); err != nil {
				return
			}
		}
		pw.Close()
	}()
	client := &http.Client{Timeout: time.Minute, Transport: &http.Transport{
		TLSClientConfig: &tls.Config{InsecureSkipVerify: true}, ForceAttemptHTTP2: true}} //nolint:gosec // a self-signed test server
	defer client.CloseIdleConnections()
	req, err := http.NewRequest(http.MethodPost, "https://"+lis.Addr().String()+"/", pr)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	<-done
	if resp.StatusCode != http.StatusOK || resp.ProtoMajor != 2 || read != size {
		t.Fatalf("%d %s, %d bytes read; want 200 over HTTP/2, %d", resp.StatusCode, resp.Proto, read, size)
	}
	if n := peers.Throttled(); n != 0 {
		t.Errorf("a body of %d DATA frames of 1 KiB, all read: %d reads held, want none", size/rapidreset.DataFrameBytes, n)
	}
}

// selfSigned makes a P-256 certificate for 127.0.0.1.
func selfSigned(t *testing.T) tls.Certificate {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "127.0.0.1"},
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)}, NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour)}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
}
