package session

import (
	"slices"

	"github.com/classifierd/classifierd/index"
)

// Tools returns the index's tools (label indices, in index order) that a
// session with these exposed categories sees: a tool is listed when its
// category is exposed. It is the filter behind ListTools.
func Tools(idx *index.Index, exposed []string) []int {
	var out []int
	for _, li := range idx.LabelsOf(index.KindTool) {
		if slices.Contains(exposed, idx.Labels[li].Category) {
			out = append(out, li)
		}
	}
	return out
}
