package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/classifierd/classifierd/internal/testenv"
)

// stdioPeer drives an MCP server process over its stdin and stdout with raw
// newline-delimited JSON-RPC, as a hostile client would.
type stdioPeer struct {
	t      *testing.T
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	lines  chan []byte // stdout, a line at a time
	done   chan error
	stderr *syncBuffer
}

func startStdioPeer(t *testing.T, args ...string) *stdioPeer {
	t.Helper()
	bin, _ := binaries(t)
	r := &stdioPeer{t: t, cmd: exec.Command(bin, args...), lines: make(chan []byte, 64), done: make(chan error, 1), stderr: &syncBuffer{}}
	r.cmd.Stderr = r.stderr
	var err error
	if r.stdin, err = r.cmd.StdinPipe(); err != nil {
		t.Fatal(err)
	}
	stdout, err := r.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := r.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		sc := bufio.NewScanner(stdout)
		sc.Buffer(make([]byte, 1<<20), 16<<20)
		for sc.Scan() {
			r.lines <- bytes.Clone(sc.Bytes())
		}
		close(r.lines)
	}()
	go func() { r.done <- r.cmd.Wait() }()
	t.Cleanup(func() {
		_ = r.stdin.Close()
		select {
		case <-r.done:
		case <-time.After(10 * time.Second):
			_ = r.cmd.Process.Kill()
			<-r.done
		}
		if t.Failed() {
			t.Logf("stderr:\n%s", r.stderr.String())
		}
	})
	return r
}

func (r *stdioPeer) send(line []byte) {
	r.t.Helper()
	if _, err := r.stdin.Write(append(line, '\n')); err != nil {
		r.t.Fatalf("write to the server: %v (it exited: %v)", err, r.exited())
	}
}

// exited says whether the process has ended, and how.
func (r *stdioPeer) exited() string {
	select {
	case err := <-r.done:
		r.done <- err
		return fmt.Sprintf("yes (%v)", err)
	default:
		return "no"
	}
}

// rpcAnswer is a JSON-RPC response as it came on the wire.
type rpcAnswer struct {
	ID     json.RawMessage `json:"id"`
	Result json.RawMessage `json:"result"`
	Error  *struct {
		Code    int64           `json:"code"`
		Message string          `json:"message"`
		Data    json.RawMessage `json:"data"`
	} `json:"error"`
	Method string `json:"method"`
}

// next returns the next message the server writes that is not a
// notification.
func (r *stdioPeer) next() rpcAnswer {
	r.t.Helper()
	timeout := time.After(60 * time.Second)
	for {
		select {
		case line, ok := <-r.lines:
			if !ok {
				r.t.Fatalf("the server closed stdout (it exited: %v)", r.exited())
			}
			var a rpcAnswer
			if err := json.Unmarshal(line, &a); err != nil {
				r.t.Fatalf("the server wrote a line that is not JSON: %q", line)
			}
			if a.Method != "" {
				continue // a notification or a request of the server's
			}
			return a
		case <-timeout:
			r.t.Fatalf("no answer in 60s (it exited: %v)", r.exited())
		}
	}
}

// initialize runs the MCP handshake.
func (r *stdioPeer) initialize() {
	r.t.Helper()
	r.send([]byte(`{"jsonrpc":"2.0","id":"init","method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"hostile","version":"0"}}}`))
	if a := r.next(); a.Error != nil || string(a.ID) != `"init"` {
		r.t.Fatalf("initialize: %+v", a)
	}
	r.send([]byte(`{"jsonrpc":"2.0","method":"notifications/initialized"}`))
}

// vmHWM is a process's peak resident memory, in bytes.
func vmHWM(t *testing.T, pid int) int64 {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(string(b), "\n") {
		if f := strings.Fields(l); len(f) == 3 && f[0] == "VmHWM:" {
			kb, _ := strconv.ParseInt(f[1], 10, 64)
			return kb << 10
		}
	}
	t.Fatal("no VmHWM in /proc status")
	return 0
}

// TestMCPStdioSurvivesBadFrames sends `classifierd mcp` (the real binary,
// over pipes) each frame that used to end the process: bytes that are not
// JSON, JSON nested 10,000 deep, a line over --max-recv-bytes (4 MiB), and
// more. Each gets its JSON-RPC error, a 64 MiB line does not raise the
// process's peak memory by its size (it is skipped as it streams in), and
// a tools/call still answers after all of them.
func TestMCPStdioSurvivesBadFrames(t *testing.T) {
	idx := genIndex(t, "testdata/mini.json")
	for _, cmd := range []struct {
		name        string
		args        []string
		query, want string // a good search_tools call and a tool it finds
	}{
		{"mcp", []string{"mcp", "--index", idx, "--model", testenv.ModelDir(), "--ort-lib", testenv.ORTLib(), "--log-level", "warn"},
			"open a github issue", "create_issue"},
		// nil: proxySetup's servers; the proxy reads stdio with the same reader.
		{"proxy", nil, "weather forecast for Paris", "get_"},
	} {
		t.Run(cmd.name, func(t *testing.T) {
			args := cmd.args
			if args == nil {
				config, _ := proxySetup(t)
				args = proxyArgs(config)
			}
			r := startStdioPeer(t, args...)
			r.initialize()
			deep := strings.Repeat("[", 10000) + strings.Repeat("]", 10000)
			tooLarge := `{"jsonrpc":"2.0","id":8,"method":"tools/call","params":{"name":"search_tools","arguments":{"query":"` +
				strings.Repeat("a", 5<<20) + `"}}}`
			for _, tc := range []struct {
				name     string
				line     string
				wantCode int64  // 0: a result
				wantID   string // the id the answer carries
				wantData string // a part of the error's data
			}{
				{"bytes that are not JSON", "\x00\xff\xfe not json {", -32700, "null", ""},
				{"an unclosed object", `{"jsonrpc":"2.0","id":1,"method":"ping"`, -32700, "null", ""},
				{"arrays nested 10,000 deep", deep, -32600, "null", ""},
				{"a request nested 10,000 deep", `{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"search_tools","arguments":{"query":` +
					deep + `}}}`, -32600, "null", ""},
				{"a line over --max-recv-bytes", tooLarge, -32600, "null", "INPUT_TOO_LARGE"},
				{"JSON that is not JSON-RPC", `{"hello":"world"}`, -32600, "null", ""},
				{"a method that is not a string", `{"jsonrpc":"2.0","id":10,"method":5}`, -32600, "10", ""},
				{"the wrong version", `{"jsonrpc":"1.0","id":"v","method":"ping"}`, -32600, `"v"`, ""},
				{"a number", `42`, -32600, "null", ""},
				{"a batch, which this protocol version dropped", `[{"jsonrpc":"2.0","id":12,"method":"ping"}]`, -32600, "null", ""},
				{"an empty batch", `[]`, -32600, "null", ""},
				{"a request with white space after it", `{"jsonrpc":"2.0","id":13,"method":"ping"}` + " \t ", 0, "13", ""},
			} {
				r.send([]byte(tc.line))
				a := r.next()
				switch {
				case string(a.ID) != tc.wantID:
					t.Errorf("%s: answer id %s, want %s (%+v)", tc.name, a.ID, tc.wantID, a)
				case tc.wantCode == 0 && a.Error != nil:
					t.Errorf("%s: error %+v, want a result", tc.name, a.Error)
				case tc.wantCode != 0 && (a.Error == nil || a.Error.Code != tc.wantCode):
					t.Errorf("%s: %+v, want error %d", tc.name, a, tc.wantCode)
				case tc.wantData != "" && !strings.Contains(string(a.Error.Data), tc.wantData):
					t.Errorf("%s: error data %s, want %s", tc.name, a.Error.Data, tc.wantData)
				}
			}

			// A line of 64 MiB is skipped as it comes: the process's peak
			// memory does not grow by its size.
			hwm := vmHWM(t, r.cmd.Process.Pid)
			huge := bytes.Repeat([]byte("x"), 64<<20)
			r.send(huge)
			if a := r.next(); a.Error == nil || !strings.Contains(string(a.Error.Data), "INPUT_TOO_LARGE") {
				t.Errorf("a 64 MiB line: %+v, want INPUT_TOO_LARGE", a)
			}
			grew := vmHWM(t, r.cmd.Process.Pid) - hwm
			t.Logf("%s: peak RSS grew by %.1f MiB reading a 64 MiB line", cmd.name, float64(grew)/(1<<20))
			if grew > 24<<20 {
				t.Errorf("peak RSS grew by %.1f MiB reading a 64 MiB line: it was buffered", float64(grew)/(1<<20))
			}

			// And the server still serves.
			r.send([]byte(`{"jsonrpc":"2.0","id":"good","method":"tools/call","params":{"name":"search_tools","arguments":{"query":"` + cmd.query + `"}}}`))
			a := r.next()
			if string(a.ID) != `"good"` || a.Error != nil || !strings.Contains(string(a.Result), cmd.want) {
				t.Fatalf("tools/call after the bad frames: %s %+v, want a result naming %s", a.Result, a.Error, cmd.want)
			}
		})
	}
}
