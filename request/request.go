// Package request owns the bounds every request is held to before any
// model work: the limits, the checks of text and counts, and the sentinel
// errors for bad input.
package request

import (
	"errors"
	"fmt"
	"math"
	"strings"
	"unicode"
	"unicode/utf8"
)

// ErrEmptyText, ErrTextTooLong and ErrBadArgument are bad input; the gRPC
// layer maps them to InvalidArgument.
var (
	ErrEmptyText   = errors.New("request: empty text")
	ErrTextTooLong = errors.New("request: text too long")
	ErrBadArgument = errors.New("request: invalid argument")
)

// Limits are the documented input bounds, enforced before any model work.
type Limits struct {
	MaxTextBytes int // per text, prompt or message (default 256 KiB)
	MaxMessages  int // per Route request (default 64)
	MaxTopK      int // top_k, max_servers, max_tools (default 100)
}

// Default limits.
const (
	// DefaultMaxTextBytes fits a conversation turn with a pasted log or
	// file; rank bounds what such a text costs (see rank.LongTextBytes).
	DefaultMaxTextBytes = 256 << 10
	DefaultMaxMessages  = 64
	DefaultMaxTopK      = 100
)

// DefaultMetaCategory is the category of meta tools (hub tools such as
// analyze_prompt) when a policy's configuration names none.
const DefaultMetaCategory = "meta"

// MaxCategories is how many categories a Route or AnalyzePrompt answer
// lists at most: a prompt that seems to need more is too vague to narrow
// the tools it is shown.
const MaxCategories = 5

// MaxNames is how many names one list field of a request may hold
// (AnalyzePrompt's valid_categories): sixty times the categories of the
// default catalog, more than a hub with any real catalog sends, while a
// request that names more is refused before any work rather than looked
// up name by name.
const MaxNames = 1024

// CheckNames validates the count of a list field of names.
func CheckNames(field string, n int) error {
	if n > MaxNames {
		return fmt.Errorf("%w: %s has %d names, limit %d", ErrBadArgument, field, n, MaxNames)
	}
	return nil
}

// WithDefaults returns l with zero limits set to their defaults.
func (l Limits) WithDefaults() Limits {
	if l.MaxTextBytes <= 0 {
		l.MaxTextBytes = DefaultMaxTextBytes
	}
	if l.MaxMessages <= 0 {
		l.MaxMessages = DefaultMaxMessages
	}
	if l.MaxTopK <= 0 {
		l.MaxTopK = DefaultMaxTopK
	}
	return l
}

// Blank reports whether s has nothing to embed: only white space, control
// and format characters (U+200B ZERO WIDTH SPACE, U+FEFF, …), which the
// tokenizers drop, so such a text would reach the model as zero tokens.
func Blank(s string) bool {
	return strings.TrimFunc(s, func(r rune) bool { return unicode.IsSpace(r) || unicode.In(r, unicode.Cc, unicode.Cf) }) == ""
}

// CheckText validates one input text against the limits.
func (l Limits) CheckText(field, s string) error {
	if Blank(s) {
		return fmt.Errorf("%w: %s is empty", ErrEmptyText, field)
	}
	if len(s) > l.MaxTextBytes {
		return fmt.Errorf("%w: %s is %d bytes, limit %d", ErrTextTooLong, field, len(s), l.MaxTextBytes)
	}
	if !utf8.ValidString(s) {
		return fmt.Errorf("%w: %s is not valid UTF-8", ErrBadArgument, field)
	}
	return nil
}

// CheckK validates a count field (top_k, max_servers, max_tools): 0 means
// def.
func (l Limits) CheckK(field string, k int, def int) (int, error) {
	if k < 0 || k > l.MaxTopK {
		return 0, fmt.Errorf("%w: %s %d out of range 0..%d", ErrBadArgument, field, k, l.MaxTopK)
	}
	if k == 0 {
		return def, nil
	}
	return k, nil
}

// CheckMinConf validates an optional min_confidence.
func CheckMinConf(mc *float32) error {
	if mc != nil && (math.IsNaN(float64(*mc)) || *mc < 0 || *mc > 1) {
		return fmt.Errorf("%w: min_confidence %v outside [0,1]", ErrBadArgument, *mc)
	}
	return nil
}
