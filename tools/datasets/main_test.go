package main

import (
	"archive/zip"
	"encoding/json"
	"math/rand"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func TestCompoundQueries(t *testing.T) {
	qs := []query{
		{Text: "What is the weather in Paris?", Servers: []string{"W"}, Tools: []string{"W/W"}},
		{Text: "Find me a flight to Rome.", Servers: []string{"T"}, Tools: []string{"T/T"}},
		{Text: "I'm hungry, any recipes?", Servers: []string{"R"}, Tools: []string{"R/R"}},
		{Text: "Will it rain tomorrow?", Servers: []string{"W"}, Tools: []string{"W/W"}},
		{Text: "NASA news please", Servers: []string{"N"}, Tools: []string{"N/N"}},
		{Text: "Book a hotel", Servers: []string{"T"}, Tools: []string{"T/T"}},
	}
	out := compoundQueries(qs, 10, rand.New(rand.NewSource(1)))
	if len(out) == 0 || len(out) > len(qs)/2 {
		t.Fatalf("got %d compound queries from %d, want 1..%d (each query used once)", len(out), len(qs), len(qs)/2)
	}
	used := map[string]int{}
	for _, q := range out {
		if q.Kind != "multi" || len(q.Tools) != 2 || len(q.Servers) != 2 || q.Tools[0] == q.Tools[1] {
			t.Errorf("%q: kind %q tools %v servers %v, want two different tools", q.Text, q.Kind, q.Tools, q.Servers)
		}
		for _, s := range qs {
			// Each half is in the text (first letter and final stop may change).
			if strings.Contains(strings.ToLower(q.Text), strings.ToLower(strings.TrimRight(s.Text, ".?! ")[1:])) {
				used[s.Text]++
			}
		}
	}
	if len(used) != 2*len(out) {
		t.Errorf("halves used %v, want each of %d queries once", used, 2*len(out))
	}
	for s, n := range used {
		if n != 1 {
			t.Errorf("%q used %d times", s, n)
		}
	}
	again := compoundQueries(qs, 10, rand.New(rand.NewSource(1)))
	for i := range out {
		if again[i].Text != out[i].Text {
			t.Fatalf("same seed, different output: %q vs %q", again[i].Text, out[i].Text)
		}
	}
	if n := len(compoundQueries(qs, 1, rand.New(rand.NewSource(1)))); n != 1 {
		t.Errorf("n=1 gave %d queries", n)
	}
}

func TestLowerFirst(t *testing.T) {
	for in, want := range map[string]string{
		"Can you help?":     "can you help?",
		"I need a flight":   "I need a flight",
		"I'm looking":       "I'm looking",
		"NASA news":         "NASA news",
		"Is it raining":     "is it raining",
		"already lowercase": "already lowercase",
		"":                  "",
	} {
		if got := lowerFirst(in); got != want {
			t.Errorf("lowerFirst(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestHassIntents converts a small wheel-shaped zip: the English catalog
// gets examples, every language its queries (kind = language), templates
// needing an entity list are skipped, and the output is the same for the
// same seed.
func TestHassIntents(t *testing.T) {
	dir := t.TempDir()
	whl := filepath.Join(dir, "home_assistant_intents-0-py3-none-any.whl")
	f, err := os.Create(whl)
	if err != nil {
		t.Fatal(err)
	}
	z := zip.NewWriter(f)
	files := map[string]string{
		"home_assistant_intents/intents.json": `{"HassTurnOn": {"supported": true, "description": "Turns on a device"},
			"HassGetWeather": {"supported": true, "description": "Gets the weather"},
			"HassOld": {"supported": false, "description": "gone"}}`,
		"home_assistant_intents/data/en.json": `{"language": "en", "intents": {
			"HassTurnOn": {"data": [{"sentences": ["(turn|switch) on [the] (light|lights|lamp) [<here>]", "turn on {name}"]}]},
			"HassGetWeather": {"data": [{"sentences": ["what is the weather [like] [today|tomorrow]", "(weather;now)"]}]},
			"HassOld": {"data": [{"sentences": ["old (a|b|c|d)"]}]}},
			"lists": {}, "expansion_rules": {"here": "(here|in this room)"}}`,
		"home_assistant_intents/data/de.json": `{"language": "de", "intents": {
			"HassTurnOn": {"data": [{"sentences": ["schalte [das] Licht {state}"]}]},
			"HassGetWeather": {"data": [{"sentences": ["wie ist das Wetter [heute]"]}]}},
			"lists": {"state": {"values": [{"in": "an", "out": "on"}, "ein"]}}, "expansion_rules": {}}`,
	}
	for name, body := range files {
		w, err := z.Create(name)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := w.Write([]byte(body)); err != nil {
			t.Fatal(err)
		}
	}
	if err := z.Close(); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	convert := func(out string) ([]byte, []byte) {
		t.Helper()
		var log strings.Builder
		if err := run([]string{"-in", whl, "-format", "hass-intents", "-out", out, "-examples-per-intent", "2", "-queries-per-intent", "2"}, &log); err != nil {
			t.Fatal(err)
		}
		cat, err := os.ReadFile(filepath.Join(out, "hass-intents.catalog.json"))
		if err != nil {
			t.Fatal(err)
		}
		qs, err := os.ReadFile(filepath.Join(out, "hass-intents.test.jsonl"))
		if err != nil {
			t.Fatal(err)
		}
		return cat, qs
	}
	cat, qs := convert(filepath.Join(dir, "a"))
	var c catalogOut
	if err := json.Unmarshal(cat, &c); err != nil {
		t.Fatal(err)
	}
	if len(c.Categories) != 2 {
		t.Fatalf("catalog %s: want HassGetWeather and HassTurnOn (HassOld is unsupported)", cat)
	}
	for _, cat := range c.Categories {
		if len(cat.Examples) != 2 || cat.Description == "" {
			t.Errorf("%s: %d examples, description %q; want 2 and the English description", cat.ID, len(cat.Examples), cat.Description)
		}
	}
	perLang := map[string]int{}
	for _, line := range strings.Split(strings.TrimSpace(string(qs)), "\n") {
		var q query
		if err := json.Unmarshal([]byte(line), &q); err != nil {
			t.Fatal(err)
		}
		perLang[q.Kind]++
		if strings.ContainsAny(q.Text, "[]()|<>{}") || strings.Contains(q.Text, "  ") {
			t.Errorf("%q: template syntax or double spaces left", q.Text)
		}
		if q.Kind == "de" && q.Categories[0] == "HassTurnOn" && !strings.HasSuffix(q.Text, " an") && !strings.HasSuffix(q.Text, " ein") {
			t.Errorf("%q: the {state} list was not filled", q.Text)
		}
		for _, ex := range c.Categories {
			if q.Kind == "en" && slices.Contains(ex.Examples, q.Text) {
				t.Errorf("English query %q is also a catalog example", q.Text)
			}
		}
	}
	if perLang["en"] != 4 || perLang["de"] != 4 {
		t.Errorf("queries per language %v, want 4 English and 4 German", perLang)
	}
	if cat2, qs2 := convert(filepath.Join(dir, "b")); string(cat2) != string(cat) || string(qs2) != string(qs) {
		t.Error("same seed, different output")
	}
}
