package learn

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"sync"

	"github.com/classifierd/classifierd/index"
)

// View is the learner as one served index sees it: its key, and its
// servers and tools by label with each tool's content hash. It is made
// once per index (Learner.View) and immutable.
type View struct {
	l   *Learner
	key string
	idx *index.Index
	// server ids by label, and labels by server id or name.
	srvOf  map[string]int
	toolOf map[ToolRef]int
	// hash is each tool label's content hash.
	hash map[int]string
	// servers are the catalog's server ids; toolCount its tools per
	// server id.
	servers   []string
	toolCount map[string]int
	// slotOf numbers srvOf's names densely (its keys, in label order):
	// a request tallies the tasks like this one per slot, in slices,
	// since no other name's tally is ever read (part.server, Called);
	// slotLi is each slot's label.
	slotOf map[string]int32
	slotLi []int

	// fits are the fits of the callers that asked lately (fitFor).
	fitMu sync.Mutex
	fits  map[string]*fit
	// fitting are the keys being refitted (cachedFit); nearUsed is what
	// the fits' tallies keep of their records (maxNearBytes).
	fitting  map[string]bool
	nearUsed int64
}

// ToolHash is the content hash of a tool's definition: its name,
// description and input schema. A tool whose hash changes is learned
// again from nothing.
func ToolHash(l *index.Label) string {
	h := sha256.New()
	fmt.Fprintf(h, "%s\x00%s\x00%s\x00", l.Server, l.Name, l.Description)
	h.Write(l.InputSchema)
	return hex.EncodeToString(h.Sum(nil)[:8])
}

// View returns the learner's view of idx. Safe on a nil Learner (learning
// off): the view is nil, and a nil view learns and tells nothing.
func (l *Learner) View(idx *index.Index) *View {
	if l == nil {
		return nil
	}
	v := &View{l: l, key: Key(idx.Fingerprint, l.cfg.Scope), idx: idx, srvOf: map[string]int{}, toolOf: map[ToolRef]int{}, hash: map[int]string{},
		toolCount: map[string]int{}, fits: map[string]*fit{}, fitting: map[string]bool{}}
	for _, li := range idx.LabelsOf(index.KindServer) {
		lb := &idx.Labels[li]
		v.servers = append(v.servers, lb.ID)
		v.srvOf[lb.ID] = li
		if n := idx.ServerName(lb.ID); n != "" {
			if _, taken := v.srvOf[n]; !taken {
				v.srvOf[n] = li
			}
		}
	}
	v.slotOf = map[string]int32{}
	for _, li := range idx.LabelsOf(index.KindServer) {
		lb := &idx.Labels[li]
		for _, s := range []string{lb.ID, idx.ServerName(lb.ID)} {
			if _, done := v.slotOf[s]; !done && s != "" && v.srvOf[s] == li {
				v.slotOf[s] = int32(len(v.slotLi))
				v.slotLi = append(v.slotLi, li)
			}
		}
	}
	for _, li := range idx.LabelsOf(index.KindTool) {
		lb := &idx.Labels[li]
		v.toolOf[ToolRef{Server: lb.Server, Name: lb.Name}] = li
		v.hash[li] = ToolHash(lb)
		v.toolCount[lb.Server]++
	}
	return v
}

// Key is the key the view's reports are kept under.
func (v *View) Key() string { return v.key }
