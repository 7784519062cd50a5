package terminal

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"
)

// TestHistoryJudgesOldRowsOnceAndBounded: events stored before verdicts
// were kept (rules 0: an answer to "Passwort:" in clear, an ordinary
// answer) are judged again when read, at most MaxRejudge a call, the rest
// returned redacted; the verdicts are written back, so the next read
// returns them judged and judges none again. Events recorded now carry
// the verdict and are returned as stored.
func TestHistoryJudgesOldRowsOnceAndBounded(t *testing.T) {
	s, err := OpenStore(filepath.Join(t.TempDir(), "t.db"), StoreConfig{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx := context.Background()
	const old = MaxRejudge + 10
	now := time.Now().Add(-time.Hour)
	for i := range old {
		prompt, input := "Name:", fmt.Sprint("kept", i)
		if i%2 == 0 {
			prompt, input = "Passwort:", fmt.Sprint("qZold", i)
		}
		if _, err := s.db.Exec(`INSERT INTO events(id, session_id, prompt_text, input_text, success, input_source, response_time_ms, created_at, prompt_type, pattern_key)
			VALUES (?,?,?,?,1,'user_typed',0,?,?,?)`, fmt.Sprint("old", i), "s", prompt, input, now.Add(time.Duration(i)*time.Millisecond).UnixNano(), TypeText, PatternKey(prompt)); err != nil {
			t.Fatal(err)
		}
	}
	if _, _, err := s.Record(ctx, Event{SessionID: "s", PromptText: "Continue? [y/N]", Input: "y", Success: true, Source: "user_typed", PromptType: TypeYesNo}); err != nil {
		t.Fatal(err)
	}
	judged := func() int {
		var n int
		if err := s.db.QueryRow(`SELECT COUNT(*) FROM events WHERE rules >= ?`, SecretRules).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	if got := judged(); got != 1 {
		t.Fatalf("%d events carry a verdict before any read, want 1 (the one recorded now)", got)
	}
	check := func(read int) (redactedOrdinary int) {
		evs, err := s.History(ctx, "s", 1000)
		if err != nil || len(evs) != old+1 {
			t.Fatalf("read %d: %d events, %v", read, len(evs), err)
		}
		for i, e := range evs[:old] {
			if i%2 == 0 && e.Input != Redacted {
				t.Errorf("read %d: the answer to Passwort: returned as %q", read, e.Input)
			}
			if i%2 == 1 && e.Input != fmt.Sprint("kept", i) {
				if e.Input != Redacted || e.PromptText != SecretMask {
					t.Errorf("read %d: ordinary event %d returned as %q %q", read, i, e.PromptText, e.Input)
				}
				redactedOrdinary++
			}
		}
		if last := evs[old]; last.Input != "y" || last.PromptText != "Continue? [y/N]" {
			t.Errorf("read %d: the event recorded now returned as %q %q", read, last.PromptText, last.Input)
		}
		return redactedOrdinary
	}
	if n := check(1); n != (old-MaxRejudge)/2 {
		t.Errorf("first read returned %d ordinary answers redacted (past MaxRejudge), want %d", n, (old-MaxRejudge)/2)
	}
	if got := judged(); got != MaxRejudge+1 {
		t.Errorf("%d events carry a verdict after one read, want %d", got, MaxRejudge+1)
	}
	if n := check(2); n != 0 {
		t.Errorf("second read returned %d ordinary answers redacted, want 0", n)
	}
	if got := judged(); got != old+1 {
		t.Errorf("%d events carry a verdict after two reads, want %d", got, old+1)
	}
	var clear int
	if err := s.db.QueryRow(`SELECT COUNT(*) FROM events WHERE input_text LIKE 'qZold%'`).Scan(&clear); err != nil || clear != 0 {
		t.Errorf("%d old secrets still stored in clear after they were read (%v)", clear, err)
	}
}
