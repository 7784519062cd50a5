package terminal

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
)

// costPrompts are the prompts of the ninth hostile pass: a 40-byte
// ordinary one and 4 KB ones built by repeating a unit (secret-shaped
// words, ordinary words).
var costPrompts = []struct{ name, prompt string }{
	{"40B", "Do you want to continue with install? y/n"},
	{"4KB-secretish", strings.Repeat("p@55w0rd ", 4096/9)},
	{"4KB-words", strings.Repeat("continue ", 4096/9)},
}

// BenchmarkRecordEvent is one TrackInputEvent's store work (check, judge,
// mask, insert into SQLite) by prompt.
func BenchmarkRecordEvent(b *testing.B) {
	for _, c := range costPrompts {
		b.Run(c.name, func(b *testing.B) {
			s, err := OpenStore(filepath.Join(b.TempDir(), "t.db"), StoreConfig{})
			if err != nil {
				b.Fatal(err)
			}
			defer s.Close()
			ctx := context.Background()
			b.ReportAllocs()
			for i := 0; i < b.N; i++ {
				if _, _, err := s.Record(ctx, Event{SessionID: "s", PromptText: c.prompt, Input: strings.Repeat("y", 4096), Success: true,
					Source: "user_typed", PromptType: TypeYesNo}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkHistoryEvent is GetSessionHistory's store work per event read
// (b.N events in a 1000-event session).
func BenchmarkHistoryEvent(b *testing.B) {
	for _, c := range costPrompts {
		b.Run(c.name, func(b *testing.B) {
			s, err := OpenStore(filepath.Join(b.TempDir(), "t.db"), StoreConfig{})
			if err != nil {
				b.Fatal(err)
			}
			defer s.Close()
			ctx := context.Background()
			for i := 0; i < 100; i++ {
				if _, _, err := s.Record(ctx, Event{SessionID: "s", PromptText: c.prompt, Input: strings.Repeat("y", 4096), Success: true,
					Source: "user_typed", PromptType: TypeYesNo}); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i += 100 {
				evs, err := s.History(ctx, "s", 100)
				if err != nil || len(evs) != 100 {
					b.Fatal(len(evs), err)
				}
			}
		})
	}
}

// BenchmarkPrepare is the judging alone (no SQLite): secret rules,
// masking, pattern key, by prompt, with a short typed answer.
func BenchmarkPrepare(b *testing.B) {
	c, err := newStoreCore(StoreConfig{})
	if err != nil {
		b.Fatal(err)
	}
	for _, p := range costPrompts {
		b.Run(p.name, func(b *testing.B) {
			b.ReportAllocs()
			for i := 0; i < b.N; i++ {
				if _, _, err := c.prepare(Event{SessionID: "s", PromptText: p.prompt, Input: "y", Success: true,
					Source: "user_typed", PromptType: TypeYesNo}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
