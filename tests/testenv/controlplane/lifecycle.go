package main

import (
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

const (
	tempPrefix  = "concord-cp-"
	ownerFile   = "owner.pid"
	stdinClosed = "standard input closed"
)

// watchStdin reports when standard input reaches end of file: the parent holds
// the write end of the pipe, and the kernel closes it however the parent dies.
func watchStdin(stop chan<- string) {
	_, _ = io.Copy(io.Discard, os.Stdin)
	stop <- stdinClosed
}

// sweepStaleDirs removes temporary directories of control planes whose
// process no longer exists (for example one killed with SIGKILL itself).
func sweepStaleDirs() {
	matches, _ := filepath.Glob(filepath.Join(os.TempDir(), tempPrefix+"*"))
	for _, dir := range matches {
		raw, err := os.ReadFile(filepath.Join(dir, ownerFile))
		if err != nil {
			continue
		}
		pid, err := strconv.Atoi(strings.TrimSpace(string(raw)))
		if err != nil || pid <= 0 {
			continue
		}
		if syscall.Kill(pid, 0) == syscall.ESRCH {
			_ = os.RemoveAll(dir)
		}
	}
}

// redirectStderr sends everything the embedded components log to a file, so
// the test output stays readable and a failure can show the log's tail.
func redirectStderr(path string) error {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return err
	}
	if err := syscall.Dup3(int(f.Fd()), 2, 0); err != nil {
		return err
	}
	os.Stderr = f
	return nil
}

func logTail(dir string) string {
	if dir == "" {
		return ""
	}
	raw, err := os.ReadFile(filepath.Join(dir, "controlplane.log"))
	if err != nil {
		return ""
	}
	lines := strings.Split(strings.TrimRight(string(raw), "\n"), "\n")
	if len(lines) > 40 {
		lines = lines[len(lines)-40:]
	}
	return strings.Join(lines, "\n")
}

// choosePorts fills every zero port with a free one. All the listeners stay
// open until every port is chosen, so the kernel cannot hand the same port out
// twice (it did: etcd and the API server once both got 36145).
func choosePorts(ports ...*int) error {
	var held []net.Listener
	defer func() {
		for _, l := range held {
			l.Close()
		}
	}()
	for _, p := range ports {
		if *p != 0 {
			continue
		}
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return fmt.Errorf("choosing a free port: %w", err)
		}
		held = append(held, l)
		*p = l.Addr().(*net.TCPAddr).Port
	}
	return nil
}
