// Command kube-controlplane runs a real Kubernetes control plane for tests on
// 127.0.0.1: an embedded etcd and kube-apiserver in this process, and
// kube-controller-manager (garbage collector, namespace and service-account
// controllers) as a child process of the same binary.
//
// It prints one JSON line on stdout when the API server answers /readyz, and
// with --exit-on-stdin-eof it exits (removing its temporary directory) as soon
// as its standard input closes, which is how it notices that the test process
// that started it is gone, even after SIGKILL.
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	kcm "k8s.io/kubernetes/cmd/kube-controller-manager/app"
)

type options struct {
	dataDir        string
	apiserverPort  int
	etcdPort       int
	etcdPeerPort   int
	exitOnStdinEOF bool
	controllerMgr  bool
	extraAPIServer []string
	readyTimeout   time.Duration
}

type event struct {
	Event         string `json:"event"`
	Server        string `json:"server,omitempty"`
	Kubeconfig    string `json:"kubeconfig,omitempty"`
	DataDir       string `json:"dataDir,omitempty"`
	APIServerPort int    `json:"apiserverPort,omitempty"`
	EtcdPort      int    `json:"etcdPort,omitempty"`
	Pid           int    `json:"pid,omitempty"`
	Error         string `json:"error,omitempty"`
	LogTail       string `json:"logTail,omitempty"`
}

func main() {
	if len(os.Args) > 1 && os.Args[1] == "controller-manager" {
		cmd := kcm.NewControllerManagerCommand()
		cmd.SetArgs(os.Args[2:])
		if err := cmd.Execute(); err != nil {
			os.Exit(1)
		}
		return
	}
	opts := parseFlags()
	if err := run(opts); err != nil {
		emit(event{Event: "failed", Error: err.Error(), LogTail: logTail(opts.dataDir)})
		os.Exit(1)
	}
}

func parseFlags() options {
	var o options
	fs := flag.NewFlagSet("kube-controlplane", flag.ExitOnError)
	fs.StringVar(&o.dataDir, "data-dir", "", "directory for etcd data, credentials and logs; kept on exit (default: a temporary directory removed on exit)")
	fs.IntVar(&o.apiserverPort, "apiserver-port", 0, "kube-apiserver secure port on 127.0.0.1 (default: a free port)")
	fs.IntVar(&o.etcdPort, "etcd-port", 0, "etcd client port on 127.0.0.1 (default: a free port)")
	fs.IntVar(&o.etcdPeerPort, "etcd-peer-port", 0, "etcd peer port on 127.0.0.1 (default: a free port)")
	fs.BoolVar(&o.exitOnStdinEOF, "exit-on-stdin-eof", false, "exit when standard input is closed (the parent process is gone)")
	fs.BoolVar(&o.controllerMgr, "controller-manager", true, "run kube-controller-manager's garbage collector, namespace and service-account controllers")
	fs.DurationVar(&o.readyTimeout, "ready-timeout", 120*time.Second, "how long to wait for /readyz")
	args := os.Args[1:]
	for i, a := range args {
		if a == "--" {
			o.extraAPIServer = args[i+1:]
			args = args[:i]
			break
		}
	}
	_ = fs.Parse(args)
	return o
}

func run(o options) error {
	sweepStaleDirs()
	ephemeral := o.dataDir == ""
	if ephemeral {
		dir, err := os.MkdirTemp("", tempPrefix)
		if err != nil {
			return err
		}
		o.dataDir = dir
	} else if err := os.MkdirAll(o.dataDir, 0o700); err != nil {
		return err
	}
	cleanup := func() {
		if ephemeral {
			_ = os.RemoveAll(o.dataDir)
		}
	}
	if err := os.WriteFile(filepath.Join(o.dataDir, ownerFile), []byte(fmt.Sprint(os.Getpid())), 0o600); err != nil {
		cleanup()
		return err
	}
	if err := redirectStderr(filepath.Join(o.dataDir, "controlplane.log")); err != nil {
		cleanup()
		return err
	}

	stop := make(chan string, 4)
	if o.exitOnStdinEOF {
		go watchStdin(stop)
	}

	cp, err := startControlPlane(o)
	if err != nil {
		tail := logTail(o.dataDir)
		cleanup()
		emit(event{Event: "failed", Error: err.Error(), LogTail: tail})
		os.Exit(1)
	}
	emit(event{
		Event:         "ready",
		Server:        cp.server,
		Kubeconfig:    cp.kubeconfig,
		DataDir:       o.dataDir,
		APIServerPort: cp.apiserverPort,
		EtcdPort:      cp.etcdPort,
		Pid:           os.Getpid(),
	})

	// The API server owns SIGTERM/SIGINT (it shuts down gracefully and its
	// command returns); everything else that ends the run comes through stop.
	signal.Ignore(syscall.SIGHUP)
	var reason string
	select {
	case reason = <-stop:
	case err := <-cp.apiserverDone:
		reason = fmt.Sprintf("kube-apiserver stopped: %v", err)
	}
	fmt.Fprintf(os.Stderr, "concord control plane stopping: %s\n", reason)
	cp.stopControllerManager()
	if reason == stdinClosed {
		// The parent is gone: nobody will use this control plane again, so
		// skip the graceful drain and just make sure nothing is left behind.
		cleanup()
		os.Exit(0)
	}
	cp.etcd.Close()
	cleanup()
	return nil
}

func emit(e event) {
	line, _ := json.Marshal(e)
	fmt.Fprintln(os.Stdout, string(line))
}
