// Command race-bench-peer is the controller-runtime contender of concord's
// race benchmark: the same logical writes, made the way a Go operator makes
// them — an informer cache, client.MergeFromWithOptimisticLock with
// retry.RetryOnConflict for "strict", a plain client.MergeFrom for "lax".
//
// It reads its work as JSON on stdin, waits for its cache to hold every pod
// (untimed), prints "ready" and waits for "go" on stdin, runs the writes
// with the requested number of workers, and prints its figures as JSON on
// stdout. The benchmark checks the final
// objects itself.
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
)

// change is what one logical write changes.
type change struct {
	RemoveFinalizer string `json:"remove_finalizer,omitempty"`
	LabelKey        string `json:"label_key,omitempty"`
	LabelValue      string `json:"label_value,omitempty"`
}

// item is one logical write to one pod, and maybe its twin: a second path
// writing the same pod at the same moment (Argo's incident).
type item struct {
	Name   string  `json:"name"`
	Change change  `json:"change"`
	Raced  bool    `json:"raced"`
	Twin   *change `json:"twin,omitempty"`
}

// work is what the benchmark sends on stdin.
type work struct {
	Kubeconfig string `json:"kubeconfig"`
	Namespace  string `json:"namespace"`
	Mode       string `json:"mode"`
	Writers    int    `json:"writers"`
	Foreign    string `json:"foreign_finalizer"`
	Items      []item `json:"items"`
}

// result is what it prints on stdout.
type result struct {
	WallS           float64   `json:"wall_s"`
	LatenciesMicros []uint32  `json:"latencies_micros"`
	Writes          uint64    `json:"writes"`
	Succeeded       uint64    `json:"succeeded"`
	FailedWrites    uint64    `json:"failed_writes"`
	Errors          uint64    `json:"errors"`
	Requeues        uint64    `json:"requeues"`
	RequestsByVerb  [4]uint64 `json:"requests_by_verb"`
	Conflicts       uint64    `json:"conflicts"`
	Retries         uint64    `json:"retries"`
	CPUMs           float64   `json:"cpu_ms"`
	PeakRSSKiB      int64     `json:"peak_rss_kib"`
	BytesSent       uint64    `json:"bytes_sent"`
	BytesReceived   uint64    `json:"bytes_received"`
}

const (
	maxRequeues    = 3
	requeueBackoff = 20 * time.Millisecond
)

// counter counts the writer client's requests by verb and its 409s.
type counter struct {
	next      http.RoundTripper
	verbs     [4]atomic.Uint64
	conflicts atomic.Uint64
}

func (c *counter) RoundTrip(r *http.Request) (*http.Response, error) {
	switch r.Method {
	case http.MethodGet:
		c.verbs[0].Add(1)
	case http.MethodPatch:
		c.verbs[1].Add(1)
	case http.MethodPut:
		c.verbs[2].Add(1)
	}
	resp, err := c.next.RoundTrip(r)
	if err == nil && resp.StatusCode == http.StatusConflict {
		c.conflicts.Add(1)
	}
	return resp, err
}

// wire counts the HTTP body bytes of the peer's own clients (its informer
// cache and its writer; not the other controller's), as the benchmark's
// tower layer counts concord's.
type wire struct {
	next     http.RoundTripper
	sent     *atomic.Uint64
	received *atomic.Uint64
}

func (w *wire) RoundTrip(r *http.Request) (*http.Response, error) {
	// client-go sends its bodies from a buffer, so the length is known.
	if r.ContentLength > 0 {
		w.sent.Add(uint64(r.ContentLength))
	}
	resp, err := w.next.RoundTrip(r)
	if err == nil && resp.Body != nil {
		resp.Body = &countedBody{ReadCloser: resp.Body, n: w.received}
	}
	return resp, err
}

// countedBody counts what is read from a response body.
type countedBody struct {
	io.ReadCloser
	n *atomic.Uint64
}

func (b *countedBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	b.n.Add(uint64(n))
	return n, err
}

func main() {
	if err := run(); err != nil {
		fmt.Fprintf(os.Stderr, "race-bench-peer: %v\n", err)
		os.Exit(1)
	}
}

func config(path string) (*rest.Config, error) {
	cfg, err := clientcmd.BuildConfigFromFlags("", path)
	if err != nil {
		return nil, err
	}
	// No client-side rate limit, as concord's client has none: both sides
	// are limited by the API server only.
	cfg.QPS = -1
	return cfg, nil
}

func run() error {
	var w work
	decoder := json.NewDecoder(os.Stdin)
	if err := decoder.Decode(&w); err != nil {
		return fmt.Errorf("reading the work from stdin: %w", err)
	}
	if w.Mode != "strict" && w.Mode != "lax" {
		return fmt.Errorf("unknown mode %q (strict or lax)", w.Mode)
	}
	if w.Writers < 1 {
		return errors.New("writers must be at least 1")
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	var sent, received atomic.Uint64
	counted := func(rt http.RoundTripper) http.RoundTripper {
		return &wire{next: rt, sent: &sent, received: &received}
	}
	cacheCfg, err := config(w.Kubeconfig)
	if err != nil {
		return err
	}
	cacheCfg.Wrap(counted)
	informers, err := cache.New(cacheCfg, cache.Options{
		DefaultNamespaces: map[string]cache.Config{w.Namespace: {}},
		DefaultTransform:  cache.TransformStripManagedFields(),
	})
	if err != nil {
		return err
	}
	if _, err := informers.GetInformer(ctx, &corev1.Pod{}); err != nil {
		return err
	}
	go func() { _ = informers.Start(ctx) }()
	if !informers.WaitForCacheSync(ctx) {
		return errors.New("the pod cache never synced")
	}
	if err := waitFor(ctx, informers, w.Namespace, distinctPods(w.Items)); err != nil {
		return err
	}

	writerCfg, err := config(w.Kubeconfig)
	if err != nil {
		return err
	}
	writerCfg.Wrap(counted)
	count := &counter{}
	writerCfg.Wrap(func(rt http.RoundTripper) http.RoundTripper { count.next = rt; return count })
	c, err := client.New(writerCfg, client.Options{Cache: &client.CacheOptions{Reader: informers}})
	if err != nil {
		return err
	}
	foreignCfg, err := config(w.Kubeconfig)
	if err != nil {
		return err
	}
	foreign, err := client.New(foreignCfg, client.Options{})
	if err != nil {
		return err
	}

	var (
		next                                       atomic.Int64
		succeeded, failed, errs, requeues, retries atomic.Uint64
		mu                                         sync.Mutex
		latencies                                  = make([]uint32, 0, len(w.Items))
		wg                                         sync.WaitGroup
	)
	// one makes one logical write, requeued like the Rust controller does.
	one := func(name string, ch change, raced bool, t0 time.Time) {
		ok := false
		for requeue := 0; requeue <= maxRequeues && !ok; requeue++ {
			if requeue > 0 {
				requeues.Add(1)
				time.Sleep(requeueBackoff * time.Duration(requeue))
			}
			err := write(ctx, c, foreign, &w, item{Name: name, Change: ch, Raced: raced}, requeue == 0, &retries)
			if err == nil {
				ok = true
			} else {
				errs.Add(1)
				if !apierrors.IsConflict(err) && !apierrors.IsTooManyRequests(err) && !isServerError(err) {
					break
				}
			}
		}
		if ok {
			succeeded.Add(1)
		} else {
			failed.Add(1)
		}
		d := time.Since(t0)
		mu.Lock()
		latencies = append(latencies, uint32(min(d.Microseconds(), int64(^uint32(0)))))
		mu.Unlock()
	}
	// Tell the benchmark the cache is full and wait for its go: it reads
	// the API server's clocks in between.
	fmt.Println("ready")
	if err := awaitGo(bufio.NewReader(io.MultiReader(decoder.Buffered(), os.Stdin))); err != nil {
		return err
	}
	sentStart, receivedStart := sent.Load(), received.Load()
	cpuStart := cpu()
	start := time.Now()
	for range w.Writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1)) - 1
				if i >= len(w.Items) {
					return
				}
				it := w.Items[i]
				t0 := time.Now()
				var pair sync.WaitGroup
				if it.Twin != nil {
					pair.Add(1)
					go func() {
						defer pair.Done()
						one(it.Name, *it.Twin, false, t0)
					}()
				}
				one(it.Name, it.Change, it.Raced, t0)
				pair.Wait()
			}
		}()
	}
	wg.Wait()
	wall := time.Since(start)
	cpuMs := float64(cpu()-cpuStart) / float64(time.Millisecond)
	bytesSent, bytesReceived := sent.Load()-sentStart, received.Load()-receivedStart

	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	out := result{
		WallS:           wall.Seconds(),
		LatenciesMicros: latencies,
		Writes:          succeeded.Load() + failed.Load(),
		Succeeded:       succeeded.Load(),
		FailedWrites:    failed.Load(),
		Errors:          errs.Load(),
		Requeues:        requeues.Load(),
		Conflicts:       count.conflicts.Load(),
		Retries:         retries.Load() + requeues.Load(),
		CPUMs:           cpuMs,
		PeakRSSKiB:      ru.Maxrss,
		BytesSent:       bytesSent,
		BytesReceived:   bytesReceived,
	}
	for v := range out.RequestsByVerb {
		out.RequestsByVerb[v] = count.verbs[v].Load()
	}
	return json.NewEncoder(os.Stdout).Encode(out)
}

// write makes one logical write the controller-runtime way. On the first
// attempt of a raced item the other controller adds its finalizer after our
// cache read and before our patch: the window the Kueue incident lived in.
func write(ctx context.Context, c, foreign client.Client, w *work, it item, first bool, retries *atomic.Uint64) error {
	ch := it.Change
	key := types.NamespacedName{Namespace: w.Namespace, Name: it.Name}
	attempt := 0
	body := func() error {
		attempt++
		if attempt > 1 {
			retries.Add(1)
		}
		var pod corev1.Pod
		if err := c.Get(ctx, key, &pod); err != nil {
			return err
		}
		if first && attempt == 1 && it.Raced {
			if err := addForeign(ctx, foreign, &pod, w.Foreign); err != nil {
				return err
			}
		}
		// ANCHOR: peer_write
		orig := pod.DeepCopy()
		changed := false
		if ch.RemoveFinalizer != "" {
			changed = controllerutil.RemoveFinalizer(&pod, ch.RemoveFinalizer) || changed
		}
		if ch.LabelKey != "" && pod.Labels[ch.LabelKey] != ch.LabelValue {
			if pod.Labels == nil {
				pod.Labels = map[string]string{}
			}
			pod.Labels[ch.LabelKey] = ch.LabelValue
			changed = true
		}
		if !changed {
			return nil
		}
		if w.Mode == "lax" {
			return c.Patch(ctx, &pod, client.MergeFrom(orig))
		}
		return c.Patch(ctx, &pod, client.MergeFromWithOptions(orig, client.MergeFromWithOptimisticLock{}))
	}
	if w.Mode == "lax" {
		return body()
	}
	return retry.RetryOnConflict(retry.DefaultRetry, body)
	// ANCHOR_END: peer_write
}

// addForeign is the other controller's write: a strategic merge patch that
// appends its finalizer on the server.
func addForeign(ctx context.Context, foreign client.Client, pod *corev1.Pod, finalizer string) error {
	patch := []byte(fmt.Sprintf(`{"metadata":{"finalizers":[%q]}}`, finalizer))
	target := &corev1.Pod{}
	target.Namespace, target.Name = pod.Namespace, pod.Name
	var err error
	for attempt := 0; attempt < 3; attempt++ {
		err = foreign.Patch(ctx, target, client.RawPatch(types.StrategicMergePatchType, patch), client.FieldOwner("foreign-controller"))
		if err == nil {
			return nil
		}
		time.Sleep(50 * time.Millisecond)
	}
	return fmt.Errorf("the foreign writer could not add its finalizer to %s: %w", pod.Name, err)
}

// awaitGo reads stdin up to the line "go", skipping blank lines (the rest
// of the work's line).
func awaitGo(r *bufio.Reader) error {
	for {
		line, err := r.ReadString('\n')
		switch strings.TrimSpace(line) {
		case "go":
			return nil
		case "":
			if err != nil {
				return fmt.Errorf("stdin ended before go: %w", err)
			}
		default:
			return fmt.Errorf("expected go on stdin, read %q", line)
		}
	}
}

// distinctPods is how many pods the items name: in the Argo scenario one
// pod stands in two items, one per path that writes it.
func distinctPods(items []item) int {
	names := make(map[string]struct{}, len(items))
	for _, it := range items {
		names[it.Name] = struct{}{}
	}
	return len(names)
}

func waitFor(ctx context.Context, c cache.Cache, namespace string, n int) error {
	deadline := time.Now().Add(5 * time.Minute)
	for time.Now().Before(deadline) {
		var pods corev1.PodList
		if err := c.List(ctx, &pods, client.InNamespace(namespace)); err != nil {
			return err
		}
		if len(pods.Items) >= n {
			return nil
		}
		time.Sleep(100 * time.Millisecond)
	}
	return fmt.Errorf("the pod cache of %s does not hold %d pods after 5m", namespace, n)
}

func isServerError(err error) bool {
	var status apierrors.APIStatus
	return errors.As(err, &status) && status.Status().Code >= 500
}

func cpu() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
