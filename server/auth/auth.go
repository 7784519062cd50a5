// Package auth holds the bearer tokens classifierd accepts: read from a
// token file, compared in constant time, swapped whole on reload. It knows
// nothing of gRPC; server/ turns its answers into status codes.
package auth

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"crypto/subtle"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"sync/atomic"
)

// Scopes a token may carry.
const (
	ScopeRoute    = "route"    // Classify, Route, Embed, AnalyzePrompt, DetectContexts, GetIndexInfo
	ScopeSessions = "sessions" // hub sessions: CreateSession ... WatchExposure, AnalyzePrompt with a session
	ScopeTerminal = "terminal" // terminal.v1.TerminalService
	// ScopeCall calls tools of the real MCP servers behind classifierd:
	// call_tool (the daemon's and the proxy's) and the servers' tools the
	// proxy shows. It is apart from route, which only ranks tools, as it
	// can do whatever those tools do (write files, open issues).
	ScopeCall = "call"
	// ScopeReport reports what agents called (ReportUse), which changes
	// every later answer: only trusted reporters (the hub, the proxy)
	// should hold it. ReportUse needs route too.
	ScopeReport = "report"
	ScopeAdmin  = "admin" // GetStats, ExportLearning, ResetLearning and anything not listed
)

// AllScopes lists every scope; "*" in a token file grants them all.
var AllScopes = []string{ScopeRoute, ScopeSessions, ScopeTerminal, ScopeCall, ScopeReport, ScopeAdmin}

// MaxFileBytes bounds a token file.
const MaxFileBytes = 1 << 20

// Errors of the token file.
var (
	ErrFile = errors.New("auth: bad token file")
)

// Identity is who a call comes from and what it may do.
type Identity struct {
	Name   string
	Scopes []string
}

// Has reports whether the identity holds scope.
func (id Identity) Has(scope string) bool { return slices.Contains(id.Scopes, scope) }

type entry struct {
	sum [sha256.Size]byte
	id  Identity
}

// Tokens is a reloadable set of bearer tokens. Safe for concurrent use.
type Tokens struct {
	path string
	set  atomic.Pointer[[]entry]
}

// Load reads the token file at path. Each non-empty line not starting
// with '#' is "NAME SCOPES TOKEN": SCOPES is a comma-separated list of
// route, sessions, terminal, call, report, admin, or "*". The file must be a
// regular file that only its owner may read (0600 or 0400): it holds
// secrets.
func Load(path string) (*Tokens, error) {
	t := &Tokens{path: path}
	if err := t.Reload(); err != nil {
		return nil, err
	}
	return t, nil
}

// Reload reads the file again and swaps the set in whole; on error the
// set in use stays.
func (t *Tokens) Reload() error {
	es, err := read(t.path)
	if err != nil {
		return err
	}
	t.set.Store(&es)
	return nil
}

// Len is the number of tokens in use.
func (t *Tokens) Len() int { return len(*t.set.Load()) }

// Lookup returns the identity of token. Every entry is compared, in
// constant time over SHA-256 digests, so the time taken says nothing of
// which token nearly matched.
func (t *Tokens) Lookup(token string) (Identity, bool) {
	sum := sha256.Sum256([]byte(token))
	var found Identity
	ok := 0
	for _, e := range *t.set.Load() {
		if subtle.ConstantTimeCompare(sum[:], e.sum[:]) == 1 {
			found, ok = e.id, 1
		}
	}
	return found, ok == 1 && token != ""
}

func read(path string) ([]entry, error) {
	f, err := os.OpenFile(path, os.O_RDONLY, 0)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrFile, err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrFile, err)
	}
	if !st.Mode().IsRegular() {
		return nil, fmt.Errorf("%w: %s is not a regular file", ErrFile, path)
	}
	if st.Mode().Perm()&0o077 != 0 {
		return nil, fmt.Errorf("%w: %s is readable by others (mode %o); chmod 600 it", ErrFile, path, st.Mode().Perm())
	}
	data, err := io.ReadAll(io.LimitReader(f, MaxFileBytes+1))
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrFile, err)
	}
	if len(data) > MaxFileBytes {
		return nil, fmt.Errorf("%w: %s is larger than %d bytes", ErrFile, path, MaxFileBytes)
	}
	return parse(data)
}

func parse(data []byte) ([]entry, error) {
	var out []entry
	names := map[string]bool{}
	sc := bufio.NewScanner(bytes.NewReader(data))
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		f := strings.Fields(line)
		if len(f) != 3 {
			// The line may hold a token: never echo it.
			return nil, fmt.Errorf("%w: line %d: want NAME SCOPES TOKEN", ErrFile, n)
		}
		name, scopes, token := f[0], f[1], f[2]
		if names[name] {
			return nil, fmt.Errorf("%w: line %d: name %q used twice", ErrFile, n, name)
		}
		names[name] = true
		if len(token) < 16 {
			return nil, fmt.Errorf("%w: line %d (%s): token shorter than 16 characters", ErrFile, n, name)
		}
		id := Identity{Name: name}
		if scopes == "*" {
			id.Scopes = slices.Clone(AllScopes)
		} else {
			for _, s := range strings.Split(scopes, ",") {
				if !slices.Contains(AllScopes, s) {
					return nil, fmt.Errorf("%w: line %d (%s): unknown scope %q (want %s or *)", ErrFile, n, name, s, strings.Join(AllScopes, ", "))
				}
				id.Scopes = append(id.Scopes, s)
			}
		}
		out = append(out, entry{sum: sha256.Sum256([]byte(token)), id: id})
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrFile, err)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%w: no tokens", ErrFile)
	}
	return out, nil
}
