package labels

import (
	"testing"

	"github.com/classifierd/classifierd/catalog"
	"github.com/classifierd/classifierd/index"
)

func TestRequestVectorOnlyForLoneTools(t *testing.T) {
	cat, err := catalog.Parse([]byte(`{"servers": [
	 {"id": "weather", "description": "forecasts", "tools": [{"name": "forecast", "description": "Weather forecasts for any city."}]},
	 {"id": "github", "description": "code hosting", "tools": [
	   {"name": "list_pull_requests", "description": "List open pull requests"},
	   {"name": "get_pull_request_diff", "description": "Get a pull request's diff"}]}]}`), "")
	if err != nil {
		t.Fatal(err)
	}
	got := map[string][]index.Source{}
	for _, l := range Labels(cat) {
		if l.Kind == index.KindTool {
			got[l.ID] = l.Sources
			if l.Sources[0] != index.SourceDescription {
				t.Errorf("%s: first vector is %q, want the description", l.ID, l.Sources[0])
			}
		}
	}
	if s := got["weather/forecast"]; len(s) != 2 || s[1] != index.SourceRequest {
		t.Errorf("lone tool: sources %v, want description then request", s)
	}
	for _, id := range []string{"github/list_pull_requests", "github/get_pull_request_diff"} {
		if s := got[id]; len(s) != 1 {
			t.Errorf("%s has siblings: sources %v, want the description only", id, s)
		}
	}
	if r := RequestText("  "); r != "" {
		t.Errorf("empty description: got request %q, want none", r)
	}
}
