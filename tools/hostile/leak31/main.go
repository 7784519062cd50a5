// Command leak31 (thirty-first hostile pass): grpc-go alone, for finding 2. One unary method,
// /classifier.v1.ClassifierService/GetIndexInfo, reading its message with a raw codec and answering an empty one,
// over TLS with DIR/c.pem and DIR/c.key, its heap printed every 3 s after a collection. Usage: leak31 ADDR DIR;
// then h2ctl20 -addr ADDR ... -bodyfile junk63.bin -frame 1024 -per 63. grpc-go v1.85.0 keeps nothing: the
// daemon does.
package main

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"os"
	"runtime"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/encoding"
)

type raw struct{}

func (raw) Marshal(v any) ([]byte, error)   { return *(v.(*[]byte)), nil }
func (raw) Unmarshal(b []byte, v any) error { *(v.(*[]byte)) = append([]byte(nil), b...); return nil }
func (raw) Name() string                    { return "proto" }

func main() {
	encoding.RegisterCodec(raw{})
	cert, err := tls.LoadX509KeyPair(os.Args[2]+"/c.pem", os.Args[2]+"/c.key")
	if err != nil {
		panic(err)
	}
	s := grpc.NewServer(grpc.Creds(credentials.NewTLS(&tls.Config{Certificates: []tls.Certificate{cert}})))
	s.RegisterService(&grpc.ServiceDesc{ServiceName: "classifier.v1.ClassifierService", HandlerType: (*any)(nil),
		Methods: []grpc.MethodDesc{{MethodName: "GetIndexInfo", Handler: func(srv any, ctx context.Context, dec func(any) error, _ grpc.UnaryServerInterceptor) (any, error) {
			var b []byte
			if err := dec(&b); err != nil {
				return nil, err
			}
			out := []byte{}
			return &out, nil
		}}}}, struct{}{})
	go func() {
		for {
			time.Sleep(3 * time.Second)
			runtime.GC()
			var m runtime.MemStats
			runtime.ReadMemStats(&m)
			fmt.Printf("heap %d MB objects %d goroutines %d\n", m.HeapAlloc>>20, m.HeapObjects, runtime.NumGoroutine())
		}
	}()
	l, err := net.Listen("tcp", os.Args[1])
	if err != nil {
		panic(err)
	}
	s.Serve(l)
}
