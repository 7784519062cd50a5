package main

import (
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"golang.org/x/net/http2"

	"github.com/classifierd/classifierd/server"
)

// TestHostileGRPCHandshakeBound: a connection to the gRPC listener that
// never finishes its TLS handshake or HTTP/2 preface is closed after
// server.HandshakeTimeout, as the HTTP listeners close a request head
// after 10 s. grpc-go's default is 120 s: the fourth hostile pass held
// 20,000 such connections, no token and no byte sent, which took every
// file descriptor of the daemon (20,000) and +260 MB, so that
// every listener refused or stalled other clients (one Route took 15 s)
// for as long as the flood went on at 170 connections a second.
func TestHostileGRPCHandshakeBound(t *testing.T) {
	dir := t.TempDir()
	tokens := filepath.Join(dir, "tokens")
	if err := os.WriteFile(tokens, []byte("alice route "+aliceToken+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	d, _ := startDaemon(t, genIndex(t, "testdata/mini.json"), "--auth-token-file", tokens)
	for _, tc := range []struct {
		name string
		send []byte
	}{
		{"nothing sent", nil},
		{"half a preface", []byte(http2.ClientPreface[:10])},
		{"half a TLS ClientHello", []byte{0x16, 0x03, 0x01, 0x40, 0x00, 0x01}}, // to a plain listener: never a preface
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			nc, err := net.Dial("tcp", d.addr)
			if err != nil {
				t.Fatal(err)
			}
			defer nc.Close()
			if _, err := nc.Write(tc.send); err != nil {
				t.Fatal(err)
			}
			start := time.Now()
			limit := server.HandshakeTimeout + 10*time.Second
			_ = nc.SetReadDeadline(start.Add(limit))
			b := make([]byte, 4096)
			for err == nil { // the server's SETTINGS may come first
				_, err = nc.Read(b)
			}
			if ne, ok := err.(net.Error); ok && ne.Timeout() {
				t.Fatalf("connection still open after %s, want closed after %s", limit, server.HandshakeTimeout)
			}
			t.Logf("closed after %.1fs", time.Since(start).Seconds())
		})
	}
}
