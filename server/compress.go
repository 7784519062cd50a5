package server

import (
	"sync"
	_ "unsafe" // go:linkname, below

	"google.golang.org/grpc/encoding"
)

// registeredCompressors is grpc-go's registry of message compressors,
// which its server uses to decompress a request whose grpc-encoding names
// one. grpc-go has no way to leave a registered compressor out of a
// server; the OpenTelemetry exporter registers gzip for its own client
// calls, and with it every gRPC listener of the daemon inflated requests
// before any check: 3,923 bytes on the wire became a 4,000,000-byte
// message, before authentication, counted against the bytes-in-flight
// budget at their wire size (the ninth hostile pass: no token, RSS 223 →
// 825 MB). A link error here, not a silent change, if grpc-go renames it.
//
//go:linkname registeredCompressors google.golang.org/grpc/encoding.registeredCompressor
var registeredCompressors map[string]encoding.Compressor

var refuseOnce sync.Once

// RefuseCompressedRequests empties the process's registry of gRPC
// message compressors, once, so a request whose messages are compressed
// gets UNIMPLEMENTED ("Decompressor is not installed for grpc-encoding")
// before any of it is inflated. The API's messages are small and the
// clients never compress them; nothing in the daemon sends compressed
// gRPC either (telemetry refuses OTLP compression at start).
func RefuseCompressedRequests() {
	refuseOnce.Do(func() { clear(registeredCompressors) })
}
