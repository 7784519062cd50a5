package testmcp

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Churn is a crowd of MCP agents opening, using and closing sessions at
// once through the official SDK client over streamable HTTP: the load that
// shows a server's session places are taken and given back exactly, even
// when agents are refused (run it with -race).
type Churn struct {
	// Endpoint is the MCP endpoint's URL.
	Endpoint string
	// Agents run at once; each opens a session, lists its tools and
	// closes it until it has done that Sessions times.
	Agents, Sessions int
	// Client is agent i's HTTP client: who it is to the server.
	Client func(agent int) *http.Client
	// Full are the HTTP statuses of a refusal for want of a place (429,
	// 503): the agent waits Pause and tries again. Any other error fails
	// the test.
	Full  []int
	Pause time.Duration
}

// Run runs the agents and waits for them all; it fails t with the first
// error and returns how many opens were refused for want of a place.
func (c Churn) Run(t testing.TB) (refused int) {
	t.Helper()
	var wg sync.WaitGroup
	var full atomic.Int32
	errs := make(chan error, c.Agents)
	for agent := range c.Agents {
		wg.Go(func() {
			for opened := 0; opened < c.Sessions; {
				ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
				cs, err := mcp.NewClient(&mcp.Implementation{Name: "churn", Version: "1"}, nil).
					Connect(ctx, &mcp.StreamableClientTransport{Endpoint: c.Endpoint, HTTPClient: c.Client(agent), MaxRetries: -1}, nil)
				if err != nil {
					cancel()
					// The SDK's client (v1.8.0) reports a 429 or 503 by its
					// status text alone.
					if !c.full(err) {
						errs <- err
						return
					}
					full.Add(1)
					time.Sleep(c.Pause) // another agent's session ends soon
					continue
				}
				_, err = cs.ListTools(ctx, nil)
				cancel()
				if err := errors.Join(err, cs.Close()); err != nil {
					errs <- err
					return
				}
				opened++
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	return int(full.Load())
}

// full reports whether err is a refusal with one of c.Full's statuses.
func (c Churn) full(err error) bool {
	for _, code := range c.Full {
		if strings.Contains(err.Error(), http.StatusText(code)) {
			return true
		}
	}
	return false
}
