package mcpsrc

import (
	"bytes"
	"encoding/json"
	"io"
	"strings"
	"testing"
	"testing/iotest"
)

// TestCapReader: messages up to the limit pass whole and unchanged, an
// over-long one becomes an error answer to its id (read from its first
// or its last bytes) or a warning, and what follows is read as before.
func TestCapReader(t *testing.T) {
	big := strings.Repeat("y", 300)
	cases := []struct {
		name, in, want string
		sep            byte
	}{
		{"short lines pass", "{\"a\":1}\n{\"b\":2}\n", "{\"a\":1}\n{\"b\":2}\n", '\n'},
		{"last line without newline", "{\"a\":1}\n{\"b\":2}", "{\"a\":1}\n{\"b\":2}", '\n'},
		{"id first", `{"jsonrpc":"2.0","id":7,"result":"` + big + "\"}\n{\"ok\":1}\n", "error 7|{\"ok\":1}\n", '\n'},
		{"id last (TypeScript)", `{"result":{"t":"` + big + `"},"jsonrpc":"2.0","id":"r-9"}` + "\n{\"ok\":1}\n", "error \"r-9\"|{\"ok\":1}\n", '\n'},
		{"id before jsonrpc", `{"result":"` + big + `","id":12,"jsonrpc":"2.0"}` + "\n", "error 12|", '\n'},
		{"nested id is not the id", `{"result":{"id":5,"t":"` + big + `"}}` + "\n", "warning|", '\n'},
		{"a request of the server's answers nothing", `{"jsonrpc":"2.0","method":"sampling/createMessage","id":1,"params":"` + big + "\"}\n", "warning|", '\n'},
		{"nor with its id first (Go)", `{"jsonrpc":"2.0","id":1,"method":"sampling/createMessage","params":"` + big + "\"}\n", "warning|", '\n'},
		{"nor with it last (TypeScript)", `{"method":"sampling/createMessage","params":"` + big + `","jsonrpc":"2.0","id":1}` + "\n", "warning|", '\n'},
		{"no id: a warning", `{"method":"notifications/progress","params":"` + big + "\"}\n{\"ok\":1}\n", "warning|{\"ok\":1}\n", '\n'},
		{"SSE data line", "event: message\ndata: {\"jsonrpc\":\"2.0\",\"id\":3,\"result\":\"" + big + "\"}\n\n", "event: message\ndata: error 3|\n", '\n'},
		{"a body over the limit", `{"jsonrpc":"2.0","id":4,"result":"` + big + `"}`, "error 4|", 0},
		{"a body under it", `{"jsonrpc":"2.0","id":4}`, `{"jsonrpc":"2.0","id":4}`, 0},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			for _, r := range []io.Reader{strings.NewReader(c.in), iotest.OneByteReader(strings.NewReader(c.in))} {
				cr := newCapReader(r, c.sep, 200)
				cr.tooLarge = func(head, tail []byte, n int64) []byte {
					var m struct {
						ID     json.RawMessage
						Method string
					}
					b := tooLargeMessage(head, tail, n)
					prefix := ""
					if rest, ok := bytes.CutPrefix(b, []byte("data: ")); ok {
						prefix, b = "data: ", rest
					}
					if err := json.Unmarshal(b, &m); err != nil {
						t.Fatalf("replacement %q: %v", b, err)
					}
					if m.Method != "" {
						return []byte(prefix + "warning|")
					}
					return []byte(prefix + "error " + string(m.ID) + "|")
				}
				got, err := io.ReadAll(cr)
				if err != nil {
					t.Fatal(err)
				}
				got = bytes.ReplaceAll(got, []byte("|\n"), []byte("|"))
				got = bytes.ReplaceAll(got, []byte("|\x00"), []byte("|"))
				if string(got) != c.want {
					t.Fatalf("got %q\nwant %q", got, c.want)
				}
			}
		})
	}
}

// TestCapReaderKeepsLittle: an over-long message is read without being
// kept: the reader's buffers stay small whatever its length.
func TestCapReaderKeepsLittle(t *testing.T) {
	msg := `{"jsonrpc":"2.0","id":1,"result":"` + strings.Repeat("z", 64<<20) + "\"}\n"
	cr := newCapReader(strings.NewReader(msg), '\n', MaxMessage)
	out, err := io.ReadAll(cr)
	if err != nil {
		t.Fatal(err)
	}
	var m struct {
		ID    int
		Error struct {
			Code    int
			Message string
		}
	}
	if err := json.Unmarshal(out, &m); err != nil || m.ID != 1 || m.Error.Code != CodeMessageTooLarge || !strings.Contains(m.Error.Message, "RESOURCE_EXHAUSTED") {
		t.Fatalf("answer %q (%v)", out, err)
	}
	if c := cap(cr.msg) + cap(cr.head) + cap(cr.tail); c > MaxMessage+capRead+capHead+2*capTail {
		t.Fatalf("the reader kept %d bytes", c)
	}
}

// TestEventCapReader: on an SSE stream the cap is an event's (its lines up
// to a blank line): an event of many data lines, each under the cap, is
// replaced whole by an error answer to its id; events under it pass.
func TestEventCapReader(t *testing.T) {
	line := strings.Repeat("q", 90)
	var big strings.Builder
	big.WriteString("event: message\nid: 17\ndata: {\"result\":{\"text\":\"")
	for range 10 {
		big.WriteString(line + "\ndata: ")
	}
	big.WriteString(`"},"jsonrpc":"2.0","id":42}` + "\n\n")
	small := "event: message\ndata: {\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{}}\n\n"
	in := small + big.String() + small + ": a comment\n\n"
	for _, r := range []io.Reader{strings.NewReader(in), iotest.OneByteReader(strings.NewReader(in))} {
		out, err := io.ReadAll(newEventCapReader(r, 400))
		if err != nil {
			t.Fatal(err)
		}
		parts := strings.Split(string(out), "\n\n")
		if len(parts) != 5 || parts[0]+"\n\n" != small || parts[2]+"\n\n" != small || parts[3] != ": a comment" {
			t.Fatalf("events %q", parts)
		}
		var m struct {
			ID    int
			Error struct{ Code int }
		}
		data, ok := strings.CutPrefix(parts[1], "data: ")
		if !ok || json.Unmarshal([]byte(data), &m) != nil || m.ID != 42 || m.Error.Code != CodeMessageTooLarge {
			t.Fatalf("the event over the cap became %q", parts[1])
		}
	}
}

// TestBackendReaderDropsUnheardNotifications: a backend's notifications
// the pool has no handler for are dropped before the SDK decodes them;
// tools/list_changed, requests and answers pass, on stdio and SSE.
func TestBackendReaderDropsUnheardNotifications(t *testing.T) {
	progress := `{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":1,"progress":3}}`
	logmsg := `{"method": "notifications/message","params":{"level":"info","data":"x"},"jsonrpc":"2.0"}`
	changed := `{"jsonrpc":"2.0","method":"notifications/tools/list_changed"}`
	ping := `{"jsonrpc":"2.0","id":4,"method":"ping"}`
	answer := `{"jsonrpc":"2.0","id":5,"result":{"content":[{"type":"text","text":"\"method\":\"notifications/progress\""}]}}`
	// TypeScript writes the result first: a result naming a notification
	// method is still an answer (the review of the fix).
	tsAnswer := `{"result":{"structuredContent":{"method":"notifications/progress"}},"jsonrpc":"2.0","id":7}`
	// Its method last, after 1 KB of params, or escaped: still dropped.
	late := `{"params":{"progressToken":1,"message":"` + strings.Repeat("p", 1024) + `"},"jsonrpc":"2.0","method":"notifications/progress"}`
	escaped := `{"jsonrpc":"2.0","\u006dethod":"notifications\/message","params":{}}`
	in := strings.Join([]string{progress, changed, logmsg, ping, progress, answer, late, tsAnswer, escaped, ""}, "\n")
	out, err := io.ReadAll(backendReader(newCapReader(strings.NewReader(in), '\n', MaxMessage)))
	if err != nil {
		t.Fatal(err)
	}
	if want := strings.Join([]string{changed, ping, answer, tsAnswer, ""}, "\n"); string(out) != want {
		t.Fatalf("stdio: got %q\nwant %q", out, want)
	}
	ev := func(data string) string { return "event: message\ndata: " + data + "\n\n" }
	in = ev(progress) + ev(answer) + ev(logmsg) + ev(changed)
	out, err = io.ReadAll(backendReader(newEventCapReader(strings.NewReader(in), MaxMessage)))
	if err != nil {
		t.Fatal(err)
	}
	if want := ev(answer) + ev(changed); string(out) != want {
		t.Fatalf("SSE: got %q\nwant %q", out, want)
	}
}

// TestEventCapReaderBoundsLines: an SSE event of more than MaxEventLines
// lines, however small, is replaced as an over-long one.
func TestEventCapReaderBoundsLines(t *testing.T) {
	var ev strings.Builder
	ev.WriteString("event: message\ndata: {\"jsonrpc\":\"2.0\",\"id\":9,\"result\":{\"x\":[")
	for range 40000 {
		ev.WriteString("\ndata: 0,")
	}
	ev.WriteString("\ndata: 0]}}\n\n")
	small := "event: message\ndata: {\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{}}\n\n"
	out, err := io.ReadAll(newEventCapReader(strings.NewReader(ev.String()+small), MaxMessage))
	if err != nil {
		t.Fatal(err)
	}
	parts := strings.Split(string(out), "\n\n")
	if len(parts) != 3 || parts[1]+"\n\n" != small || !strings.Contains(parts[0], `"id":9`) || !strings.Contains(parts[0], "RESOURCE_EXHAUSTED") {
		t.Fatalf("events %.300q", parts)
	}
}
