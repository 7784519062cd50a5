package terminal

import (
	"bytes"
	"regexp"
	"strings"
	"unicode/utf8"
)

// A full-screen program (an editor, a curses menu, a dialog box) paints
// its screen with cursor moves rather than lines; its question is on the
// row where it leaves the cursor, and the rest of the screen is its
// context. Clean reads output as lines, which for a painted screen is a
// jumble; renderScreen plays the output on a small terminal model instead.

// Screen bounds: rows beyond maxRows scroll off, columns beyond maxCols
// are dropped (terminals past 60x256 are rare, and their prompt rows are
// short), so a hostile stream costs at most that much, and the screen's
// text that the rules and the danger model read is at most 15 KiB.
const (
	maxRows = 60
	maxCols = 256
)

// screen is the text a terminal would show and where its cursor is.
type screen struct {
	rows     [][]rune
	row, col int
	// painted: the program addressed the cursor to a row and column
	// (CUP, VPA) since the screen was last cleared: a painted screen, not
	// a stream of lines.
	painted int
	// question is the row of the screen's question, once found (+1; 0:
	// not yet looked for).
	question int
}

func (s *screen) line(r int) []rune {
	for len(s.rows) <= r {
		s.rows = append(s.rows, nil)
	}
	return s.rows[r]
}

func (s *screen) put(c rune) {
	if s.col >= maxCols {
		return
	}
	l := s.line(s.row)
	for len(l) <= s.col {
		l = append(l, ' ')
	}
	l[s.col] = c
	s.rows[s.row] = l
	s.col++
}

func (s *screen) newline() {
	s.row++
	if s.row >= maxRows {
		drop := s.row - maxRows + 1
		s.rows = s.rows[min(drop, len(s.rows)):]
		s.row -= drop
	}
}

func (s *screen) clear() {
	s.rows, s.row, s.col, s.painted = nil, 0, 0, 0
}

// eraseLine blanks part of the cursor's row: 0 from the cursor, 1 to it,
// 2 all of it.
func (s *screen) eraseLine(mode int) {
	l := s.line(s.row)
	switch mode {
	case 0:
		if s.col < len(l) {
			s.rows[s.row] = l[:s.col]
		}
	case 1:
		for i := 0; i <= s.col && i < len(l); i++ {
			l[i] = ' '
		}
	case 2:
		s.rows[s.row] = nil
	}
}

// decGraphics is the DEC line-drawing set (ESC ( 0) as box characters.
var decGraphics = map[rune]rune{'q': '─', 'x': '│', 'l': '┌', 'k': '┐', 'm': '└', 'j': '┘', 't': '├', 'u': '┤', 'w': '┬', 'v': '┴', 'n': '┼', 'a': '▒'}

// renderScreen plays raw on a terminal model and returns its rows and
// cursor. Only what changes the text or the cursor is modelled; colours,
// modes and unknown sequences are skipped.
func renderScreen(raw []byte) *screen {
	s := &screen{}
	lineDrawing := false
	// params parses up to four numeric parameters without allocating.
	var ps [4]int
	params := func(p []byte) []int {
		n := 0
		ps = [4]int{}
		for _, c := range p {
			switch {
			case c >= '0' && c <= '9':
				if n < len(ps) && ps[n] < 1<<20 {
					ps[n] = ps[n]*10 + int(c-'0')
				}
			case c == ';':
				n++
			}
		}
		return ps[:min(n+1, len(ps))]
	}
	arg := func(ps []int, i, def int) int {
		if i < len(ps) && ps[i] > 0 {
			return ps[i]
		}
		return def
	}
	for i := 0; i < len(raw); {
		c := raw[i]
		switch {
		case c == 0x1b && i+1 < len(raw) && raw[i+1] == '[':
			j := i + 2
			for j < len(raw) && raw[j] >= 0x30 && raw[j] <= 0x3f {
				j++
			}
			for j < len(raw) && raw[j] >= 0x20 && raw[j] <= 0x2f {
				j++
			}
			if j >= len(raw) {
				return s
			}
			p, final := raw[i+2:j], raw[j]
			i = j + 1
			private := len(p) > 0 && p[0] == '?'
			ps := params(p)
			switch final {
			case 'H', 'f':
				s.row, s.col = arg(ps, 0, 1)-1, arg(ps, 1, 1)-1
				s.row = min(s.row, maxRows-1)
				s.painted++
			case 'd':
				s.row = min(arg(ps, 0, 1)-1, maxRows-1)
				s.painted++
			case 'G', '`':
				s.col = arg(ps, 0, 1) - 1
			case 'A':
				s.row = max(0, s.row-arg(ps, 0, 1))
			case 'B', 'e':
				s.row = min(s.row+arg(ps, 0, 1), maxRows-1)
			case 'C', 'a':
				s.col += arg(ps, 0, 1)
			case 'D':
				s.col = max(0, s.col-arg(ps, 0, 1))
			case 'K':
				s.eraseLine(arg(ps, 0, 0))
			case 'X':
				for k, n := s.col, arg(ps, 0, 1); k < s.col+n && k < maxCols; k++ {
					l := s.line(s.row)
					if k < len(l) {
						l[k] = ' '
					}
				}
			case 'J':
				switch arg(ps, 0, 0) {
				case 2, 3:
					row, col := s.row, s.col
					s.clear()
					s.row, s.col = row, col
				case 0:
					s.eraseLine(0)
					if s.row+1 < len(s.rows) {
						s.rows = s.rows[:s.row+1]
					}
				}
			case 'h', 'l':
				if private && (bytes.Equal(p, []byte("?1049")) || bytes.Equal(p, []byte("?1047")) || bytes.Equal(p, []byte("?47"))) {
					s.clear()
				}
			}
			s.col = max(0, min(s.col, maxCols))
		case c == 0x1b && i+1 < len(raw) && raw[i+1] == ']':
			// OSC: skip to BEL or ST.
			j := i + 2
			for j < len(raw) && raw[j] != 0x07 && !(raw[j] == 0x1b && j+1 < len(raw) && raw[j+1] == '\\') {
				j++
			}
			i = min(j+1, len(raw))
			if i < len(raw) && raw[i-1] == 0x1b {
				i++
			}
		case c == 0x1b && i+1 < len(raw):
			switch raw[i+1] {
			case '(':
				if i+2 < len(raw) {
					lineDrawing = raw[i+2] == '0'
				}
				i += 3
				continue
			case 'M':
				s.row = max(0, s.row-1)
			case 'c':
				s.clear()
			}
			i += 2
		case c == '\r':
			s.col = 0
			i++
		case c == '\n':
			// Logs store the pty's CRLF as LF: a new line starts at
			// the first column.
			s.newline()
			s.col = 0
			i++
		case c == '\b':
			s.col = max(0, s.col-1)
			i++
		case c == '\t':
			s.col = min((s.col/8+1)*8, maxCols)
			i++
		case c == 0x0e || c == 0x0f:
			// Shift out / in: the line-drawing set, as ESC ( 0 / B.
			lineDrawing = c == 0x0e
			i++
		case c < 0x20 || c == 0x7f:
			i++
		default:
			r, n := utf8.DecodeRune(raw[i:])
			i += n
			if lineDrawing {
				if g, ok := decGraphics[r]; ok {
					r = g
				}
			}
			s.put(r)
		}
	}
	return s
}

// text is row r without trailing blanks.
func (s *screen) text(r int) string {
	if r < 0 || r >= len(s.rows) {
		return ""
	}
	return strings.TrimRight(string(s.rows[r]), " ")
}

// paintedScreen reports whether raw ends with a screen painted by cursor
// addressing (a curses program, with or without the alternate screen):
// at least minPaint row moves since the screen was last cleared, and the
// output does not end with a newline.
func (s *screen) isPainted() bool { return s.painted >= minPaint }

// minPaint is how many cursor addressings make a painted screen: a shell
// prompt or a progress bar moves the cursor a few times, a curses screen
// tens of times.
const minPaint = 8

// paintStart is where to start playing raw so that the last full clear
// (or alternate-screen switch) is included when it is in the tail, and
// the cost stays bounded by the tail's size otherwise.
func paintStart(raw []byte) int {
	for i := len(raw) - 1; i >= 0; i-- {
		if raw[i] != 0x1b {
			continue
		}
		for _, m := range clears {
			if bytes.HasPrefix(raw[i:], m) {
				return i
			}
		}
	}
	return 0
}

// clears are the sequences that start a screen afresh.
var clears = [][]byte{[]byte("\x1b[2J"), []byte("\x1b[H\x1b[J"), []byte("\x1b[?1049h"), []byte("\x1b[?1047h"), []byte("\x1bc")}

// all is every row of the screen, joined.
func (s *screen) all() string {
	var b strings.Builder
	for r := range s.rows {
		b.WriteString(s.text(r))
		b.WriteByte('\n')
	}
	return b.String()
}

// emptyRows counts the rows that are a lone "~": how vi-family editors
// show lines past the end of the buffer.
func (s *screen) emptyRows() int {
	n := 0
	for r := range s.rows {
		if s.text(r) == "~" {
			n++
		}
	}
	return n
}

// questionRow is the row that holds the screen's question: the cursor's
// row when a question rule names it; else one of the last three rows with
// text (where editors and mail readers ask: "This document is not saved;
// are you sure?" while the cursor stays in the text); else the last row
// of a dialog box that ends with a question mark; else the cursor's row.
func (s *screen) questionRow() int {
	if s.question > 0 {
		return s.question - 1
	}
	q := s.findQuestion()
	s.question = q + 1
	return q
}

func (s *screen) findQuestion() int {
	if screenRule(s.inner(s.row)) != nil {
		return s.row
	}
	seen := 0
	for r := len(s.rows) - 1; r >= 0 && seen < 3; r-- {
		t := s.inner(r)
		if t == "" {
			continue
		}
		seen++
		if questionEndRE.MatchString(t) && screenRule(t) != nil {
			return r
		}
	}
	for r := len(s.rows) - 1; r >= 0; r-- {
		if t := s.text(r); strings.ContainsAny(t, boxSides) && strings.HasSuffix(s.inner(r), "?") {
			return r
		}
	}
	return s.row
}

// questionEndRE is how a question ends, away from the cursor: a question
// mark or colon, perhaps the default answer after it ("are you sure?: n")
// or the answers' closing bracket; a bar of keys ("H)elp Q)uit") is not
// a question.
var questionEndRE = regexp.MustCompile(`[?:)\]]\s*\S{0,3}$`)

// questionText is the question's row without its box.
func (s *screen) questionText() string { return s.inner(s.questionRow()) }

// boxSides are the characters that draw a dialog box's sides.
const boxSides = "│┃║"

// inner is row r's text without the sides of a box around it.
func (s *screen) inner(r int) string {
	return strings.TrimSpace(strings.Trim(strings.TrimSpace(s.text(r)), boxSides))
}
