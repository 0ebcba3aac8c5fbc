// Command stale-bench-peer is the controller-runtime contender of concord's
// stale-decision benchmark: a ReplicaSet-like controller written the
// ordinary way. Each parent ConfigMap (label role=parent) asks for
// data.replicas children; the reconciler lists the parent's children from
// the manager's informer cache (client.List with the label parent=<name>),
// creates the missing ones with generateName and a controller owner
// reference, and deletes the excess. No expectations, no waiting for the
// cache: what controller-runtime v0.25 gives an author by default.
//
// It connects with -kubeconfig (the benchmark points it at its fault
// proxy) and speaks JSON (the benchmark also starts it with
// KUBE_FEATURE_WatchListClient=false: see peer.rs), prints "ready" on stdout once its cache has synced, runs until a
// line "stop" (or the end of stdin), then prints its counters as JSON:
//
//	{"reconciles":N,"creates":C,"deletes":D,"errors":E}
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"runtime/pprof"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr/funcr"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kruntime "k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/log"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
)

// counters is what the peer prints when it stops.
type counters struct {
	Reconciles, Creates, Deletes, Errors atomic.Int64
}

// replicas keeps data.replicas children per parent.
type replicas struct {
	client.Client
	counters *counters
}

// ANCHOR: reconcile
func (r *replicas) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	r.counters.Reconciles.Add(1)
	var parent corev1.ConfigMap
	if err := r.Get(ctx, req.NamespacedName, &parent); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	want, err := strconv.Atoi(parent.Data["replicas"])
	if err != nil {
		want = 0
	}
	var children corev1.ConfigMapList
	if err := r.List(ctx, &children, client.InNamespace(req.Namespace),
		client.MatchingLabels{"parent": req.Name}); err != nil {
		return ctrl.Result{}, err
	}
	for i := len(children.Items); i < want; i++ {
		child := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{
			GenerateName: req.Name + "-",
			Namespace:    req.Namespace,
			Labels:       map[string]string{"parent": req.Name},
		}}
		if err := controllerutil.SetControllerReference(&parent, child, r.Scheme()); err != nil {
			return ctrl.Result{}, err
		}
		if err := r.Create(ctx, child); err != nil {
			r.counters.Errors.Add(1)
			return ctrl.Result{}, err
		}
		r.counters.Creates.Add(1)
	}
	for i := want; i < len(children.Items); i++ {
		if err := r.Delete(ctx, &children.Items[i]); err != nil {
			if apierrors.IsNotFound(err) {
				continue
			}
			r.counters.Errors.Add(1)
			return ctrl.Result{}, err
		}
		r.counters.Deletes.Add(1)
	}
	return ctrl.Result{}, nil
}

// ANCHOR_END: reconcile

func main() {
	if err := run(); err != nil {
		fmt.Fprintf(os.Stderr, "stale-bench-peer: %v\n", err)
		os.Exit(1)
	}
}

func run() error {
	namespace := flag.String("namespace", "", "namespace of the parents and their children")
	concurrency := flag.Int("concurrency", 16, "MaxConcurrentReconciles")
	flag.Parse()
	if *namespace == "" {
		return fmt.Errorf("-namespace is required")
	}
	// Errors and controller-runtime's start-up lines on stderr, which the
	// benchmark shows when the peer fails.
	log.SetLogger(funcr.New(func(prefix, args string) {
		fmt.Fprintln(os.Stderr, prefix, args)
	}, funcr.Options{}))

	// -kubeconfig is controller-runtime's own flag, read by GetConfig.
	cfg, err := ctrl.GetConfig()
	if err != nil {
		return err
	}
	// No client-side rate limit, as concord's client has none.
	cfg.QPS = -1
	// JSON rather than controller-runtime's default protobuf for built-in
	// types: the benchmark's fault proxy reads watch events as JSON lines
	// (and concord's client speaks JSON too).
	cfg.ContentType = "application/json"

	scheme := kruntime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		return err
	}
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme:                 scheme,
		Cache:                  cache.Options{DefaultNamespaces: map[string]cache.Config{*namespace: {}}},
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
		LeaderElection:         false,
	})
	if err != nil {
		return err
	}
	c := &counters{}
	parents := predicate.NewPredicateFuncs(func(o client.Object) bool {
		return o.GetLabels()["role"] == "parent"
	})
	if err := ctrl.NewControllerManagedBy(mgr).
		Named("stale-bench").
		For(&corev1.ConfigMap{}, builder.WithPredicates(parents)).
		Owns(&corev1.ConfigMap{}).
		WithOptions(controller.Options{MaxConcurrentReconciles: *concurrency}).
		Complete(&replicas{Client: mgr.GetClient(), counters: c}); err != nil {
		return err
	}

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if _, err := mgr.GetCache().GetInformer(ctx, &corev1.ConfigMap{}); err != nil {
		return err
	}
	started := make(chan error, 1)
	go func() { started <- mgr.Start(ctx) }()
	synced := make(chan bool, 1)
	go func() { synced <- mgr.GetCache().WaitForCacheSync(ctx) }()
	select {
	case ok := <-synced:
		if !ok {
			return fmt.Errorf("the cache did not sync")
		}
	case err := <-started:
		return fmt.Errorf("the manager stopped before its cache synced: %v", err)
	case <-time.After(90 * time.Second):
		_ = pprof.Lookup("goroutine").WriteTo(os.Stderr, 1)
		return fmt.Errorf("the cache did not sync within 90s")
	}
	fmt.Println("ready")

	// Until "stop" or the end of stdin.
	lines := bufio.NewScanner(os.Stdin)
	for lines.Scan() && lines.Text() != "stop" {
	}
	cancel()
	select {
	case err := <-started:
		if err != nil {
			return err
		}
	case <-time.After(30 * time.Second):
		return fmt.Errorf("the manager did not stop within 30s")
	}
	return json.NewEncoder(os.Stdout).Encode(map[string]int64{
		"reconciles": c.Reconciles.Load(),
		"creates":    c.Creates.Load(),
		"deletes":    c.Deletes.Load(),
		"errors":     c.Errors.Load(),
	})
}
