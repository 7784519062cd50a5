// Command capture-prompts records what real programs print when they wait
// for input, by running them under a pseudo-terminal in a scratch
// directory, and what ordinary commands print when they do not wait. It
// never answers a prompt: once the output goes quiet it records the bytes
// and kills the program, so nothing is changed.
//
//	go run ./tools/capture-prompts -out terminal/testdata/captured
//
// Each capture is <name>.txt; labels.jsonl says whether the program was
// waiting, for what, and whether answering would be dangerous. Programs
// that are not installed are skipped and reported.
package main

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/creack/pty"
)

// scenario is one program run and its label.
type scenario struct {
	Name      string `json:"name"`
	Waiting   bool   `json:"waiting"`
	Type      string `json:"prompt_type,omitempty"`
	Dangerous bool   `json:"dangerous"`
	setup     string // shell run first in the scratch dir
	cmd       string // shell command to capture
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

func main() {
	out := flag.String("out", "terminal/testdata/captured", "output directory")
	quiet := flag.Duration("quiet", 800*time.Millisecond, "output silence that means the program is waiting")
	flag.Parse()
	if err := os.MkdirAll(*out, 0o755); err != nil {
		fail(err)
	}
	var labels bytes.Buffer
	for _, sc := range scenarios {
		first := strings.Fields(sc.cmd)[0]
		if strings.Contains(first, "=") {
			first = strings.Fields(sc.cmd)[1]
		}
		if _, err := exec.LookPath(first); err != nil && first != "for" {
			fmt.Printf("skip %-24s %s is not installed\n", sc.Name, first)
			continue
		}
		data, err := capture(sc, *quiet)
		if err != nil {
			fmt.Printf("skip %-24s %v\n", sc.Name, err)
			continue
		}
		if err := os.WriteFile(filepath.Join(*out, sc.Name+".txt"), data, 0o644); err != nil {
			fail(err)
		}
		b, _ := json.Marshal(sc)
		labels.Write(b)
		labels.WriteByte('\n')
		fmt.Printf("ok   %-24s %d bytes, last line %q\n", sc.Name, len(data), lastLine(data))
	}
	if err := os.WriteFile(filepath.Join(*out, "labels.jsonl"), labels.Bytes(), 0o644); err != nil {
		fail(err)
	}
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
// it printed until it exited or went quiet.
func capture(sc scenario, quiet time.Duration) ([]byte, error) {
	dir, err := os.MkdirTemp("", "capture-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	if sc.setup != "" {
		setup := exec.Command("bash", "-c", sc.setup)
		setup.Dir = dir
		if out, err := setup.CombinedOutput(); err != nil {
			return nil, fmt.Errorf("setup: %v: %s", err, out)
		}
	}
	cmd := exec.Command("bash", "-c", sc.cmd)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "TERM=xterm", "LANG=C.UTF-8", "HOME="+dir)
	f, err := pty.StartWithSize(cmd, &pty.Winsize{Rows: 40, Cols: 120})
	if err != nil {
		return nil, err
	}
	var mu sync.Mutex
	var buf bytes.Buffer
	last := time.Now()
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
			}
			if err != nil {
				if err != io.EOF {
					return
				}
				return
			}
		}
	}()
	deadline := time.Now().Add(15 * time.Second)
	for time.Now().Before(deadline) {
		select {
		case <-done:
			_ = cmd.Wait()
			f.Close()
			mu.Lock()
			defer mu.Unlock()
			return normalise(buf.Bytes()), nil
		case <-time.After(100 * time.Millisecond):
		}
		mu.Lock()
		idle := time.Since(last) > quiet && buf.Len() > 0
		mu.Unlock()
		if idle {
			break
		}
	}
	_ = cmd.Process.Kill()
	f.Close()
	_ = cmd.Wait()
	<-done
	mu.Lock()
	defer mu.Unlock()
	return normalise(buf.Bytes()), nil
}

// normalise turns the pty's CRLF line ends into LF, as a log file written
// by a session recorder would have them; lone CRs (progress bars) stay.
func normalise(b []byte) []byte {
	return bytes.ReplaceAll(b, []byte("\r\n"), []byte("\n"))
}
