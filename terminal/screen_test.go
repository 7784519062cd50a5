package terminal

import (
	"bytes"
	"context"
	"strconv"
	"strings"
	"testing"
)

func TestRenderScreen(t *testing.T) {
	cases := []struct {
		name, raw string
		row       int
		rowText   string
		painted   bool
	}{
		{"lines", "one\ntwo\nthree? ", 2, "three?", false},
		{"carriage return rewrites", "50%\r100%", 0, "100%", false},
		{"cursor addressing", "\x1b[H\x1b[2Jtitle\x1b[5;3Hmiddle\x1b[10;1HQuit? (y or n) ", 9, "Quit? (y or n)", false},
		{"vertical position and erase", "\x1b[3daaaa\x1b[3;1H\x1b[Kbb", 2, "bb", false},
		{"alternate screen clears", "old text\x1b[?1049h\x1b[2;1Hnew", 1, "new", false},
		{"line drawing set", "\x1b(0lqqk\x1b(B", 0, "┌──┐", false},
		{"painted", strings.Repeat("\x1b[4;1Hx\x1b[5;1Hy", 5), 4, "y", true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := renderScreen([]byte(tc.raw))
			if s.row != tc.row || s.text(s.row) != tc.rowText {
				t.Fatalf("cursor row %d %q, want %d %q (screen %q)", s.row, s.text(s.row), tc.row, tc.rowText, s.all())
			}
			if s.isPainted() != tc.painted {
				t.Errorf("painted %v, want %v", s.isPainted(), tc.painted)
			}
		})
	}
}

// TestRenderScreenBounds: a hostile stream (huge coordinates, endless
// lines, long rows) costs at most maxRows rows of maxCols columns.
func TestRenderScreenBounds(t *testing.T) {
	raw := []byte("\x1b[99999;99999Hx" + strings.Repeat("y", 4*maxCols) + strings.Repeat("\n", 10*maxRows) + "\x1b[999999999999999999999d")
	s := renderScreen(raw)
	if len(s.rows) > maxRows {
		t.Fatalf("%d rows, want at most %d", len(s.rows), maxRows)
	}
	for i, r := range s.rows {
		if len(r) > maxCols {
			t.Fatalf("row %d has %d columns, want at most %d", i, len(r), maxCols)
		}
	}
}

func FuzzRenderScreen(f *testing.F) {
	f.Add([]byte("\x1b[?1049h\x1b[H\x1b[2Jhello\x1b[40;1HSave? (y or n) "))
	f.Add([]byte("\x1b(0lqk\x0e\x0fx\x1b[5X\x1b[3A\x1b[2C\x1b]0;title\x07\x1bM\x1bc"))
	f.Fuzz(func(t *testing.T, raw []byte) {
		s := renderScreen(raw)
		if len(s.rows) > maxRows || s.row < 0 || s.row >= maxRows || s.col < 0 || s.col > maxCols {
			t.Fatalf("out of bounds: %d rows, cursor %d,%d", len(s.rows), s.row, s.col)
		}
		for _, r := range s.rows {
			if len(r) > maxCols {
				t.Fatalf("row of %d columns", len(r))
			}
		}
		// The readings of a painted screen take any screen.
		if typ, name := inputBox(s); (typ == "") != (name == "") {
			t.Fatalf("input box typed %q by %q", typ, name)
		}
		bracketButtons(s)
	})
}

// TestDetectScreens: a program holding the terminal asks its question on
// the cursor's row; a curses screen painted without the alternate screen
// (TERM=linux) is waiting too.
func TestDetectScreens(t *testing.T) {
	d := fakeDetector(t)
	editor := "\x1b[?1049h\x1b[H\x1b[2Jxhello\x1b[39;1H\x1b[7m-UU-:**--F1  a.txt   All L1  (Text)\x1b[m\x1b[40;1HModified buffers exist; exit anyway? (yes or no) "
	var dialog bytes.Buffer
	dialog.WriteString("$ dialog --yesno ...\n\x1b[H\x1b[J")
	for r := 10; r < 18; r++ {
		dialog.WriteString("\x1b[" + strconv.Itoa(r) + ";30H│                                    │")
	}
	dialog.WriteString("\x1b[12;32HErase all data on the backup disk?\x1b[16;40H< Yes >   < No  >\x1b[16;42H")
	cases := []struct {
		name, out string
		typ       string
		dangerous bool
	}{
		{"editor's lose-changes question", editor, TypeYesNo, true},
		{"dialog painted without the alternate screen", dialog.String(), TypeYesNo, true},
		{"editor at work", "\x1b[?1049h\x1b[H\x1b[2Jhello\x1b[39;1H^G Help  ^O Write Out  ^X Exit\x1b[1;1H", TypeText, false},
		{"modal editor", "\x1b[?1049h\x1b[H\x1b[2Jhello\x1b[2;1H~\x1b[3;1H~\x1b[4;1H~\x1b[5;1H~\x1b[1;1H", TypeCommand, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := d.Detect(context.Background(), []byte(tc.out), 0.7)
			if err != nil || !got.Detected {
				t.Fatalf("got %+v, %v, want detected", got, err)
			}
			if got.Type != tc.typ || got.Dangerous != tc.dangerous {
				t.Fatalf("type %s (%s) dangerous %v (%.2f, %s), want %s %v", got.Type, got.MatchedPattern, got.Dangerous, got.DangerConfidence, got.DangerReason, tc.typ, tc.dangerous)
			}
		})
	}
}
