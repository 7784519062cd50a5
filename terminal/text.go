// Package terminal tells, from the tail of a terminal session's output,
// whether the program is waiting for input, what kind of input (password,
// yes/no, choice, path, text, command), and whether answering is
// dangerous; it suggests answers and learns from what users typed.
package terminal

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"time"
	"unicode/utf8"

	"github.com/classifierd/classifierd/internal/clip"
)

// Errors returned by the package.
var (
	ErrBadSessionID    = errors.New("terminal: invalid session id")
	ErrSessionNotFound = errors.New("terminal: session not found")
	ErrBadConfidence   = errors.New("terminal: confidence outside [0,1]")
	ErrBadArgument     = errors.New("terminal: invalid argument")
	// ErrTooLarge means a field is over its documented limit; it is
	// checked before any work on the field.
	ErrTooLarge = errors.New("terminal: input too large")
	// ErrEmbedding means the Embedder answered with the wrong number of
	// vectors or vectors of the wrong length: a wiring fault, not bad input.
	ErrEmbedding = errors.New("terminal: embedder returned vectors of the wrong shape")
)

// Limits. Sizes are checked before any work; within them, the work per
// request is bounded by examining only the last MaxLines lines of a tail
// and the last MaxLineBytes of each line (a prompt is at the end of its
// line), and by cutting words longer than maxWordBytes before the model.
const (
	// TailBytes is how much of a log's end is read, and the most text
	// DetectInputPrompt and session_context accept: enough for the last
	// lines of any prompt and its context, independent of the log's size.
	TailBytes = 64 << 10
	// MaxPromptBytes bounds a prompt_text.
	MaxPromptBytes = 4096
	// MaxInputBytes bounds an input_text.
	MaxInputBytes = 4096
	// MaxLines is how many of a tail's last lines are examined.
	MaxLines = 64
	// MaxLineBytes is how much of a line's end is examined.
	MaxLineBytes = 512
	// maxWordBytes is the longest word the model sees; a tokenizer's cost
	// on one giant word is what stalled the daemon.
	maxWordBytes = 48
)

// clipEnd keeps the last n bytes of s, starting on a rune boundary.
func clipEnd(s string, n int) string { return clip.Tail(s, n) }

// lastLinesStart is the offset in raw where its last n lines begin.
func lastLinesStart(raw []byte, n int) int {
	end := len(raw)
	// A trailing newline ends the last line rather than starting another.
	if end > 0 && raw[end-1] == '\n' {
		end--
	}
	for i := end - 1; i >= 0; i-- {
		if raw[i] == '\n' {
			n--
			if n == 0 {
				return i + 1
			}
		}
	}
	return 0
}

// LastLines cleans the last MaxLines lines of raw (see Clean); positions
// are offsets in raw.
func LastLines(raw []byte) (lines []Line, partial bool) {
	start := lastLinesStart(raw, MaxLines)
	lines, partial = Clean(raw[start:])
	for i := range lines {
		lines[i].Pos += start
	}
	return lines, partial
}

// shortWords cuts every word of s longer than n bytes to its first n
// bytes (on a rune boundary), so the model's tokenizer never sees a giant
// word.
func shortWords(s string, n int) string {
	words := strings.Fields(s)
	changed := false
	for i, w := range words {
		if len(w) > n {
			words[i] = strings.TrimSuffix(clip.String(w, n), clip.Ellipsis)
			changed = true
		}
	}
	if !changed {
		return s
	}
	return strings.Join(words, " ")
}

var sessionIDRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$`)

// OwnedSessionID is the key a session id of one owner (an identity) is
// stored under, so that two owners' sessions of the same id are two
// sessions: "u", 12 hex digits of the owner's SHA-256, ".", then the id
// (or, when that passes 128 bytes, "h" and 32 hex digits of the id's
// SHA-256). It passes CheckSessionID. With id "" it is the owner's
// prefix alone ("u<hex>."), which names no session: Learned with it
// counts nothing, or with ShareLearned the answers of every session of
// that owner.
func OwnedSessionID(owner, id string) string {
	who := sha256.Sum256([]byte(owner))
	key := "u" + hex.EncodeToString(who[:6]) + "." + id
	if len(key) > 128 {
		sum := sha256.Sum256([]byte(id))
		key = "u" + hex.EncodeToString(who[:6]) + ".h" + hex.EncodeToString(sum[:16])
	}
	return key
}

// ownerPrefixRE matches the owner prefix OwnedSessionID puts on a key.
var ownerPrefixRE = regexp.MustCompile(`^u[0-9a-f]{12}\.`)

// ownerLen is the length of that prefix, its "." included.
const ownerLen = 14

// ownerGlob is ownerPrefixRE as an SQLite GLOB of the whole key.
const ownerGlob = "u[0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f].*"

// sessionOwner is the owner prefix of a session key ("u<hex>."), or ""
// for a session of no owner (an anonymous daemon's).
func sessionOwner(session string) string {
	return ownerPrefixRE.FindString(session)
}

// ownerKey is the owner a store counts a session's events under: "u"
// and the 12 hex digits of its owner prefix, or "" for a session of no
// owner (every session of an anonymous daemon: one owner).
func ownerKey(session string) string {
	return strings.TrimSuffix(sessionOwner(session), ".")
}

// CheckSessionID accepts plain names only: no path separators, no "..".
func CheckSessionID(id string) error {
	if !sessionIDRE.MatchString(id) || strings.Contains(id, "..") {
		return fmt.Errorf("%w: must be 1-128 letters, digits, '.', '_' or '-', starting with a letter or digit, without '..'", ErrBadSessionID)
	}
	return nil
}

// Logs finds session logs: <Dir>/<session_id>.log.
type Logs struct {
	Dir string
}

// identityDirRE is an identity name that can be a directory of its own
// under Logs.Dir: a token's name, "cert:CN" of a plain CN.
var identityDirRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._:@-]{0,127}$`)

// Of is the logs of one identity: the directory <Dir>/<identity>, so that
// an identity's DetectInputPrompt reads only the logs its own hub wrote
// there. An identity whose name cannot be a directory (a certificate CN
// with spaces or slashes) has no logs: every session is not found.
func (l Logs) Of(identity string) Logs {
	if !identityDirRE.MatchString(identity) || strings.Contains(identity, "..") {
		return Logs{}
	}
	return Logs{Dir: filepath.Join(l.Dir, identity)}
}

// Tail is the end of a session log.
type Tail struct {
	Data    []byte
	Offset  int64 // file offset of Data[0]
	ModTime time.Time
}

// ReadTail reads the last TailBytes of a session's log by seeking from
// the end, so the cost does not grow with the log's size.
func (l Logs) ReadTail(id string) (Tail, error) {
	if err := CheckSessionID(id); err != nil {
		return Tail{}, err
	}
	if l.Dir == "" {
		return Tail{}, fmt.Errorf("%w: %s", ErrSessionNotFound, id)
	}
	// O_NOFOLLOW: a symlink planted in the log directory is not followed
	// to another file; O_NONBLOCK: opening a FIFO does not wait for a
	// writer (the regular-file check below then refuses it).
	f, err := os.OpenFile(filepath.Join(l.Dir, id+".log"), os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
	if errors.Is(err, os.ErrNotExist) || errors.Is(err, syscall.ELOOP) {
		return Tail{}, fmt.Errorf("%w: %s", ErrSessionNotFound, id)
	}
	if err != nil {
		return Tail{}, fmt.Errorf("terminal: open log: %w", err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return Tail{}, fmt.Errorf("terminal: stat log: %w", err)
	}
	if !st.Mode().IsRegular() {
		return Tail{}, fmt.Errorf("%w: %s is not a regular file", ErrSessionNotFound, id)
	}
	off := max(0, st.Size()-TailBytes)
	buf := make([]byte, st.Size()-off)
	if _, err := f.ReadAt(buf, off); err != nil && !errors.Is(err, io.EOF) {
		return Tail{}, fmt.Errorf("terminal: read log: %w", err)
	}
	return Tail{Data: buf, Offset: off, ModTime: st.ModTime()}, nil
}

// Line is one cleaned output line and where it starts in the raw bytes.
type Line struct {
	Text string
	Pos  int // byte offset in the raw input
}

// ansiRE matches CSI, OSC and other escape sequences.
var ansiRE = regexp.MustCompile(`\x1b\[[0-?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)|\x1b[ -/]*[0-~]`)

// Clean splits raw terminal output into lines with escape sequences
// removed and carriage-return rewrites applied (only the text after the
// last \r of a line survives, as on screen); a line keeps its last
// MaxLineBytes. partial reports that the
// output does not end with a newline: the last line is still being
// written, which is how programs leave a prompt.
func Clean(raw []byte) (lines []Line, partial bool) {
	s := string(raw)
	partial = len(s) > 0 && !strings.HasSuffix(s, "\n")
	pos := 0
	for len(s) > 0 {
		i := strings.IndexByte(s, '\n')
		var seg string
		if i < 0 {
			seg, s = s, ""
		} else {
			seg, s = s[:i], s[i+1:]
		}
		start := pos
		pos += len(seg) + 1
		seg = strings.TrimSuffix(seg, "\r")
		if j := strings.LastIndexByte(seg, '\r'); j >= 0 {
			if after := seg[j+1:]; strings.TrimSpace(ansiRE.ReplaceAllString(after, "")) != "" {
				seg = after
			} else {
				// Nothing but cursor moves after the last \r: a line
				// editor redrew its line (a prompt, then a right-hand
				// prompt) and moved the cursor back into it.
				seg = redrawnLine(seg)
			}
		}
		seg = ansiRE.ReplaceAllString(seg, "")
		seg = strings.Map(func(r rune) rune {
			if r < 0x20 && r != '\t' {
				return -1
			}
			return r
		}, seg)
		seg = clipEnd(seg, MaxLineBytes)
		lines = append(lines, Line{Text: seg, Pos: start})
	}
	return lines, partial
}

// redrawnLine plays one line's redraws (\r, cursor moves left and right
// and to a column, erases) and returns the text up to where the cursor
// was left when the rest is only a distant right-hand prompt ("~# " and,
// far right, "user@host"). It keeps at most MaxLineBytes columns, so its
// cost is bounded by the line's length.
func redrawnLine(seg string) string {
	var l []rune
	col := 0
	put := func(r rune) {
		if col >= MaxLineBytes {
			return
		}
		for len(l) <= col {
			l = append(l, ' ')
		}
		l[col] = r
		col++
	}
	for i := 0; i < len(seg); {
		c := seg[i]
		switch {
		case c == '\r':
			col = 0
			i++
		case c == 0x1b:
			m := ansiRE.FindStringIndex(seg[i:])
			if m == nil || m[0] != 0 {
				i++
				continue
			}
			esc := seg[i : i+m[1]]
			i += m[1]
			if len(esc) < 3 || esc[1] != '[' {
				continue
			}
			n := 0
			for _, d := range esc[2 : len(esc)-1] {
				if d >= '0' && d <= '9' && n < MaxLineBytes {
					n = n*10 + int(d-'0')
				}
			}
			switch esc[len(esc)-1] {
			case 'C':
				col = min(col+max(n, 1), MaxLineBytes)
			case 'D':
				col = max(col-max(n, 1), 0)
			case 'G':
				col = min(max(n, 1)-1, MaxLineBytes)
			case 'K':
				switch n {
				case 0:
					if col < len(l) {
						l = l[:col]
					}
				case 2:
					l = nil
				}
			}
		case c < 0x20:
			i++
		default:
			r, size := utf8.DecodeRuneInString(seg[i:])
			put(r)
			i += size
		}
	}
	text := strings.TrimRight(string(l), " ")
	if col < len(l) {
		rest := string(l[col:])
		if strings.HasPrefix(rest, "        ") {
			text = strings.TrimRight(string(l[:col]), " ") + " "
		}
	}
	return text
}
