package mcpsrc_test

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/classifierd/classifierd/internal/testmcp"
	"github.com/classifierd/classifierd/mcpsrc"
)

func TestIsolationConfig(t *testing.T) {
	for _, tc := range []struct {
		name        string
		json        string
		def         string
		perIdentity []string
		listingArgs string // the "p" server's args in the listing config
		wantErr     string
	}{
		{"default shared", `{"mcpServers":{"p":{"command":"x","args":["a"]}}}`, "shared", nil, "a", ""},
		{"default per-identity", `{"mcpServers":{"p":{"command":"x","args":["--db=${identity}.db"]}}}`, "per-identity", []string{"p"}, "--db=catalog.db", ""},
		{"explicit beats the default", `{"mcpServers":{"p":{"command":"x","args":["a"],"isolation":"shared"},"q":{"url":"http://h/","isolation":"per-identity"}}}`,
			"per-identity", []string{"q"}, "a", ""},
		{"a shared server cannot use ${identity}", `{"mcpServers":{"p":{"command":"x","env":{"F":"/d/${identity}"},"isolation":"shared"}}}`,
			"per-identity", nil, "", `server "p" uses ${identity} but is shared`},
		{"nor one shared by default", `{"mcpServers":{"p":{"command":"x","args":["${identity}"]}}}`, "shared", nil, "", "but is shared"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg, err := mcpsrc.ParseConfig([]byte(tc.json))
			if err != nil {
				t.Fatal(err)
			}
			listing, per, err := cfg.Isolate(tc.def)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) || !errors.Is(err, mcpsrc.ErrConfig) {
					t.Fatalf("Isolate: %v, want ErrConfig with %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var names []string
			for _, sc := range per {
				names = append(names, sc.Name)
			}
			if strings.Join(names, ",") != strings.Join(tc.perIdentity, ",") {
				t.Fatalf("per-identity %v, want %v", names, tc.perIdentity)
			}
			for _, sc := range listing.Servers {
				if sc.Name == "p" && strings.Join(sc.Args, " ") != tc.listingArgs {
					t.Fatalf("listing args %q, want %q", sc.Args, tc.listingArgs)
				}
			}
		})
	}
	if _, err := mcpsrc.ParseConfig([]byte(`{"mcpServers":{"p":{"command":"x","isolation":"per-user"}}}`)); err == nil ||
		!strings.Contains(err.Error(), `isolation "per-user"`) {
		t.Fatalf("unknown isolation: %v", err)
	}
}

func TestIdentityKey(t *testing.T) {
	seen := map[string]string{}
	for _, name := range []string{"alice", "Alice", "../../etc/passwd", "", "bob smith", "bob_smith", strings.Repeat("x", 100), "пароль"} {
		k := mcpsrc.IdentityKey(name)
		if strings.ContainsAny(k, "/\\. ") || len(k) > 32+13 || k == "" {
			t.Errorf("IdentityKey(%q) = %q: not a safe file name part", name, k)
		}
		if other, ok := seen[k]; ok {
			t.Errorf("IdentityKey(%q) = IdentityKey(%q) = %q", name, other, k)
		}
		seen[k] = name
	}
	if k := mcpsrc.IdentityKey("alice"); !strings.HasPrefix(k, "alice-") {
		t.Errorf("IdentityKey(alice) = %q, want it readable", k)
	}
}

type identityKey struct{}

func as(name string) context.Context {
	return context.WithValue(context.Background(), identityKey{}, name)
}

// TestIsolatedBackends runs a per-identity test server whose tool file
// is the identity's own (--tools tools-${identity}.json), so a tool
// answers only on its identity's backend; backends are bounded and reaped.
func TestIsolatedBackends(t *testing.T) {
	bin := testmcp.Binary(t)
	dir := t.TempDir()
	for _, who := range []string{"alice", "bob", "carol", "catalog"} {
		key := mcpsrc.IdentityKey(who)
		if who == "catalog" {
			key = "catalog"
		}
		testmcp.WriteTools(t, filepath.Join(dir, "tools-"+key+".json"), []testmcp.Tool{{Name: who + "_tool", Description: "a tool"}})
	}
	testmcp.WriteTools(t, filepath.Join(dir, "shared.json"), []testmcp.Tool{{Name: "shared_tool", Description: "a tool"}})
	cfg, err := mcpsrc.ParseConfig([]byte(`{"mcpServers":{
		"own":{"command":"` + bin + `","args":["--tools","` + filepath.Join(dir, "tools-${identity}.json") + `"],"isolation":"per-identity"},
		"common":{"command":"` + bin + `","args":["--tools","` + filepath.Join(dir, "shared.json") + `"]}}}`))
	if err != nil {
		t.Fatal(err)
	}
	listing, per, err := cfg.Isolate(mcpsrc.IsolationShared)
	if err != nil {
		t.Fatal(err)
	}
	pool := mcpsrc.Open(listing, mcpsrc.Options{})
	defer pool.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := pool.WaitReady(ctx); err != nil {
		t.Fatal(err)
	}
	iso, err := mcpsrc.NewIsolated(pool, per, mcpsrc.IsolatedOptions{
		Identity:    func(ctx context.Context) string { s, _ := ctx.Value(identityKey{}).(string); return s },
		MaxBackends: 2, IdleTimeout: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	defer iso.Close()
	call := func(who, server, tool string) (string, error) {
		cctx, cancel := context.WithTimeout(as(who), 30*time.Second)
		defer cancel()
		res, err := iso.CallTool(cctx, server, &mcp.CallToolParams{Name: tool})
		if err != nil {
			return "", err
		}
		if res.IsError {
			return "", errors.New("tool error")
		}
		return res.Content[0].(*mcp.TextContent).Text, nil
	}

	// The listing connection is the catalog's own.
	for _, st := range pool.Snapshot().Servers {
		if st.Name == "own" && (len(st.Tools) != 1 || st.Tools[0].Name != "catalog_tool") {
			t.Fatalf("listed tools of own: %v, want catalog_tool", st.Tools)
		}
	}
	if got, err := call("alice", "own", "alice_tool"); err != nil || got != "alice_tool" {
		t.Fatalf("alice's own tool: %q %v", got, err)
	}
	if _, err := call("alice", "own", "bob_tool"); err == nil {
		t.Fatal("alice reached bob's tool: her backend is not her own")
	}
	if got, err := call("bob", "own", "bob_tool"); err != nil || got != "bob_tool" {
		t.Fatalf("bob's own tool: %q %v", got, err)
	}
	// A shared server's calls go through the pool, for anyone.
	if got, err := call("carol", "common", "shared_tool"); err != nil || got != "shared_tool" {
		t.Fatalf("carol's shared call: %q %v", got, err)
	}
	if total, ofAlice := iso.Backends("alice"); total != 2 || ofAlice != 1 {
		t.Fatalf("backends %d, alice's %d; want 2 and 1", total, ofAlice)
	}
	// MaxBackends 2: carol's own backend would be a third.
	if _, err := call("carol", "own", "carol_tool"); !errors.Is(err, mcpsrc.ErrTooManyBackends) {
		t.Fatalf("carol past MaxBackends: %v, want ErrTooManyBackends", err)
	}
	// Nothing is idle for an hour yet; an hour on, both are.
	if n := iso.Reap(time.Now()); n != 0 {
		t.Fatalf("reaped %d busy-recently backends", n)
	}
	if n := iso.Reap(time.Now().Add(2 * time.Hour)); n != 2 {
		t.Fatalf("reaped %d idle backends, want 2", n)
	}
	if total, _ := iso.Backends(""); total != 0 {
		t.Fatalf("%d backends after reaping", total)
	}
	if got, err := call("carol", "own", "carol_tool"); err != nil || got != "carol_tool" {
		t.Fatalf("carol after reaping: %q %v", got, err)
	}
	if err := iso.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := call("carol", "own", "carol_tool"); !errors.Is(err, mcpsrc.ErrUnavailable) {
		t.Fatalf("a call after Close: %v, want ErrUnavailable", err)
	}
}

func TestIsolatedPerIdentityBound(t *testing.T) {
	bin := testmcp.Binary(t)
	dir := t.TempDir()
	tools := filepath.Join(dir, "tools.json")
	testmcp.WriteTools(t, tools, []testmcp.Tool{{Name: "t", Description: "a tool"}})
	cfg, err := mcpsrc.ParseConfig([]byte(`{"mcpServers":{
		"a":{"command":"` + bin + `","args":["--tools","` + tools + `"]},
		"b":{"command":"` + bin + `","args":["--tools","` + tools + `"]}}}`))
	if err != nil {
		t.Fatal(err)
	}
	listing, per, err := cfg.Isolate(mcpsrc.IsolationPerIdentity)
	if err != nil {
		t.Fatal(err)
	}
	pool := mcpsrc.Open(listing, mcpsrc.Options{})
	defer pool.Close()
	iso, err := mcpsrc.NewIsolated(pool, per, mcpsrc.IsolatedOptions{
		Identity:       func(ctx context.Context) string { s, _ := ctx.Value(identityKey{}).(string); return s },
		MaxPerIdentity: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer iso.Close()
	ctx, cancel := context.WithTimeout(as("alice"), 30*time.Second)
	defer cancel()
	if _, err := iso.CallTool(ctx, "a", &mcp.CallToolParams{Name: "t"}); err != nil {
		t.Fatal(err)
	}
	if _, err := iso.CallTool(ctx, "b", &mcp.CallToolParams{Name: "t"}); !errors.Is(err, mcpsrc.ErrTooManyBackends) {
		t.Fatalf("alice's second backend past MaxPerIdentity 1: %v", err)
	}
	bctx, cancel := context.WithTimeout(as("bob"), 30*time.Second)
	defer cancel()
	if _, err := iso.CallTool(bctx, "b", &mcp.CallToolParams{Name: "t"}); err != nil {
		t.Fatalf("bob is not bound by alice's share: %v", err)
	}
}

// TestIsolatedStartsPaced: backends start in their turn
// (StartsPerSecond); a call whose deadline would pass before its turn is
// refused ErrTooManyBackends at once, one whose deadline leaves room
// waits for it, and calls on a running backend are not paced.
func TestIsolatedStartsPaced(t *testing.T) {
	iso := pacedIsolated(t, 1.0/3600)
	if err := callA(iso, "alice", 30*time.Second); err != nil {
		t.Fatal(err)
	}
	// The next start's turn is an hour away.
	if err := callA(iso, "bob", 30*time.Second); !errors.Is(err, mcpsrc.ErrTooManyBackends) || !strings.Contains(err.Error(), "before its turn") {
		t.Fatalf("bob's start before its turn, past his deadline: %v, want ErrTooManyBackends", err)
	}
	if total, _ := iso.Backends(""); total != 1 {
		t.Fatalf("%d backends, want alice's alone", total)
	}
	if err := callA(iso, "alice", 30*time.Second); err != nil {
		t.Fatalf("alice's call on her running backend: %v", err)
	}
}

// TestIsolatedStartWaitsItsTurn: a call whose deadline leaves room waits
// for its turn to start a backend, and concurrent calls of one identity
// wait for one turn (the others' turns are not used up).
func TestIsolatedStartWaitsItsTurn(t *testing.T) {
	// A turn every 2 s, none at first but alice's: carol's start waits
	// one turn.
	iso := pacedIsolated(t, 0.5)
	if err := callA(iso, "alice", 60*time.Second); err != nil {
		t.Fatal(err)
	}
	// Four calls of carol at once, 5 s deadlines: they wait for one turn
	// (2 s away). Had each taken a turn, the third and the fourth (6 and
	// 8 s away) would have been refused at once.
	errs := make(chan error, 4)
	for range 4 {
		go func() { errs <- callA(iso, "carol", 5*time.Second) }()
	}
	for range 4 {
		if err := <-errs; err != nil {
			t.Fatalf("carol's calls, her deadline leaving room for a turn: %v", err)
		}
	}
	if total, _ := iso.Backends(""); total != 2 {
		t.Fatalf("%d backends, want alice's and carol's", total)
	}
	start := time.Now()
	if err := callA(iso, "dave", 60*time.Second); err != nil {
		t.Fatal(err)
	}
	t.Logf("dave's start waited %v (a turn every 2 s)", time.Since(start).Round(time.Millisecond))
	if total, _ := iso.Backends(""); total != 3 {
		t.Fatalf("%d backends, want 3", total)
	}
}

// TestIsolatedCancelledWaitsUseNoTurn: calls that give up waiting for a
// turn to start a backend use none, so the next call's turn is not
// pushed back (the seventeenth hostile pass: turns reserved ahead and
// cancelled out of order put the next start a minute away).
func TestIsolatedCancelledWaitsUseNoTurn(t *testing.T) {
	iso := pacedIsolated(t, 2)
	if err := callA(iso, "alice", 30*time.Second); err != nil {
		t.Fatal(err)
	}
	// 100 identities' calls wait for a turn and give up.
	var wg sync.WaitGroup
	for n := range 100 {
		wg.Go(func() {
			ctx, cancel := context.WithCancel(as(fmt.Sprint("d", n)))
			time.AfterFunc(5*time.Millisecond, cancel)
			if _, err := iso.CallTool(ctx, "a", &mcp.CallToolParams{Name: "t"}); err == nil {
				t.Errorf("d%d: a backend started within 5 ms, the burst used", n)
			}
		})
	}
	wg.Wait()
	// Carol's turn is half a second away at most, within her deadline.
	if err := callA(iso, "carol", 5*time.Second); err != nil {
		t.Fatalf("carol's start after 100 waits given up: %v", err)
	}
}

// pacedIsolated is an Isolated of one per-identity server "a" (tool "t")
// whose backends start startsPerSecond after a burst of one, closed with
// t.
func pacedIsolated(t *testing.T, startsPerSecond float64) *mcpsrc.Isolated {
	t.Helper()
	bin := testmcp.Binary(t)
	tools := filepath.Join(t.TempDir(), "tools.json")
	testmcp.WriteTools(t, tools, []testmcp.Tool{{Name: "t", Description: "a tool"}})
	cfg, err := mcpsrc.ParseConfig([]byte(`{"mcpServers":{"a":{"command":"` + bin + `","args":["--tools","` + tools + `"]}}}`))
	if err != nil {
		t.Fatal(err)
	}
	listing, per, err := cfg.Isolate(mcpsrc.IsolationPerIdentity)
	if err != nil {
		t.Fatal(err)
	}
	pool := mcpsrc.Open(listing, mcpsrc.Options{})
	t.Cleanup(func() { _ = pool.Close() })
	iso, err := mcpsrc.NewIsolated(pool, per, mcpsrc.IsolatedOptions{
		Identity:        func(ctx context.Context) string { s, _ := ctx.Value(identityKey{}).(string); return s },
		StartsPerSecond: startsPerSecond, StartBurst: 1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = iso.Close() })
	return iso
}

// callA calls tool t of server a on iso as who, within d.
func callA(iso *mcpsrc.Isolated, who string, d time.Duration) error {
	ctx, cancel := context.WithTimeout(as(who), d)
	defer cancel()
	_, err := iso.CallTool(ctx, "a", &mcp.CallToolParams{Name: "t"})
	return err
}
