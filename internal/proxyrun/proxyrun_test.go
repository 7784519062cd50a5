package proxyrun

import (
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/classifierd/classifierd/internal/security"
	"github.com/classifierd/classifierd/mcpsrc"
)

// TestIsInitialize: only a single initialize request starts a session, and
// the body is left whole for the SDK.
func TestIsInitialize(t *testing.T) {
	for body, want := range map[string]bool{
		`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{}}`: true,
		`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`:             false,
		`[{"jsonrpc":"2.0","id":1,"method":"initialize"}]`:           false,
		`not json`: false,
	} {
		r := httptest.NewRequest(http.MethodPost, "/mcp", strings.NewReader(body))
		if got := isInitialize(httptest.NewRecorder(), r); got != want {
			t.Errorf("isInitialize(%s) = %v, want %v", body, got, want)
		}
		if rest, _ := io.ReadAll(r.Body); string(rest) != body {
			t.Errorf("body after isInitialize = %q, want it whole", rest)
		}
	}
}

func TestListenAndIsolation(t *testing.T) {
	for _, tc := range []struct {
		cfg       Config
		open      bool // refused as open beyond loopback
		isolation string
	}{
		{Config{MCPListen: "127.0.0.1:1"}, false, mcpsrc.IsolationShared},
		{Config{MCPListen: "0.0.0.0:1"}, true, mcpsrc.IsolationShared},
		{Config{MCPListen: "0.0.0.0:1", InsecureListen: true}, false, mcpsrc.IsolationShared},
		{Config{MCPListen: "0.0.0.0:1", Security: security.Config{TokenFile: "t"}}, false, mcpsrc.IsolationPerIdentity},
	} {
		err := tc.cfg.ValidateListen()
		if errors.Is(err, security.ErrOpenListen) != tc.open {
			t.Errorf("%+v: ValidateListen = %v, want open %v", tc.cfg, err, tc.open)
		}
		if got := tc.cfg.defaultIsolation(); got != tc.isolation {
			t.Errorf("%+v: isolation %q, want %q", tc.cfg, got, tc.isolation)
		}
	}
	if err := (&Config{Security: security.Config{TokenFile: "t"}}).ValidateListen(); err == nil {
		t.Error("security flags without --mcp-listen accepted")
	}
}
