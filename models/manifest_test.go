package models

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const goodManifest = `{"name":"m","inputs":{"input_ids":"a","attention_mask":"b"},"output":"o","pooling":"mean","dims":8,"max_tokens":16}`

func TestParseManifest(t *testing.T) {
	m, err := ParseManifest([]byte(goodManifest))
	if err != nil {
		t.Fatalf("good manifest: got %v, want nil", err)
	}
	want := Manifest{Name: "m", Inputs: Inputs{InputIDs: "a", AttentionMask: "b"}, Output: "o", Pooling: PoolMean, Dims: 8, MaxTokens: 16}
	if *m != want {
		t.Fatalf("got %+v, want %+v", *m, want)
	}

	edit := func(old, new string) string {
		if !strings.Contains(goodManifest, old) {
			t.Fatalf("test bug: %q not in the good manifest", old)
		}
		return strings.Replace(goodManifest, old, new, 1)
	}
	for _, tc := range []struct {
		name, data, wantMsg string
	}{
		{"bad json", `{`, "unexpected end"},
		{"not an object", `[]`, "cannot unmarshal"},
		{"wrong type", edit(`"dims":8`, `"dims":"8"`), "cannot unmarshal"},
		{"empty", `{}`, "name is empty"},
		{"no name", edit(`"name":"m"`, `"name":""`), "name is empty"},
		{"no input ids", edit(`"input_ids":"a"`, `"input_ids":""`), "input_ids"},
		{"no attention mask", edit(`"attention_mask":"b"`, `"attention_mask":""`), "attention_mask"},
		{"missing output", edit(`"output":"o",`, ``), "output is empty"},
		{"bad pooling", edit(`"mean"`, `"max"`), `pooling "max"`},
		{"no pooling", edit(`"pooling":"mean",`, ``), `pooling ""`},
		{"zero dims", edit(`"dims":8`, `"dims":0`), "dims 0"},
		{"negative dims", edit(`"dims":8`, `"dims":-3`), "dims -3"},
		{"huge dims", edit(`"dims":8`, `"dims":9000`), "dims 9000"},
		{"zero max tokens", edit(`"max_tokens":16`, `"max_tokens":0`), "max_tokens 0"},
		{"huge max tokens", edit(`"max_tokens":16`, `"max_tokens":100000`), "max_tokens 100000"},
		{"negative pad id", edit(`"max_tokens":16}`, `"max_tokens":16,"pad_id":-1}`), "pad_id -1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m, err := ParseManifest([]byte(tc.data))
			if !errors.Is(err, ErrBadManifest) || m != nil {
				t.Fatalf("got %v, %v; want nil, ErrBadManifest", m, err)
			}
			if !strings.Contains(err.Error(), tc.wantMsg) {
				t.Fatalf("got %q, want it to mention %q", err, tc.wantMsg)
			}
		})
	}
}

// TestCommittedManifests parses every manifest in models/: they ship.
func TestCommittedManifests(t *testing.T) {
	paths, err := filepath.Glob("*.json")
	if err != nil || len(paths) == 0 {
		t.Fatalf("got %v, %v; want the committed manifests", paths, err)
	}
	for _, p := range paths {
		t.Run(filepath.Base(p), func(t *testing.T) {
			data, err := os.ReadFile(p)
			if err != nil {
				t.Fatal(err)
			}
			m, err := ParseManifest(data)
			if err != nil {
				t.Fatal(err)
			}
			if want := strings.TrimSuffix(filepath.Base(p), ".json"); m.Name != want {
				t.Errorf("name: got %q, want %q (the file name)", m.Name, want)
			}
			// A misspelt key would be silently ignored by encoding/json.
			var raw map[string]json.RawMessage
			if err := json.Unmarshal(data, &raw); err != nil {
				t.Fatal(err)
			}
			back, _ := json.Marshal(m)
			var known map[string]json.RawMessage
			_ = json.Unmarshal(back, &known)
			for _, optional := range []string{"prefix", "lowercase", "model_sha256"} {
				known[optional] = nil
			}
			for k := range raw {
				if _, ok := known[k]; !ok {
					t.Errorf("unknown key %q", k)
				}
			}
		})
	}
}

func TestReadManifest(t *testing.T) {
	dir := t.TempDir()
	if _, err := ReadManifest(dir); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("no manifest.json: got %v, want os.ErrNotExist", err)
	}
	if err := os.WriteFile(filepath.Join(dir, ManifestFile), []byte(`{"name":1}`), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := ReadManifest(dir); !errors.Is(err, ErrBadManifest) {
		t.Fatalf("bad manifest.json: got %v, want ErrBadManifest", err)
	}
	if err := os.WriteFile(filepath.Join(dir, ManifestFile), []byte(goodManifest), 0o644); err != nil {
		t.Fatal(err)
	}
	if m, err := ReadManifest(dir); err != nil || m.Name != "m" {
		t.Fatalf("good manifest.json: got %v, %v", m, err)
	}
}

func FuzzParseManifest(f *testing.F) {
	f.Add([]byte(goodManifest))
	f.Add([]byte(`{"name":"x","inputs":{},"dims":1e400}`))
	f.Add([]byte(`null`))
	if data, err := os.ReadFile("use-lite-en.json"); err == nil {
		f.Add(data)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		m, err := ParseManifest(data)
		if err != nil {
			if !errors.Is(err, ErrBadManifest) {
				t.Fatalf("got %v, want ErrBadManifest", err)
			}
			return
		}
		if err := m.Validate(); err != nil {
			t.Fatalf("parsed manifest fails Validate: %v", err)
		}
		// What it parsed to round-trips.
		back, err := json.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		m2, err := ParseManifest(back)
		if err != nil || *m2 != *m {
			t.Fatalf("round trip: got %+v, %v; want %+v", m2, err, m)
		}
	})
}

// TestLabelPrefix: label texts get the passage prefix only with
// passage_labels; requests always get the query prefix.
func TestLabelPrefix(t *testing.T) {
	cases := []struct {
		name             string
		m                Manifest
		request, label   string
		wantValidateFail bool
	}{
		{"e5, symmetric", Manifest{QueryPrefix: "query: ", PassagePrefix: "passage: "}, "query: a b", "query: a b", false},
		{"e5, passage labels", Manifest{QueryPrefix: "query: ", PassagePrefix: "passage: ", PassageLabels: true}, "query: a b", "passage: a b", false},
		{"older prefix field", Manifest{Prefix: "query: "}, "query: a b", "query: a b", false},
		{"no prefixes", Manifest{}, "a b", "a b", false},
		{"passage labels without a passage prefix", Manifest{QueryPrefix: "query: ", PassageLabels: true}, "query: a b", "a b", true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			m := tc.m
			m.Name, m.Inputs, m.Output, m.Pooling, m.Dims, m.MaxTokens = "x", Inputs{InputIDs: "i", AttentionMask: "m"}, "o", PoolMean, 8, 8
			m.CollapseWhitespace = true
			if got := m.NormalizeText("  a \t b "); got != tc.request {
				t.Errorf("NormalizeText = %q, want %q", got, tc.request)
			}
			if got := m.NormalizeLabel("a  b"); got != tc.label {
				t.Errorf("NormalizeLabel = %q, want %q", got, tc.label)
			}
			if err := m.Validate(); (err != nil) != tc.wantValidateFail {
				t.Errorf("Validate() = %v, want failure %v", err, tc.wantValidateFail)
			}
		})
	}
}
