//go:build linux

package ptysignal

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// waitCalls are the system calls a program blocked on input sleeps in:
// read itself, and the multiplexers line editors and event loops wait in
// before they read.
var waitCalls = map[int]bool{
	unix.SYS_READ: true, unix.SYS_READV: true, unix.SYS_PSELECT6: true, unix.SYS_PPOLL: true,
	unix.SYS_EPOLL_PWAIT: true, unix.SYS_EPOLL_PWAIT2: true,
}

// Read returns the signals of the terminal whose master is ptmx. The
// foreground group counts as reading when one of its processes is asleep
// in read/readv on a descriptor that is this terminal, or in a poll or
// select call while one of its standard descriptors is this terminal (the
// call's descriptor set cannot be read from /proc, so a program that polls
// only the network while holding the terminal counts too).
func Read(ptmx *os.File) (Signals, error) {
	fd := int(ptmx.Fd())
	tio, err := unix.IoctlGetTermios(fd, unix.TCGETS)
	if err != nil {
		return Signals{}, fmt.Errorf("ptysignal: terminal modes: %w", err)
	}
	pgrp, err := unix.IoctlGetInt(fd, unix.TIOCGPGRP)
	if err != nil {
		return Signals{}, fmt.Errorf("ptysignal: foreground group: %w", err)
	}
	slave, err := slaveName(fd)
	if err != nil {
		return Signals{}, err
	}
	s := Signals{EchoOff: tio.Lflag&unix.ECHO == 0, Canonical: tio.Lflag&unix.ICANON != 0, Foreground: pgrp}
	pids, err := groupMembers(pgrp)
	if err != nil {
		return s, err
	}
	for _, pid := range pids {
		if reading(pid, slave) {
			s.ReadingInput = true
			break
		}
	}
	return s, nil
}

// slaveName is the /dev/pts path of the master's slave.
func slaveName(fd int) (string, error) {
	n, err := unix.IoctlGetUint32(fd, unix.TIOCGPTN)
	if err != nil {
		return "", fmt.Errorf("ptysignal: not a pty master: %w", err)
	}
	return "/dev/pts/" + strconv.FormatUint(uint64(n), 10), nil
}

// groupMembers lists the processes whose process group is pgrp.
func groupMembers(pgrp int) ([]int, error) {
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return nil, fmt.Errorf("ptysignal: %w", err)
	}
	var pids []int
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if g, err := unix.Getpgid(pid); err == nil && g == pgrp {
			pids = append(pids, pid)
		}
	}
	return pids, nil
}

// reading reports whether a thread of pid sleeps waiting for input from
// the terminal slave. /proc/<pid>/task/<tid>/syscall is "<nr> <arg0> ..."
// while the thread is blocked in a system call, "running" or "-1 ..."
// otherwise. Every thread counts: a JVM or Node.js program reads its
// terminal from a thread other than the main one.
func reading(pid int, slave string) bool {
	tasks, err := os.ReadDir(filepath.Join("/proc", strconv.Itoa(pid), "task"))
	if err != nil {
		return false
	}
	for _, t := range tasks {
		b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "task", t.Name(), "syscall"))
		if err == nil && waitsOnTerminal(pid, strings.Fields(string(b)), slave) {
			return true
		}
	}
	return false
}

// waitsOnTerminal judges one blocked system call: a read of the terminal,
// or a poll, select or epoll wait whose read set holds it (read from the
// process's memory or its epoll fdinfo; when that cannot be read, a
// standard descriptor being the terminal counts).
func waitsOnTerminal(pid int, f []string, slave string) bool {
	if len(f) < 4 {
		return false
	}
	nr, err := strconv.Atoi(f[0])
	if err != nil || !waitCalls[nr] {
		return false
	}
	var args [3]uint64
	for i := range args {
		if args[i], err = strconv.ParseUint(strings.TrimPrefix(f[i+1], "0x"), 16, 64); err != nil {
			return false
		}
	}
	isTTY := func(fd uint64) bool { return fd < 1<<20 && isTerminal(pid, int(fd), slave) }
	var fds []uint64
	var ok bool
	switch {
	case nr == unix.SYS_READ || nr == unix.SYS_READV:
		return isTTY(args[0])
	case nr == unix.SYS_PPOLL || isPoll(nr):
		fds, ok = pollFDs(pid, uintptr(args[0]), args[1])
	case nr == unix.SYS_PSELECT6 || isSelect(nr):
		fds, ok = selectFDs(pid, uintptr(args[1]), args[0])
	default: // epoll
		fds, ok = epollFDs(pid, args[0])
	}
	if !ok {
		fds = []uint64{0, 1, 2}
	}
	for _, fd := range fds {
		if isTTY(fd) {
			return true
		}
	}
	return false
}

// maxWatched bounds how many descriptors of one wait call are inspected.
const maxWatched = 4096

// pollFDs are the descriptors a poll waits to read (POLLIN), from the
// pollfd array in the process's memory.
func pollFDs(pid int, addr uintptr, n uint64) ([]uint64, bool) {
	if n == 0 || n > maxWatched {
		return nil, false
	}
	buf := make([]byte, 8*n) // struct pollfd { int fd; short events, revents; }
	if !readMem(pid, addr, buf) {
		return nil, false
	}
	var out []uint64
	for i := uint64(0); i < n; i++ {
		e := buf[8*i:]
		fd := int32(uint32(e[0]) | uint32(e[1])<<8 | uint32(e[2])<<16 | uint32(e[3])<<24)
		events := uint16(e[4]) | uint16(e[5])<<8
		if fd >= 0 && events&unix.POLLIN != 0 {
			out = append(out, uint64(fd))
		}
	}
	return out, true
}

// selectFDs are the descriptors in a select's read set, from the fd_set
// bitmap in the process's memory.
func selectFDs(pid int, addr uintptr, nfds uint64) ([]uint64, bool) {
	if addr == 0 {
		return nil, true // no read set: waiting for nothing to read
	}
	if nfds == 0 || nfds > maxWatched {
		return nil, false
	}
	buf := make([]byte, (nfds+7)/8)
	if !readMem(pid, addr, buf) {
		return nil, false
	}
	var out []uint64
	for fd := uint64(0); fd < nfds; fd++ {
		if buf[fd/8]&(1<<(fd%8)) != 0 {
			out = append(out, fd)
		}
	}
	return out, true
}

// epollFDs are the descriptors an epoll instance watches for input, from
// /proc/<pid>/fdinfo/<epfd> ("tfd: 0 events: 19 ...").
func epollFDs(pid int, epfd uint64) ([]uint64, bool) {
	if epfd >= 1<<20 {
		return nil, false
	}
	b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "fdinfo", strconv.FormatUint(epfd, 10)))
	if err != nil {
		return nil, false
	}
	var out []uint64
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) < 4 || f[0] != "tfd:" || f[2] != "events:" {
			continue
		}
		fd, err1 := strconv.ParseUint(f[1], 10, 32)
		ev, err2 := strconv.ParseUint(f[3], 16, 32)
		if err1 == nil && err2 == nil && ev&unix.EPOLLIN != 0 {
			out = append(out, fd)
		}
	}
	return out, true
}

// readMem reads len(buf) bytes at addr in pid's memory.
func readMem(pid int, addr uintptr, buf []byte) bool {
	local := []unix.Iovec{{Base: &buf[0]}}
	local[0].SetLen(len(buf))
	remote := []unix.RemoteIovec{{Base: addr, Len: len(buf)}}
	n, err := unix.ProcessVMReadv(pid, local, remote, 0)
	return err == nil && n == len(buf)
}

// isTerminal reports whether pid's descriptor fd is the terminal: the pty
// slave by name, or /dev/tty, which for a process of the terminal's
// foreground group is that same terminal (getpass, ssh and sudo open it).
func isTerminal(pid, fd int, slave string) bool {
	target, err := os.Readlink(filepath.Join("/proc", strconv.Itoa(pid), "fd", strconv.Itoa(fd)))
	return err == nil && (target == slave || target == "/dev/tty")
}
