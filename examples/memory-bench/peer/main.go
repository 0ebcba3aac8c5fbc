// Command memory-bench-peer is the controller-runtime operator of concord's
// memory benchmark: a manager with its informer cache of Pods (or of the
// benchmark's Widgets), metrics and health endpoints on 127.0.0.1
// ephemeral ports and leader election off, whose reconciler copies each
// object's wanted round (an annotation the benchmark sets) into a label
// with client.MergeFromWithOptimisticLock — the reconcile concord's
// operator does through its `strict` strategy.
//
// It prints a status line on stdout four times a second:
//
//	status cached=N synced=true reconciles=R writes=W failed=F allocs=A
//
// where allocs is runtime.MemStats.Mallocs. SIGTERM stops it.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"runtime"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	toolscache "k8s.io/client-go/tools/cache"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/log"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

// The keys the benchmark and both operators agree on.
const (
	wantKey  = "memory-bench.concord.dev/want"
	roundKey = "memory-bench.concord.dev/round"
)

// widgetGV is the benchmark's custom resource group and version.
var widgetGV = schema.GroupVersion{Group: "memory-bench.concord.dev", Version: "v1"}

// Widget is the benchmark's custom resource, typed as a kubebuilder
// project would have it.
type Widget struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	Spec              WidgetSpec `json:"spec,omitempty"`
}

// WidgetSpec is what a Widget holds.
type WidgetSpec struct {
	Message string `json:"message"`
	Size    int32  `json:"size"`
}

// WidgetList is a list of Widgets.
type WidgetList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []Widget `json:"items"`
}

// DeepCopyObject copies a Widget (its spec holds scalars only).
func (in *Widget) DeepCopyObject() kruntime.Object {
	out := new(Widget)
	*out = *in
	in.ObjectMeta.DeepCopyInto(&out.ObjectMeta)
	return out
}

// DeepCopyObject copies a WidgetList.
func (in *WidgetList) DeepCopyObject() kruntime.Object {
	out := new(WidgetList)
	*out = *in
	in.ListMeta.DeepCopyInto(&out.ListMeta)
	if in.Items != nil {
		out.Items = make([]Widget, len(in.Items))
		for i := range in.Items {
			out.Items[i] = *in.Items[i].DeepCopyObject().(*Widget)
		}
	}
	return out
}

type counters struct {
	cached, reconciles, writes, failed atomic.Int64
	synced                             atomic.Bool
}

type reconciler struct {
	client   client.Client
	newObj   func() client.Object
	sleep    time.Duration
	counters *counters
}

func (r *reconciler) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	r.counters.reconciles.Add(1)
	if r.sleep > 0 {
		time.Sleep(r.sleep)
	}
	obj := r.newObj()
	if err := r.client.Get(ctx, req.NamespacedName, obj); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	want := obj.GetAnnotations()[wantKey]
	labels := obj.GetLabels()
	if want == "" || labels[roundKey] == want {
		return reconcile.Result{}, nil
	}
	patch := client.MergeFromWithOptions(obj.DeepCopyObject().(client.Object), client.MergeFromWithOptimisticLock{})
	if labels == nil {
		labels = map[string]string{}
	}
	labels[roundKey] = want
	obj.SetLabels(labels)
	if err := r.client.Patch(ctx, obj, patch); err != nil {
		r.counters.failed.Add(1)
		if apierrors.IsNotFound(err) {
			return reconcile.Result{}, nil
		}
		// A conflict, as any error: requeued with the controller's backoff.
		return reconcile.Result{}, err
	}
	r.counters.writes.Add(1)
	return reconcile.Result{}, nil
}

func main() {
	if err := run(); err != nil {
		fmt.Fprintf(os.Stderr, "memory-bench-peer: %v\n", err)
		os.Exit(1)
	}
}

func run() error {
	namespace := flag.String("namespace", "", "namespace to watch")
	kind := flag.String("kind", "pods", "pods or widgets")
	cacheMode := flag.String("cache", "full", "full, stripped (managedFields removed) or metadata (PartialObjectMetadata)")
	concurrency := flag.Int("concurrency", 4, "MaxConcurrentReconciles")
	sleepMs := flag.Int("sleep-ms", 0, "milliseconds each reconcile sleeps first")
	flag.Parse()
	log.SetLogger(logrDiscard())

	// -kubeconfig is controller-runtime's own flag, read by GetConfig.
	cfg, err := ctrl.GetConfig()
	if err != nil {
		return err
	}
	// No client-side rate limit, as concord's client has none.
	cfg.QPS = -1

	scheme := kruntime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		return err
	}
	scheme.AddKnownTypes(widgetGV, &Widget{}, &WidgetList{})
	metav1.AddToGroupVersion(scheme, widgetGV)

	var newObj func() client.Object
	var gvk schema.GroupVersionKind
	switch *kind {
	case "pods":
		newObj = func() client.Object { return &corev1.Pod{} }
		gvk = corev1.SchemeGroupVersion.WithKind("Pod")
	case "widgets":
		newObj = func() client.Object { return &Widget{} }
		gvk = widgetGV.WithKind("Widget")
	default:
		return fmt.Errorf("-kind: unknown value %q (expected pods or widgets)", *kind)
	}
	cacheOpts := cache.Options{DefaultNamespaces: map[string]cache.Config{*namespace: {}}}
	switch *cacheMode {
	case "full":
	case "stripped":
		cacheOpts.DefaultTransform = cache.TransformStripManagedFields()
	case "metadata":
		// controller-runtime's metadata-only watch: the cache holds
		// PartialObjectMetadata, and the client reads and patches it.
		newObj = func() client.Object {
			meta := &metav1.PartialObjectMetadata{}
			meta.SetGroupVersionKind(gvk)
			return meta
		}
	default:
		return fmt.Errorf("-cache: unknown value %q (expected full, stripped or metadata)", *cacheMode)
	}

	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme:                 scheme,
		Cache:                  cacheOpts,
		Metrics:                metricsserver.Options{BindAddress: "127.0.0.1:0"},
		HealthProbeBindAddress: "127.0.0.1:0",
		LeaderElection:         false,
	})
	if err != nil {
		return err
	}
	if err := mgr.AddHealthzCheck("ping", healthz.Ping); err != nil {
		return err
	}
	if err := mgr.AddReadyzCheck("ping", healthz.Ping); err != nil {
		return err
	}
	c := &counters{}
	r := &reconciler{client: mgr.GetClient(), newObj: newObj, sleep: time.Duration(*sleepMs) * time.Millisecond, counters: c}
	if err := ctrl.NewControllerManagedBy(mgr).
		For(newObj()).
		Named("memory-bench").
		WithOptions(controller.Options{MaxConcurrentReconciles: *concurrency}).
		Complete(r); err != nil {
		return err
	}
	ctx := ctrl.SetupSignalHandler()
	informer, err := mgr.GetCache().GetInformer(ctx, newObj())
	if err != nil {
		return err
	}
	if _, err := informer.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc:    func(any) { c.cached.Add(1) },
		DeleteFunc: func(any) { c.cached.Add(-1) },
	}); err != nil {
		return err
	}
	go func() {
		if mgr.GetCache().WaitForCacheSync(ctx) {
			c.synced.Store(true)
		}
	}()
	go report(ctx, c)
	return mgr.Start(ctx)
}

// report prints the status line four times a second until ctx is done.
func report(ctx context.Context, c *counters) {
	tick := time.NewTicker(250 * time.Millisecond)
	defer tick.Stop()
	var m runtime.MemStats
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		runtime.ReadMemStats(&m)
		fmt.Printf("status cached=%d synced=%t reconciles=%d writes=%d failed=%d allocs=%d\n",
			c.cached.Load(), c.synced.Load(), c.reconciles.Load(), c.writes.Load(), c.failed.Load(), m.Mallocs)
	}
}

// logrDiscard silences controller-runtime's logger: the benchmark reads
// only the status lines.
func logrDiscard() logr.Logger { return logr.Discard() }
