package rank

import (
	"regexp"
	"strings"
)

// A cue is a need a request states in a few words whose capability the
// whole request's vector drowns: a path to write to, a URL to read, the
// current date, arithmetic, an email to send, a page to click through, a
// command to run. Each cue stands for a capability written as text (the
// way tool descriptions say it), and that text is scored against the
// catalog's own tool descriptions like any other need: catalogs differ, so
// no server or tool name is written here. Whether a cue's best server is
// needed is for the confidence map to say (calibrate.Evidence): a cue
// fires on wording, not on need ("tomorrow" in "book a table for
// tomorrow" needs no clock).
type Cue struct {
	// Kind names the capability (CueFileWrite...).
	Kind string
	// Text is the capability as text, scored against the catalog.
	Text string
	// Match is what in the request fired the cue, for the explanation.
	Match string
}

// Cue kinds.
const (
	CueFileWrite = "file-write"
	CueFileRead  = "file-read"
	CueURL       = "url"
	CueBrowser   = "browser"
	CueTime      = "time"
	CueDate      = "date"
	CueMath      = "math"
	CueEmail     = "email"
	CueShell     = "shell"
	CueWebSearch = "web-search"
)

// cueText is each kind's capability, phrased as a tool description.
var cueText = map[string]string{
	CueFileWrite: "Write or save text content to a file at a path on the local file system.",
	CueFileRead:  "Read the contents of a file at a path on the local file system.",
	CueURL:       "Fetch a web page or document from a URL and return its content as text or markdown.",
	CueBrowser:   "Control a web browser: navigate to a page, click elements, fill in and submit forms, take screenshots.",
	CueTime:      "Get the current date and time in a time zone, and convert times between time zones.",
	CueDate:      "Get today's date and the current time to work out relative dates.",
	CueMath:      "Calculate the result of a mathematical expression or formula.",
	CueEmail:     "Send an email message to a recipient's email address.",
	CueShell:     "Execute a shell command in a terminal and return its output.",
	CueWebSearch: "Search the web and return a list of results with titles, links and snippets.",
}

// CueText returns the capability text of a cue kind ("" for an unknown kind).
func CueText(kind string) string { return cueText[kind] }

// CueKinds lists every cue kind in a fixed order.
var CueKinds = []string{CueFileWrite, CueFileRead, CueURL, CueBrowser, CueTime, CueDate, CueMath, CueEmail, CueShell, CueWebSearch}

var (
	cueURLRe = regexp.MustCompile(`(?i)\bhttps?://[^\s<>"')\]]+|\bwww\.[a-z0-9-]+\.[a-z]{2,}[^\s<>"')\]]*`)
	// A path: absolute, home- or dot-relative with a slash, a Windows
	// drive, or a file name with a common extension.
	cuePathRe    = regexp.MustCompile(`(?i)(?:^|[\s"'(\x60=:])((?:~|\.{1,2})?/[\w.@+-]+(?:/[\w.@+-]*)*|~|[a-z]:\\[\w\\. -]+|[\w@+-]+(?:\.[\w-]+)*\.(?:md|markdown|txt|csv|tsv|json|jsonl|ya?ml|html?|pdf|docx?|xlsx?|pptx?|png|jpe?g|svg|log|py|js|ts|go|rs|java|sh|xml|toml|ini|cfg|conf|env|sql|ipynb|zip|tar|gz))(?:$|[\s"'),.;:!?\x60])`)
	cueWriteRe   = regexp.MustCompile(`(?i)\b(?:save|saving|saved|write|writing|store|storing|export|exporting|dump|append|log(?:ging)? (?:it|them|the \w+|results?) to|put (?:it|them|this|that|the \w+) (?:in|into)|output (?:it |them )?to|record (?:it|them) in|create (?:a |the |an )?(?:new )?(?:file|folder|directory|note)|download)\b`)
	cueBrowserRe = regexp.MustCompile(`(?i)\b(?:click(?:ing|ed)?(?: on)?|fill(?:ing)? (?:in|out)|type \S+(?: \S+)? into|submit(?:ting)? the form|log(?:ging)? (?:in|into)|sign(?:ing)? in(?:to)?|scroll(?:ing)? (?:down|up|to)|take a screenshot|screenshot|(?:open|opening) (?:it |the (?:page|site|website|link|url) )?in (?:the|a|my) browser|in the browser|browse to|navigate to|go to (?:the )?(?:page|site|website))\b`)
	cueTimeRe    = regexp.MustCompile(`(?i)\b(?:what time is it|what(?:'s| is) the time|current (?:local )?(?:time|date)|today'?s date|what (?:day|date) is (?:it|today)|what day of the week|time ?zones?|time difference|local time|(?:how many|number of) (?:days|weeks|months|years|hours) (?:ago|until|till|since|from now|left)|(?:years|days|months) ago|right now in|what time (?:will|would) it be)\b`)
	cueDateRe    = regexp.MustCompile(`(?i)\b(?:today|tonight|tomorrow|yesterday|this (?:morning|afternoon|evening|week|weekend|month|year)|next (?:monday|tuesday|wednesday|thursday|friday|saturday|sunday|week|weekend|month|year)|last (?:monday|tuesday|wednesday|thursday|friday|saturday|sunday|week|weekend|month|year)|in (?:\d+|a|an|two|three|few) (?:days?|weeks?|months?|hours?)|\d+ (?:days?|weeks?|months?) (?:from now|ago))\b`)
	cueMathRe    = regexp.MustCompile(`(?i)(?:\d(?:[\d,.]*\d)?(?:\s*[+*×÷^]|\s+[-/x]\s)\s*\(?\s*\d|\b(?:calculate|calculating|compute|computing|work out|how much (?:is|would|will|does)|percentage|percent|per ?cent\b|average|mean of|sum of|total of|ratio|square root|multiply|divided by|times \d|bmi|compound interest|interest rate|convert \d|\d+(?:\.\d+)? ?(?:kg|lbs?|km|miles?|°[cf]|celsius|fahrenheit) (?:to|in) ))`)
	cueEmailRe   = regexp.MustCompile(`(?i)\b[\w.+-]+@[\w-]+(?:\.[\w-]+)*\.[a-z]{2,}\b|\b(?:send|write|draft|forward|reply to) (?:\w+ ){0,3}e-?mails?\b|\be-?mail (?:it|them|this|that|the \w+|a \w+|me|him|her|us) (?:to\b)?|\be-?mail (?:it |the \w+ )?to\b`)
	cueShellRe   = regexp.MustCompile("(?i)`[^`\\n]{2,200}`|\\b(?:run|execute|exec) (?:the |this |a )?(?:command|script|shell|bash)|\\bin (?:the|a|my) (?:terminal|shell|console|command line)\\b|\\b(?:terminal|shell) command\\b|\\bcommand[- ]line\\b")
	cueSearchRe  = regexp.MustCompile(`(?i)\b(?:search|look up|google|find) (?:\w+ ){0,3}(?:on|across) the (?:web|internet)\b|\bsearch the (?:web|internet)\b|\bweb search\b|\bsearch online\b|\blook (?:it |this |that )?up online\b`)
)

// maxCues bounds the cues of one request.
const maxCues = 4

// findCues returns the cues of a request, at most one per kind and
// maxCues in all, in CueKinds order.
func findCues(text string) []Cue {
	var out []Cue
	add := func(kind, match string) {
		if len(out) < maxCues && match != "" {
			out = append(out, Cue{Kind: kind, Text: cueText[kind], Match: Clip(strings.TrimSpace(match), 60)})
		}
	}
	urls := cueURLRe.FindAllString(text, -1)
	rest := cueURLRe.ReplaceAllString(text, " ")
	var path string
	if m := cuePathRe.FindStringSubmatch(rest); m != nil {
		path = m[1]
	}
	browser := cueBrowserRe.FindString(text)
	if path != "" {
		if cueWriteRe.MatchString(text) {
			add(CueFileWrite, path)
		} else {
			add(CueFileRead, path)
		}
	}
	if len(urls) > 0 && browser == "" {
		add(CueURL, urls[0])
	}
	add(CueBrowser, browser)
	if m := cueTimeRe.FindString(text); m != "" {
		add(CueTime, m)
	} else {
		add(CueDate, cueDateRe.FindString(text))
	}
	add(CueMath, cueMathRe.FindString(rest))
	add(CueEmail, cueEmailRe.FindString(text))
	add(CueShell, cueShellRe.FindString(text))
	add(CueWebSearch, cueSearchRe.FindString(text))
	return out
}

// Cues returns one turn for each cue of a request (at most maxCues), to
// be ranked on its own: its text is the cue's capability. A long prompt's
// cues are read from its last PatternWindow bytes, where the request after
// a paste is.
func Cues(prompt string) []Turn {
	src := prompt
	if isLong(prompt) {
		src = tail(prompt, PatternWindow)
	}
	var out []Turn
	for _, c := range findCues(src) {
		out = append(out, Turn{Text: c.Text, Weight: 1, Cue: &c})
	}
	return out
}
