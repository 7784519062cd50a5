// Command capture-prompts records what real programs print when they wait
// for input, by running them under a pseudo-terminal in a scratch
// directory, and what ordinary commands print when they do not wait. It
// never answers a prompt: once the output goes quiet it records the bytes
// and kills the program, so nothing is changed.
//
//	go run ./tools/capture-prompts -out terminal/testdata/captured
//	go run ./tools/capture-prompts -set corpus -j 4
//
// Each capture is <name>.txt; labels.jsonl says whether the program was
// waiting, for what, and whether answering would be dangerous. Programs
// that are not installed are skipped and reported.
//
// The "captured" set is the project's own 33 scenarios. The "corpus" set
// (corpus.go) is a larger one of real programs, labelled also with the
// program and the command line, for leave-program-out evaluation; see
// terminal/testdata/corpus/README.md for the labelling rules.
package main

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/creack/pty"

	"github.com/classifierd/classifierd/terminal/ptysignal"
)

// scenario is one program run and its label.
type scenario struct {
	Name      string        `json:"name"`
	Waiting   bool          `json:"waiting"`
	Type      string        `json:"prompt_type,omitempty"`
	Dangerous bool          `json:"dangerous"`
	Program   string        `json:"program,omitempty"` // executable, for leave-program-out
	Family    string        `json:"family,omitempty"`  // the kind of program (disk, archive, repl, ...), for per-family figures
	Command   string        `json:"command,omitempty"` // the command line, filled from cmd
	Why       string        `json:"why,omitempty"`     // why answering is dangerous
	setup     string        // shell run first in the scratch dir; its background jobs are killed after
	cmd       string        // shell command to capture
	cleanup   string        // shell run after the capture, for daemons the program started itself
	serial    bool          // never run beside another serial scenario (apt and dpkg locks)
	quiet     time.Duration // silence that means waiting, for programs slow to start (0: the -quiet flag)
	// keys are typed one at a time, each once the output has gone quiet,
	// to bring a program to its question (edit a buffer, then ask to
	// quit; type a command into a shell). They never answer the question
	// the capture is of, and run only in the scratch dir.
	keys []string
	// term is the TERM the program sees (default xterm). A terminal type
	// without an alternate screen (linux, vt100) makes curses programs
	// paint over the normal screen.
	term string
}

var scenarios = []scenario{
	{Name: "rm-i", Waiting: true, Type: "yes_no", Dangerous: true, setup: "echo x > notes.txt", cmd: "rm -i notes.txt"},
	{Name: "cp-i", Waiting: true, Type: "yes_no", Dangerous: true, setup: "echo a > a.txt; echo b > b.txt", cmd: "cp -i a.txt b.txt"},
	{Name: "mv-i", Waiting: true, Type: "yes_no", Dangerous: true, setup: "echo a > a.txt; echo b > b.txt", cmd: "mv -i a.txt b.txt"},
	{Name: "ssh-keygen-path", Waiting: true, Type: "path", cmd: "HOME=$PWD ssh-keygen -t ed25519"},
	{Name: "ssh-keygen-overwrite", Waiting: true, Type: "yes_no", Dangerous: true, setup: "ssh-keygen -q -t ed25519 -N '' -f key", cmd: "ssh-keygen -t ed25519 -f key"},
	{Name: "ssh-keygen-passphrase", Waiting: true, Type: "password", cmd: "ssh-keygen -t ed25519 -f newkey"},
	{Name: "python-repl", Waiting: true, Type: "command", cmd: "python3 -q"},
	{Name: "python-input-yes-no", Waiting: true, Type: "yes_no", cmd: `python3 -c 'input("Continue with the upgrade? [y/N] ")'`},
	{Name: "sqlite3-repl", Waiting: true, Type: "command", cmd: "sqlite3"},
	{Name: "gdb-repl", Waiting: true, Type: "command", cmd: "gdb -q"},
	{Name: "openssl-req", Waiting: true, Type: "text", cmd: "openssl req -new -newkey rsa:2048 -nodes -keyout k.pem -out r.csr"},
	{Name: "openssl-pass", Waiting: true, Type: "password", cmd: "openssl genrsa -aes256 -out k.pem 2048"},
	{Name: "mkfs-existing", Waiting: true, Type: "yes_no", Dangerous: true, setup: "truncate -s 8M disk.img && mkfs.ext4 -q -F disk.img", cmd: "mkfs.ext4 disk.img"},
	{Name: "bash-read", Waiting: true, Type: "text", cmd: `bash -c 'read -p "Enter your name: " x'`},
	{Name: "bash-read-secret", Waiting: true, Type: "password", cmd: `bash -c 'read -s -p "Password: " x'`},
	{Name: "bash-select", Waiting: true, Type: "choice", cmd: `bash -c 'select f in apple pear plum; do break; done'`},
	{Name: "passwd", Waiting: true, Type: "password", cmd: "passwd nobody"},
	{Name: "bash-shell", Waiting: true, Type: "command", cmd: `env PS1='dev@box:~/src$ ' bash --norc -i`},
	{Name: "python-drop-confirm", Waiting: true, Type: "yes_no", Dangerous: true, cmd: `python3 -c 'print("Dropping schema analytics"); input("Delete 3 tables? (yes/no): ")'`},
	{Name: "ls-l", Waiting: false, cmd: "ls -l /etc | head -n 15"},
	{Name: "uname", Waiting: false, cmd: "uname -a"},
	{Name: "os-release", Waiting: false, cmd: "cat /etc/os-release"},
	{Name: "python-print-question", Waiting: false, cmd: `python3 -c 'print("Why? Because the cache was stale.")'`},
	{Name: "echo-colon", Waiting: false, cmd: `echo "Note: the file was saved."; echo "Password policy: strong"`},
	{Name: "progress-cr", Waiting: false, cmd: `for i in 10 50 100; do printf "\rDownloading %s%%" $i; sleep 0.1; done; echo; echo "Done."`},
	{Name: "sqlite3-query", Waiting: false, cmd: `sqlite3 :memory: "select 'total: ' || 42;"`},
	{Name: "df", Waiting: false, cmd: "df -h / | head -n 3"},
	{Name: "git-version", Waiting: false, cmd: "git --version"},
	{Name: "psql-no-server", Waiting: false, cmd: "psql -h 127.0.0.1 -p 1 -U nobody -w 2>&1 || true"},
	{Name: "compiler-error", Waiting: false, cmd: `printf 'package main\nfunc main() { x }\n' > m.go && go vet m.go 2>&1 || true`},
	{Name: "log-lines", Waiting: false, cmd: `echo "2026-01-01T10:00:00Z INFO server started on :8080"; echo "2026-01-01T10:00:01Z WARN retrying: connection refused"`},
	{Name: "are-you-sure-statement", Waiting: false, cmd: `echo "Are you sure? Yes, we checked twice."`},
}

// sets are the scenario lists the -set flag selects, with their output
// directories.
var sets = map[string]struct {
	scenarios []scenario
	out       string
	corpus    bool // labels carry program and command, sorted by name; clean environment
}{
	"captured": {scenarios, "terminal/testdata/captured", false},
	"corpus":   {corpusScenarios, "terminal/testdata/corpus", true},
}

func main() {
	set := flag.String("set", "captured", "scenario set: captured or corpus")
	out := flag.String("out", "", "output directory (default: the set's testdata folder)")
	quiet := flag.Duration("quiet", 800*time.Millisecond, "output silence that means the program is waiting")
	run := flag.String("run", "", "capture only scenarios whose name matches this regexp; labels keep the others' captures")
	jobs := flag.Int("j", 1, "scenarios captured at once")
	signalsOnly := flag.Bool("signals-only", false, "corpus: record only the pty signals (signals.jsonl), keeping the captures and labels")
	flag.Parse()
	s, ok := sets[*set]
	if !ok {
		fail(fmt.Errorf("unknown set %q", *set))
	}
	if *out == "" {
		*out = s.out
	}
	var only *regexp.Regexp
	if *run != "" {
		var err error
		if only, err = regexp.Compile(*run); err != nil {
			fail(err)
		}
	}
	if err := os.MkdirAll(*out, 0o755); err != nil {
		fail(err)
	}
	seen := map[string]bool{}
	for _, sc := range s.scenarios {
		if seen[sc.Name] {
			fail(fmt.Errorf("scenario %q is listed twice", sc.Name))
		}
		seen[sc.Name] = true
	}
	opt := options{quiet: quiet, clean: s.corpus, signalsOnly: *signalsOnly}
	captured, signals := captureAll(s.scenarios, only, *jobs, opt, *out)
	if s.corpus {
		if err := writeSignals(filepath.Join(*out, "signals.jsonl"), signals); err != nil {
			fail(err)
		}
	}
	if *signalsOnly {
		return
	}
	var labels bytes.Buffer
	list := s.scenarios
	if s.corpus {
		list = append([]scenario(nil), list...)
		sort.Slice(list, func(i, j int) bool { return list[i].Name < list[j].Name })
	}
	for _, sc := range list {
		// A full run labels what it captured; a -run or a corpus run also
		// keeps the captures earlier runs made.
		if !captured[sc.Name] {
			if only == nil && !s.corpus {
				continue
			}
			if _, err := os.Stat(filepath.Join(*out, sc.Name+".txt")); err != nil {
				continue
			}
		}
		if s.corpus {
			sc.Command = sc.cmd
		}
		b, _ := json.Marshal(sc)
		labels.Write(b)
		labels.WriteByte('\n')
	}
	if err := os.WriteFile(filepath.Join(*out, "labels.jsonl"), labels.Bytes(), 0o644); err != nil {
		fail(err)
	}
}

// options are the capture settings shared by every scenario of a run.
type options struct {
	quiet       *time.Duration
	clean       bool // corpus: a small fixed environment, cursor queries answered, silence is waiting
	signalsOnly bool // record the pty signals, not the captures
}

// signalRecord is what the kernel said about a capture's pty when the
// capture ended (package ptysignal): the fields a hub sends as
// DetectInputPrompt's reading_input, echo_off and canonical_mode.
type signalRecord struct {
	Name         string `json:"name"`
	ReadingInput bool   `json:"reading_input"`
	EchoOff      bool   `json:"echo_off"`
	Canonical    bool   `json:"canonical_mode"`
	Exited       bool   `json:"exited,omitempty"` // the program had ended: nothing to read
}

// writeSignals merges records into the signals file at path, keeping the
// records of scenarios this run did not capture, sorted by name.
func writeSignals(path string, records map[string]signalRecord) error {
	all := map[string]signalRecord{}
	if b, err := os.ReadFile(path); err == nil {
		for _, line := range bytes.Split(b, []byte("\n")) {
			var r signalRecord
			if len(line) > 0 && json.Unmarshal(line, &r) == nil {
				all[r.Name] = r
			}
		}
	}
	for k, v := range records {
		all[k] = v
	}
	names := make([]string, 0, len(all))
	for k := range all {
		names = append(names, k)
	}
	sort.Strings(names)
	var out bytes.Buffer
	for _, n := range names {
		b, _ := json.Marshal(all[n])
		out.Write(b)
		out.WriteByte('\n')
	}
	return os.WriteFile(path, out.Bytes(), 0o644)
}

// captureAll captures the selected scenarios, jobs at a time, serial ones
// one after another, writes each capture to out and reports which it
// captured.
func captureAll(list []scenario, only *regexp.Regexp, jobs int, opt options, out string) (map[string]bool, map[string]signalRecord) {
	var mu, serial sync.Mutex
	captured := map[string]bool{}
	signals := map[string]signalRecord{}
	sem := make(chan struct{}, max(jobs, 1))
	var wg sync.WaitGroup
	for _, sc := range list {
		if only != nil && !only.MatchString(sc.Name) {
			continue
		}
		first := sc.Program
		if first == "" {
			first = strings.Fields(sc.cmd)[0]
			if strings.Contains(first, "=") {
				first = strings.Fields(sc.cmd)[1]
			}
		}
		if _, err := exec.LookPath(first); err != nil && first != "for" {
			fmt.Printf("skip %-24s %s is not installed\n", sc.Name, first)
			continue
		}
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			if sc.serial {
				serial.Lock()
				defer serial.Unlock()
			}
			data, sig, err := capture(sc, opt)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				fmt.Printf("skip %-24s %v\n", sc.Name, err)
				return
			}
			sig.Name = sc.Name
			signals[sc.Name] = sig
			if opt.signalsOnly {
				fmt.Printf("ok   %-24s %+v\n", sc.Name, sig)
				return
			}
			if err := os.WriteFile(filepath.Join(out, sc.Name+".txt"), data, 0o644); err != nil {
				fail(err)
			}
			captured[sc.Name] = true
			fmt.Printf("ok   %-24s %d bytes, last line %q\n", sc.Name, len(data), lastLine(data))
		}()
	}
	wg.Wait()
	return captured, signals
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "capture-prompts:", err)
	os.Exit(1)
}

func lastLine(b []byte) string {
	s := strings.TrimRight(string(b), "\n")
	if i := strings.LastIndexByte(s, '\n'); i >= 0 {
		s = s[i+1:]
	}
	return s
}

// capture runs one scenario under a pty in a scratch dir and returns what
// it printed until it exited or went quiet. The scratch dir has a fixed
// name per scenario so that paths in the output are the same every run.
func capture(sc scenario, opt options) (_ []byte, sig signalRecord, _ error) {
	dir := filepath.Join(os.TempDir(), "capture-prompts", sc.Name)
	if err := os.RemoveAll(dir); err != nil {
		return nil, sig, err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, sig, err
	}
	defer os.RemoveAll(dir)
	env := append(os.Environ(), "TERM=xterm", "LANG=C.UTF-8", "HOME="+dir)
	if opt.clean {
		// Nothing of this machine's environment reaches a capture.
		env = []string{"PATH=/usr/local/go/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin:/root/.cargo/bin",
			"TERM=xterm", "LANG=C.UTF-8", "HOME=" + dir, "USER=root", "LOGNAME=root", "SHELL=/bin/bash"}
	}
	if sc.cleanup != "" {
		defer func() {
			c := exec.Command("bash", "-c", sc.cleanup)
			c.Dir, c.Env = dir, env
			_ = c.Run()
		}()
	}
	if sc.setup != "" {
		setup := exec.Command("bash", "-c", sc.setup)
		setup.Dir = dir
		setup.Env = env
		// Servers the setup leaves in the background share its process
		// group and are killed with it once the capture is done.
		setup.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		setup.WaitDelay = 2 * time.Second
		out, err := setup.CombinedOutput()
		if setup.Process != nil {
			defer syscall.Kill(-setup.Process.Pid, syscall.SIGKILL)
		}
		if err != nil {
			return nil, sig, fmt.Errorf("setup: %v: %s", err, out)
		}
	}
	cmd := exec.Command("bash", "-c", sc.cmd)
	cmd.Dir = dir
	cmd.Env = env
	if sc.term != "" {
		cmd.Env = append(append([]string(nil), env...), "TERM="+sc.term)
	}
	f, err := pty.StartWithSize(cmd, &pty.Winsize{Rows: 40, Cols: 120})
	if err != nil {
		return nil, sig, err
	}
	var mu sync.Mutex
	var buf bytes.Buffer
	start := time.Now()
	last := start
	done := make(chan struct{})
	go func() {
		defer close(done)
		b := make([]byte, 4096)
		for {
			n, err := f.Read(b)
			if n > 0 {
				mu.Lock()
				buf.Write(b[:n])
				last = time.Now()
				mu.Unlock()
				// A real terminal answers a cursor position query; irb,
				// bpython and busybox wait for the answer before they
				// show their prompt. This answers the terminal's part,
				// never the program's question.
				if opt.clean && bytes.Contains(b[:n], []byte("\x1b[6n")) {
					_, _ = f.Write([]byte("\x1b[1;1R"))
				}
			}
			if err != nil {
				return
			}
		}
	}()
	quiet := *opt.quiet
	if sc.quiet > 0 {
		quiet = sc.quiet
	}
	// A patient scenario's program may be silent longer than the usual
	// limits (apt on a busy machine): its quiet sets them.
	deadline := start.Add(max(15*time.Second, quiet+10*time.Second))
	silent := max(6*time.Second, quiet)
	keys := sc.keys
	for time.Now().Before(deadline) {
		select {
		case <-done:
			_ = cmd.Wait()
			f.Close()
			mu.Lock()
			defer mu.Unlock()
			return normalise(buf.Bytes()), signalRecord{Exited: true}, nil
		case <-time.After(100 * time.Millisecond):
		}
		mu.Lock()
		// In the corpus a program that has printed nothing for a while
		// waits silently (dc, cat).
		idle := time.Since(last) > quiet && buf.Len() > 0 || opt.clean && time.Since(start) > silent && buf.Len() == 0
		if idle && len(keys) > 0 {
			// Quiet: the program reads; type the next keys and wait
			// for it to go quiet again.
			_, _ = f.Write([]byte(keys[0]))
			keys, last, idle = keys[1:], time.Now(), false
			deadline = deadline.Add(5 * time.Second)
		}
		mu.Unlock()
		if idle {
			break
		}
	}
	// What the kernel says now, as a hub would read it before asking.
	if s, err := ptysignal.Read(f); err == nil {
		sig = signalRecord{ReadingInput: s.ReadingInput, EchoOff: s.EchoOff, Canonical: s.Canonical}
	} else {
		sig.Exited = true
	}
	// pty.Start made the program a session leader: kill its whole group
	// before the pty closes, so no child ever reads an end of input and
	// takes it as an answer.
	_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	_ = cmd.Wait()
	f.Close()
	// A daemon the program left behind (screen) may hold the pty open;
	// the output read so far is the capture all the same.
	select {
	case <-done:
	case <-time.After(2 * time.Second):
	}
	mu.Lock()
	defer mu.Unlock()
	return normalise(buf.Bytes()), sig, nil
}

// normalise turns the pty's CRLF line ends into LF, as a log file written
// by a session recorder would have them; lone CRs (progress bars) stay.
func normalise(b []byte) []byte {
	return bytes.ReplaceAll(b, []byte("\r\n"), []byte("\n"))
}
