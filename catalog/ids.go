package catalog

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"
)

// MaxNameBytes bounds a server or tool name. Names over LongName bytes are
// accepted with a warning; their derived ids are shortened.
const (
	MaxNameBytes = 1024
	LongName     = 128
	maxDerived   = 64 // bytes of a derived id before any hash suffix
)

// SafeID reports whether name can serve as a server or tool id as it is:
// 1-128 bytes of printable UTF-8 without white space or '/' (tools are
// labelled "server/tool"). These are the names catalogs could use before
// any name was accepted, so their ids have not changed.
func SafeID(name string) bool {
	if name == "" || len(name) > LongName || !utf8.ValidString(name) {
		return false
	}
	for _, r := range name {
		if r == '/' || unicode.IsSpace(r) || !unicode.IsPrint(r) {
			return false
		}
	}
	return true
}

// DeriveID returns the base id derived from a name that is not a SafeID:
// lower-cased, each run of characters outside [a-z0-9_-] replaced by "_",
// "_" trimmed from both ends, at most 64 bytes. It may be empty (a name of
// only such characters); AssignIDs then adds a hash.
func DeriveID(name string) string {
	var b strings.Builder
	under := false
	for _, r := range strings.ToLower(name) {
		if r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '_' || r == '-' {
			b.WriteRune(r)
			under = false
		} else if !under {
			b.WriteByte('_')
			under = true
		}
	}
	id := strings.Trim(b.String(), "_")
	if len(id) > maxDerived {
		id = strings.TrimRight(id[:maxDerived], "_")
	}
	return id
}

// nameHash is the short hash that disambiguates derived ids.
func nameHash(name string) string {
	sum := sha256.Sum256([]byte(name))
	return hex.EncodeToString(sum[:4])
}

// assignIDs returns an id for each name of one namespace (the servers, or
// one server's tools). A SafeID name is its own id. Any other name gets
// DeriveID(name); when that is empty or equal to another entry's id, every
// derived id in the clash gets "_" and 8 hex digits of the name's sha256.
// The result depends only on the set of names, not their order. Names must
// be distinct (Validate checks); two that still map to one id are an error
// naming both.
func assignIDs(names []string) ([]string, error) {
	ids := make([]string, len(names))
	derived := make([]bool, len(names))
	count := map[string]int{}
	for i, n := range names {
		if SafeID(n) {
			ids[i] = n
		} else {
			ids[i], derived[i] = DeriveID(n), true
		}
		count[ids[i]]++
	}
	for i, n := range names {
		if derived[i] && (ids[i] == "" || count[ids[i]] > 1) {
			if ids[i] == "" {
				ids[i] = "id"
			}
			ids[i] += "_" + nameHash(n)
		}
	}
	owner := map[string]int{}
	for i, id := range ids {
		if j, ok := owner[id]; ok {
			return nil, fmt.Errorf("%w: names %q and %q both map to id %q; rename one", ErrInvalid, names[j], names[i], id)
		}
		owner[id] = i
	}
	return ids, nil
}

// AssignIDs gives every server and tool its stable, safe id (see assignIDs)
// and keeps the verbatim names: a server's Name defaults to its catalog
// "id", a tool's Name is never changed. Parse calls it after Validate; it
// is idempotent.
func (c *Catalog) AssignIDs() error {
	names := make([]string, len(c.Servers))
	for i := range c.Servers {
		s := &c.Servers[i]
		if s.Name == "" {
			s.Name = s.ID
		}
		names[i] = s.ID
	}
	ids, err := assignIDs(names)
	if err != nil {
		return fmt.Errorf("servers: %w", err)
	}
	for i := range c.Servers {
		s := &c.Servers[i]
		s.ID = ids[i]
		tnames := make([]string, len(s.Tools))
		for j := range s.Tools {
			tnames[j] = s.Tools[j].Name
		}
		tids, err := assignIDs(tnames)
		if err != nil {
			return fmt.Errorf("server %q tools: %w", s.Name, err)
		}
		for j := range s.Tools {
			s.Tools[j].ID = tids[j]
		}
	}
	return nil
}

// StableID returns the tool's id: ID once AssignIDs has run, else its name.
func (t *Tool) StableID() string {
	if t.ID != "" {
		return t.ID
	}
	return t.Name
}

// checkName accepts any name MCP allows: non-blank UTF-8 of at most
// MaxNameBytes. Everything else about a name is a warning at most.
func checkName(name string) error {
	switch {
	case strings.TrimSpace(name) == "":
		return fmt.Errorf("empty name")
	case len(name) > MaxNameBytes:
		return fmt.Errorf("name over %d bytes", MaxNameBytes)
	case !utf8.ValidString(name):
		return fmt.Errorf("name is not valid UTF-8")
	}
	return nil
}

// Warnings lists what in a valid catalog is suspicious but indexable: ids
// derived from names that are not safe ids, servers and tools with nothing
// to embed but their name, tools sharing a description, very long names.
// gen-index prints them; none stops a build.
func (c *Catalog) Warnings() []string {
	var out []string
	descs := map[string]string{}
	for i := range c.Servers {
		s := &c.Servers[i]
		if s.Name != "" && s.Name != s.ID {
			out = append(out, fmt.Sprintf("server %q: id %q (the name is not a safe id)", s.Name, s.ID))
		}
		if len(s.Name) > LongName {
			out = append(out, fmt.Sprintf("server %q: name is %d bytes", s.Name, len(s.Name)))
		}
		if strings.TrimSpace(s.Description) == "" {
			out = append(out, fmt.Sprintf("server %q: empty description (embedded from its tools and name)", s.Name))
		}
		for j := range s.Tools {
			t := &s.Tools[j]
			where := fmt.Sprintf("tool %q on server %q", t.Name, s.Name)
			if t.StableID() != t.Name {
				out = append(out, fmt.Sprintf("%s: id %q (the name is not a safe id)", where, s.ID+"/"+t.StableID()))
			}
			if len(t.Name) > LongName {
				out = append(out, fmt.Sprintf("%s: name is %d bytes", where, len(t.Name)))
			}
			d := strings.TrimSpace(t.Description)
			if d == "" {
				if len(t.Examples) == 0 {
					out = append(out, where+": empty description and no examples (embedded from its name only)")
				}
				continue
			}
			if prev, ok := descs[d]; ok {
				out = append(out, fmt.Sprintf("%s: same description as %s", where, prev))
			} else {
				descs[d] = where
			}
		}
	}
	return out
}
