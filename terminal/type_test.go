package terminal

import (
	"context"
	"strconv"
	"strings"
	"testing"
)

// paint draws a screen as a curses program does: the alternate screen,
// each row put by cursor addressing, the cursor left at (row, col).
func paint(rows map[int]string, row, col int) string {
	var b strings.Builder
	b.WriteString("\x1b[?1049h\x1b[H\x1b[2J")
	for r := 1; r <= 40; r++ {
		if t, ok := rows[r]; ok {
			b.WriteString("\x1b[" + strconv.Itoa(r) + ";1H" + t)
		}
	}
	b.WriteString("\x1b[" + strconv.Itoa(row) + ";" + strconv.Itoa(col) + "H")
	return b.String()
}

// TestPromptTypeEvidence: the kinds of evidence that type a prompt by the
// answer it asks for, each on a prompt of no program in particular. Every
// case was typed wrong (or by another rule) before the evidence it names.
func TestPromptTypeEvidence(t *testing.T) {
	d := fakeDetector(t)
	box := func(label, field string) map[int]string {
		return map[int]string{
			10: "┌──────────────────────────────────────┐",
			11: "│ " + label + strings.Repeat(" ", max(0, 37-len([]rune(label)))) + "│",
			12: "│ " + field + strings.Repeat(" ", max(0, 37-len([]rune(field)))) + "│",
			13: "├──────────────────────────────────────┤",
			14: "│        <  OK  >     <Cancel>         │",
			15: "└──────────────────────────────────────┘",
		}
	}
	cases := []struct {
		name, out string
		typ       string
		pattern   string
	}{
		// A secret's words, when the target quoted holds a colon, or the
		// code is named by its digits.
		{"password for a URL", "Password for 'https://bob@example.org:8443':", TypePassword, "password_colon"},
		{"a code by its digits", "Enter the 8-digit code from your security key app:", TypePassword, "password_colon"},
		{"an unbalanced quote", "Enter bob's password:", TypePassword, "password_colon"},
		// Yes and no offered as words, the default marked, or bare.
		{"yes the default", "Create the folder? ([yes]/no): ", TypeYesNo, "yes_no_words"},
		{"yes the default, and help", "Empty the trash? ([yes]/no/?): ", TypeYesNo, "yes_no_words"},
		{"keyed yes and no", "Revert these changes? ([y]es, [n]o): ", TypeYesNo, "yes_no_words"},
		{"bare yes/no", "Partition table will be replaced. Yes/No? ", TypeYesNo, "yes_no_words"},
		// More than two keyed answers, by slashes: a choice.
		{"keyed answers by slashes", "Use this hunk? [y]es/[n]o/[s]kip/[q]uit: ", TypeChoice, "choice_keyed"},
		// A typed confirmation with a long sentence after it.
		{"type yes, long", "Type 'yes' if you have a backup of this volume and want to go on:", TypeYesNo, "yes_no_brackets"},
		// Whether, ending with a colon; leaving anyway.
		{"are you sure, colon", "Are you sure you want to drop table `t1':", TypeYesNo, "yes_no_sure"},
		{"leave anyway", "Some windows have unsaved text; quit anyway? ", TypeYesNo, "yes_no_question"},
		// Asking what to do: the answers are actions.
		{"what to do", "What would you like to do with the old key? ", TypeChoice, "choice_action"},
		// A selection typed as a number.
		{"type a selection number", "Press <enter> for the default, or type selection number: ", TypeChoice, "menu_select"},
		// A field whose default is a path.
		{"path default", "Login shell [/bin/sh]: ", TypePath, "path_default"},
		{"relative path default", "Output [./build]: ", TypePath, "path_default"},
		{"a default that is no path", "Full name [Bob]: ", TypeText, "field_default"},
		// Dialogs: the cursor in an entry field above OK.
		{"input box", paint(box("Name of this host:", ""), 12, 4), TypeText, "input_box"},
		{"password box", paint(box("Passphrase for the new volume:", "____________________"), 12, 4), TypePassword, "input_box_password_colon"},
		{"file selector", paint(box("Pick a file", "./src/"), 12, 9), TypePath, "input_box_path"},
		{"cursor on the buttons", paint(box("Name of this host:", ""), 14, 12), TypeChoice, "dialog_words"},
		// A row of bracketed buttons in a box.
		{"bracketed buttons", paint(map[int]string{
			5:  "┌──────────────────────────────┐",
			6:  "│ The settings file is missing. │",
			7:  "│   [<Close>]   [ Create ]      │",
			8:  "└──────────────────────────────┘",
			40: "a.txt      L: 1    C: 1",
		}, 40, 1), TypeChoice, "dialog_bracket_buttons"},
		// An instruction to pick, on the row asked on.
		{"select instruction", paint(map[int]string{3: "  one", 4: "  two", 39: "Select a layout, press 'Q' to quit."}, 39, 1), TypeChoice, "screen_select"},
		{"pick as a word of text", paint(map[int]string{1: "pick 1a2b3c4 first", 2: "pick 5d6e7f8 second"}, 1, 1), TypeCommand, "full_screen"},
		// Editors' status lines: a line and column in brackets, a mode
		// line, a function-key bar with Save.
		{"bracketed line number", paint(map[int]string{1: "a.txt  [----]  0 L:[  1+ 0   1/  2]", 2: "hello"}, 2, 1), TypeText, "full_screen_editor"},
		{"mode line", paint(map[int]string{1: "hello", 39: "-----Ed: a.txt       (fundamental)--L1--------"}, 1, 1), TypeText, "full_screen_editor"},
		{"function keys", paint(map[int]string{1: "hello", 40: " 1Help  2Save  3Mark  10Quit"}, 1, 1), TypeText, "full_screen_editor"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := d.Detect(context.Background(), []byte(tc.out), 0.7)
			if err != nil || !got.Detected {
				t.Fatalf("got %+v, %v, want detected", got, err)
			}
			if got.Type != tc.typ || got.MatchedPattern != tc.pattern {
				t.Errorf("type %s by %s, want %s by %s", got.Type, got.MatchedPattern, tc.typ, tc.pattern)
			}
		})
	}
}
