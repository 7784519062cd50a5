package mcpserver

import (
	"context"
	"encoding/json"
	"net/http"
	"reflect"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// HeldCall is the admission of a tools/call taken in front of the SDK,
// before it decoded the HTTP body that holds the call (HoldCall): the
// SDK decodes and validates a tool's arguments (megabytes of JSON, 0.4 s
// of CPU for 60,000 keys) before any handler of ours runs. End gives it
// back; it may be called any number of times. A nil *HeldCall is none.
type HeldCall struct {
	once    sync.Once
	release func()
}

// End gives the admission back, once.
func (h *HeldCall) End() {
	if h != nil {
		h.once.Do(h.release)
	}
}

// heldCalls are the HeldCalls of the HTTP requests being served, by
// their header (headerKey): the SDK hands each message of a request that
// same header map (mcp.RequestExtra.Header), and nothing else of the
// request, so that is how the call's handler finds its admission; a
// client cannot name another's.
var heldCalls sync.Map // uintptr → *HeldCall

// headerKey is the identity of a header map (0 for nil): its address,
// which no other live map shares.
func headerKey(h http.Header) uintptr {
	if h == nil {
		return 0
	}
	return reflect.ValueOf(h).Pointer()
}

// HoldCall keeps release, the admission of the tools/call in the body of
// the HTTP request whose header is h, for the call's admission (admitted:
// Config.Admit finds it in its context, HeldCallFrom). Call the returned
// end once the request has been answered: the admission is given back
// then, if it was not before (the SDK refused the request before any
// handler of ours, or the client went away).
func HoldCall(h http.Header, release func()) (end func()) {
	held := &HeldCall{release: release}
	k := headerKey(h)
	if k == 0 {
		return held.End
	}
	heldCalls.Store(k, held)
	return func() {
		heldCalls.CompareAndDelete(k, held)
		held.End()
	}
}

// claimHeld takes the HeldCall of the HTTP request of a message (nil:
// none): the first tools/call of a request gets it, the others of a batch
// are admitted on their own.
func claimHeld(x *mcp.RequestExtra) *HeldCall {
	if x == nil {
		return nil
	}
	k := headerKey(x.Header)
	if k == 0 {
		return nil
	}
	if v, ok := heldCalls.LoadAndDelete(k); ok {
		return v.(*HeldCall)
	}
	return nil
}

type heldKey struct{}

// HeldCallFrom is the admission taken in front of the SDK for the tool
// call of ctx (Config.Admit's context), nil if none (over stdio, the
// second call of a batch): Admit ends it or makes it the call's own.
func HeldCallFrom(ctx context.Context) *HeldCall {
	h, _ := ctx.Value(heldKey{}).(*HeldCall)
	return h
}

// callAdmission is the admission a tool call runs under (admitted), as
// Forward sees it: given back while a backend works on the call
// (suspend), taken again for its answer (resume), which the SDK encodes
// after the handler has returned.
type callAdmission struct {
	mu      sync.Mutex
	release func() // the place held now (nil: none)
	ended   bool
	// retake takes a place for the answer (Config.Admit for the call,
	// with no HeldCall).
	retake func() (func(), error)
}

type callAdmissionKey struct{}

func callAdmissionFrom(ctx context.Context) *callAdmission {
	c, _ := ctx.Value(callAdmissionKey{}).(*callAdmission)
	return c
}

// end gives back the place held and takes none again.
func (c *callAdmission) end() {
	c.mu.Lock()
	r := c.release
	c.release, c.ended = nil, true
	c.mu.Unlock()
	if r != nil {
		r()
	}
}

// suspend gives back the place held, if any, while a backend works.
func (c *callAdmission) suspend() {
	if c == nil {
		return
	}
	c.mu.Lock()
	r := c.release
	c.release = nil
	c.mu.Unlock()
	if r != nil {
		r()
	}
}

// resume takes a place again for the answer of the call of ctx, held
// until ctx ends (the SDK ends a request's context once its answer is
// written): the encoding of a forwarded answer (up to
// MaxForwardedAnswer) is the caller's work. A refusal is not the
// caller's error: the backend has done the call, whose answer is passed
// on, outside any admission.
func (c *callAdmission) resume(ctx context.Context) {
	if c == nil || c.retake == nil {
		return
	}
	r, err := c.retake()
	if err != nil {
		return
	}
	if ctx.Done() == nil {
		r() // not a request of the SDK's connection: nothing to wait for
		return
	}
	context.AfterFunc(ctx, r)
}

// encodeArgs encodes a forwarded call's arguments under the call's
// admission, before the backend's work begins (suspend): the backend's
// client would encode a decoded map (60,000 values) outside it.
func encodeArgs(args any) any {
	switch args.(type) {
	case nil, json.RawMessage:
		return args
	}
	b, err := json.Marshal(args)
	if err != nil {
		return args // the backend's client says what is wrong with it
	}
	return json.RawMessage(b)
}
