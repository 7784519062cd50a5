package rank

import (
	"slices"
	"testing"
)

func TestFindCues(t *testing.T) {
	for _, tc := range []struct {
		text string
		want []string
	}{
		{"Check my GitHub notifications and list recent issues", nil},
		{"what a lovely day", nil},
		{"and save it as Markdown to /root/markdown/report.md", []string{CueFileWrite}},
		{"Read the CSV at ./data/sales.csv and tell me the average sale", []string{CueFileRead, CueMath}},
		{"summarise https://blog.golang.org/ for me", []string{CueURL}},
		{"Open https://example.com/signup in the browser, fill in the form and click submit", []string{CueBrowser}},
		{"I weigh 72 kg and I'm 1.80 m tall, tell me her BMI", []string{CueMath}},
		{"what is 17 * 23?", []string{CueMath}},
		{"the meeting is on 2024-05-01", nil},
		{"What time is it in Tokyo right now?", []string{CueTime}},
		{"book a table for next Wednesday", []string{CueDate}},
		{"email the report to coach@example.com", []string{CueEmail}},
		{"run `npm test` in ~/projects/shop", []string{CueFileRead, CueShell}},
		{"search the web for the latest Go release", []string{CueWebSearch}},
	} {
		var got []string
		for _, c := range findCues(tc.text) {
			got = append(got, c.Kind)
			if c.Text == "" || c.Match == "" {
				t.Errorf("%q: cue %+v without text or match", tc.text, c)
			}
		}
		if !slices.Equal(got, tc.want) {
			t.Errorf("%q: got cues %v, want %v", tc.text, got, tc.want)
		}
	}
}

func TestCuesNeverCountTowardsBest(t *testing.T) {
	ts := append([]Turn{{Text: "x", Weight: 1}}, Cues("save it to /tmp/a.md")...)
	if len(ts) != 2 || ts[1].Cue == nil {
		t.Fatalf("got %d turns, want the prompt and one cue", len(ts))
	}
	rows := []Score{{Label: 0, Score: 0.2}, {Label: 0, Score: 0.9}}
	if got := bestOfRows(rows, 1, ts); got[0].Score != 0.2 {
		t.Errorf("best over a prompt at 0.2 and a cue at 0.9: got %v, want 0.2", got[0].Score)
	}
}
