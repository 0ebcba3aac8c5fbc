// Command queue-bench-peer is the controller-runtime operator of concord's
// queue benchmark: a manager caching the ConfigMaps of one namespace,
// metrics and health endpoints off, leader election off, and a controller
// whose reconcile takes -work and records nothing but when each object was
// first reconciled.
//
// On stdout it prints one line per object, the first time it is
// reconciled:
//
//	reconciled NAME UNIX_NANOS
//
// -priority-queue chooses the controller's queue: true is
// controller-runtime's priority queue (its default in v0.25), false its
// classic rate-limited work queue. SIGTERM stops it.
package main

import (
	"bufio"
	"context"
	"flag"
	"fmt"
	"os"
	"sync"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/clientcmd"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/log"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

type reconciler struct {
	work time.Duration
	mu   sync.Mutex
	seen map[string]bool
	out  *bufio.Writer
}

func (r *reconciler) Reconcile(_ context.Context, req reconcile.Request) (reconcile.Result, error) {
	now := time.Now().UnixNano()
	r.mu.Lock()
	if !r.seen[req.Name] {
		r.seen[req.Name] = true
		fmt.Fprintf(r.out, "reconciled %s %d\n", req.Name, now)
		r.out.Flush()
	}
	r.mu.Unlock()
	time.Sleep(r.work)
	return reconcile.Result{}, nil
}

func main() {
	kubeconfig := flag.String("cluster-kubeconfig", "", "kubeconfig of the cluster")
	namespace := flag.String("namespace", "", "namespace whose ConfigMaps are reconciled")
	work := flag.Duration("work", 10*time.Millisecond, "how long each reconcile takes")
	concurrency := flag.Int("concurrency", 16, "MaxConcurrentReconciles")
	priority := flag.Bool("priority-queue", true, "use controller-runtime's priority queue")
	flag.Parse()
	log.SetLogger(logr.Discard())

	config, err := clientcmd.BuildConfigFromFlags("", *kubeconfig)
	if err != nil {
		fmt.Fprintln(os.Stderr, "kubeconfig:", err)
		os.Exit(2)
	}
	// The client's rate limit off, as concord's client has none.
	config.QPS = -1
	mgr, err := ctrl.NewManager(config, ctrl.Options{
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
		LeaderElection:         false,
		Cache: cache.Options{
			DefaultNamespaces: map[string]cache.Config{*namespace: {}},
		},
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, "manager:", err)
		os.Exit(2)
	}
	r := &reconciler{work: *work, seen: map[string]bool{}, out: bufio.NewWriter(os.Stdout)}
	err = ctrl.NewControllerManagedBy(mgr).
		For(&corev1.ConfigMap{}).
		WithOptions(controller.Options{
			MaxConcurrentReconciles: *concurrency,
			UsePriorityQueue:        priority,
		}).
		Complete(r)
	if err != nil {
		fmt.Fprintln(os.Stderr, "controller:", err)
		os.Exit(2)
	}
	if err := mgr.Start(ctrl.SetupSignalHandler()); err != nil {
		fmt.Fprintln(os.Stderr, "manager stopped:", err)
		os.Exit(1)
	}
}
