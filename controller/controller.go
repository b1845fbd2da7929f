// Package controller is kubectl gitops running in the cluster: it watches
// Applications through a shared informer and closes the loop of every open
// break-glass session that nobody would otherwise remember, restoring a
// session marked auto-restore once Git has caught up, by exactly the rule
// restore uses. Only the replica holding the lease acts. It acts through
// the session engine (breakglass) and never decides anything itself that
// restore would not; it never prints (it logs through Log) and never
// reads flags.
package controller

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	"k8s.io/client-go/util/workqueue"

	"github.com/kubectl-gitops/kubectl-gitops/argocd"
	"github.com/kubectl-gitops/kubectl-gitops/audit"
	"github.com/kubectl-gitops/kubectl-gitops/breakglass"
)

// maxRetries bounds the retries of one Application's failing reconcile.
const maxRetries = 5

// Controller closes the loop of open sessions.
type Controller struct {
	// Engine is the session engine, as the controller's own identity;
	// its AppNamespace is the namespace watched ("" for every namespace).
	Engine *breakglass.Engine
	// Argo is the Argo CD API server for the field-level check; nil for
	// resource level.
	Argo *argocd.Server
	// Lease names the coordination.k8s.io Lease the replicas elect a
	// leader with, and Identity this replica in it.
	LeaseNamespace, LeaseName, Identity string
	// LeaseDuration is how long a leader's lease holds (0: 15s).
	LeaseDuration time.Duration
	// Resync relists the Applications this often (0: 5m). An Application
	// is evaluated again only when what it says changed (not Argo CD's
	// periodic status.reconciledAt) or when something is due: its expiry,
	// a reminder, a refresh; so an idle controller reads nothing.
	Resync time.Duration
	// RefreshEvery is how often, at most, the controller asks Argo CD to
	// refresh an auto-restore session's Application that has not caught
	// up (0: 1m), so that a commit to Git is seen without a webhook.
	RefreshEvery time.Duration
	// RemindEvery is how often a notice (expired, sync turned back on) is
	// told again, as a Warning Event and a ticket comment (0: 1h).
	RemindEvery time.Duration
	// Log hears what the controller does.
	Log func(format string, args ...any)
	// Metrics counts what it does; nil counts nothing.
	Metrics *Metrics
	// Mirroring copies the audit log off the cluster while this replica
	// leads; nil mirrors nothing.
	Mirroring *Mirroring
	// Proposer proposes in Git the fix of sessions marked --propose that
	// have no proposal; nil proposes none.
	Proposer *Proposer
	// CloseGrace is how long a session may stand closed on its
	// Application while the audit log still has it open before the close
	// is named unrecorded (0: 1m): a restore records its close right
	// after its write.
	CloseGrace time.Duration

	leading sync.Once
	ready   chan struct{}
	// refreshed is when each Application's refresh was last requested;
	// noticed when each notice was recorded, told its reminder last told.
	refreshed, noticed, told map[string]time.Time
	// orphanedSessions is the session id of each Application's annotation
	// recorded as no session's, until the annotation goes.
	orphanedSessions map[string]string
	// settling is when each close the log had not recorded was first
	// seen, until CloseGrace names it.
	settling map[string]time.Time
	// evaluated is each Application as last evaluated without error.
	evaluated map[string]evaluation
	// targets watches the live objects open sessions patched; forced
	// holds the Applications one of them changed under, to evaluate again
	// whatever the Application says.
	targets *targets
	forced  sync.Map
}

// evaluation is an Application's state when it was last evaluated, and
// when it must be evaluated again even if that state stays (zero: never).
type evaluation struct {
	state string
	due   time.Time
}

// Ready is closed once this replica leads and its cache is synced.
func (c *Controller) Ready() <-chan struct{} { return c.readyCh() }

func (c *Controller) readyCh() chan struct{} {
	c.leading.Do(func() { c.ready = make(chan struct{}) })
	return c.ready
}

func (c *Controller) logf(format string, args ...any) {
	if c.Log != nil {
		c.Log(format, args...)
	}
}

// Run elects a leader among the replicas and, while this one leads,
// watches Applications and acts on their sessions. It returns when ctx
// ends or the lease is lost (the process should exit then: a replica that
// lost its lease must not act on what it last saw).
func (c *Controller) Run(ctx context.Context) error {
	lease := c.leaseDuration()
	lock := &resourcelock.LeaseLock{
		LeaseMeta:  metav1.ObjectMeta{Namespace: c.LeaseNamespace, Name: c.LeaseName},
		Client:     c.Engine.Kube.CoordinationV1(),
		LockConfig: resourcelock.ResourceLockConfig{Identity: c.Identity},
	}
	// A leader whose work stopped (its cache could not start) gives the
	// lease up, so that another replica leads instead of nobody.
	electing, stop := context.WithCancel(ctx)
	defer stop()
	var mu sync.Mutex
	var failed error
	elector, err := leaderelection.NewLeaderElector(leaderelection.LeaderElectionConfig{
		Lock: lock, LeaseDuration: lease, RenewDeadline: lease * 2 / 3, RetryPeriod: lease / 5,
		ReleaseOnCancel: true, Name: c.LeaseName,
		Callbacks: leaderelection.LeaderCallbacks{
			OnStartedLeading: func(leading context.Context) {
				c.logf("leading (lease %s/%s as %s)", c.LeaseNamespace, c.LeaseName, c.Identity)
				c.Metrics.setLeader(true)
				if err := c.lead(leading); err != nil && leading.Err() == nil {
					mu.Lock()
					failed = err
					mu.Unlock()
					stop()
				}
			},
			OnStoppedLeading: func() { c.Metrics.setLeader(false); c.Metrics.watch(nil) },
			OnNewLeader: func(id string) {
				if id != c.Identity {
					c.logf("following %s", id)
				}
			},
		},
	})
	if err != nil {
		return err
	}
	elector.Run(electing)
	mu.Lock()
	defer mu.Unlock()
	switch {
	case failed != nil:
		return failed
	case ctx.Err() != nil:
		return nil
	}
	return errors.New("lost the lease")
}

// lead watches Applications and works the queue until ctx ends.
func (c *Controller) lead(ctx context.Context) error {
	if c.Mirroring != nil {
		go c.mirror(ctx)
	}
	store, queue, err := c.watch(ctx)
	if err != nil {
		return err
	}
	defer queue.ShutDown()
	c.refreshed, c.noticed, c.told, c.evaluated = map[string]time.Time{}, map[string]time.Time{}, map[string]time.Time{}, map[string]evaluation{}
	c.orphanedSessions = map[string]string{}
	close(c.readyCh())
	for c.processNext(ctx, queue, store) {
	}
	return nil
}

// watch starts the informer over the Applications and returns its store,
// once synced, and the queue it fills with the keys of those with an open
// session or a pause mark (and the targets watch, with those whose patched
// objects changed). The queue shuts down when ctx ends: a lost lease stops
// the work at once.
func (c *Controller) watch(ctx context.Context) (cache.Store, workqueue.TypedRateLimitingInterface[string], error) {
	resync := c.Resync
	if resync == 0 {
		resync = 5 * time.Minute
	}
	factory := dynamicinformer.NewFilteredDynamicSharedInformerFactory(c.Engine.Dynamic, resync, c.Engine.AppNamespace, nil)
	informer := factory.ForResource(argocd.ApplicationGVR).Informer()
	if err := informer.SetTransform(slim); err != nil {
		return nil, nil, err
	}
	// Named, the queue has metrics (workqueue_*{name="applications"}).
	queue := workqueue.NewTypedRateLimitingQueueWithConfig(workqueue.DefaultTypedControllerRateLimiter[string](),
		workqueue.TypedRateLimitingQueueConfig[string]{Name: "applications"})
	go func() { <-ctx.Done(); queue.ShutDown() }()
	marked := func(obj any) (*unstructured.Unstructured, bool) {
		app, ok := obj.(*unstructured.Unstructured)
		if !ok {
			return nil, false
		}
		_, open := app.GetAnnotations()[breakglass.SessionAnnotation]
		_, paused := app.GetAnnotations()[breakglass.PausedByAnnotation]
		// A closed session's mark, for a close the log never opened
		// (unrecordedClose); the cache keeps such an Application slim.
		_, closed := app.GetAnnotations()[breakglass.LastSessionAnnotation]
		return app, open || paused || closed
	}
	enqueue := func(obj any) {
		if app, ok := marked(obj); ok {
			queue.Add(app.GetNamespace() + "/" + app.GetName())
		}
	}
	if _, err := informer.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: enqueue,
		// A mark that goes is seen too: what was kept for it is dropped.
		UpdateFunc: func(old, obj any) {
			if _, was := marked(old); was {
				if app, ok := obj.(*unstructured.Unstructured); ok {
					queue.Add(app.GetNamespace() + "/" + app.GetName())
				}
				return
			}
			enqueue(obj)
		},
	}); err != nil {
		queue.ShutDown()
		return nil, nil, err
	}
	c.targets = newTargets(ctx, func(key string) {
		c.forced.Store(key, true)
		queue.Add(key)
	})
	factory.Start(ctx.Done())
	syncing, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	if !cache.WaitForCacheSync(syncing.Done(), informer.HasSynced) {
		queue.ShutDown()
		return nil, nil, fmt.Errorf("the Applications could not be listed and watched within a minute (its RBAC?): %w", syncing.Err())
	}
	c.Metrics.watch(informer.GetStore())
	return informer.GetStore(), queue, nil
}

// slim is what the cache keeps of an Application: without managedFields
// (nothing the controller decides reads them from the cache), and of one
// with no open session and no pause mark only its metadata, which is all
// that decides whether it is queued, and all the metrics read. A thousand
// Applications, most never broken glass on, cost their names, not their
// status (make bench's idle controller: resident memory). When a session
// opens, the watch delivers the whole Application again.
func slim(obj any) (any, error) {
	app, ok := obj.(*unstructured.Unstructured)
	if !ok {
		return obj, nil
	}
	app.SetManagedFields(nil)
	_, open := app.GetAnnotations()[breakglass.SessionAnnotation]
	_, marked := app.GetAnnotations()[breakglass.PausedByAnnotation]
	if open || marked {
		return app, nil
	}
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": app.GetAPIVersion(), "kind": app.GetKind(), "metadata": app.Object["metadata"],
	}}, nil
}

// processNext works one key of the queue: it syncs the Application and
// requeues it as requeue decides. It returns false once the queue has
// shut down.
func (c *Controller) processNext(ctx context.Context, queue workqueue.TypedRateLimitingInterface[string], store cache.Store) bool {
	key, quit := queue.Get()
	if quit || ctx.Err() != nil {
		return false
	}
	defer queue.Done(key)
	c.requeue(queue, key, c.sync(ctx, queue, store, key))
	return true
}

// sync reconciles the Application key unless it says what it said when
// last evaluated and nothing about it is due (then it makes no request),
// and schedules it again for when something is due.
func (c *Controller) sync(ctx context.Context, queue workqueue.TypedRateLimitingInterface[string], store cache.Store, key string) error {
	obj, exists, err := store.GetByKey(key)
	if err != nil {
		return err
	}
	if !exists {
		delete(c.evaluated, key)
		return nil
	}
	app := argocd.AppOf(obj.(*unstructured.Unstructured))
	state := app.Fingerprint()
	_, forced := c.forced.LoadAndDelete(key)
	if last, ok := c.evaluated[key]; ok && !forced && last.state == state && (last.due.IsZero() || time.Now().Before(last.due)) {
		if !last.due.IsZero() {
			// The queue keeps one wait per key, the earliest: this one
			// may have stood in for the due one.
			queue.AddAfter(key, time.Until(last.due))
		}
		return nil // as evaluated, nothing due: no request
	}
	due, err := c.reconcile(ctx, app)
	if err != nil {
		return err
	}
	c.evaluated[key] = evaluation{state: state, due: due}
	if !due.IsZero() {
		queue.AddAfter(key, time.Until(due))
	}
	return nil
}

// requeue is the one requeue decision: a key that failed is tried again
// with backoff, up to maxRetries; one that succeeded, or failed too often,
// waits for the next change (or the resync).
func (c *Controller) requeue(queue workqueue.TypedRateLimitingInterface[string], key string, err error) {
	switch {
	case err != nil && queue.NumRequeues(key) < maxRetries:
		c.Metrics.countError()
		c.logf("%s: %v", key, err)
		queue.AddRateLimited(key)
	case err != nil:
		// Each attempt may leave records: wait for the next change.
		c.Metrics.countError()
		c.logf("%s: %v (giving up until the Application changes, or the next resync)", key, err)
		queue.Forget(key)
	default:
		queue.Forget(key)
	}
}

// notice records n about app's session once, and tells it again every
// RemindEvery after the record: at the same times whichever replica leads,
// since they count from the record's time. A replica that takes over tells
// at once a reminder that fell due while none led. It returns when the
// next reminder is due (zero: never, the log has no open session there).
func (c *Controller) notice(ctx context.Context, engine *breakglass.Engine, app argocd.App, st *breakglass.SessionStatus, n *breakglass.Notice, key string) (time.Time, error) {
	every, now := c.remindEvery(), time.Now()
	told := st.Session.ID + " " + string(n.Event)
	var warnings []string
	if at, known := c.noticed[told]; known {
		// Recorded: no need to read the log again.
		if slot := reminderDue(at, every, now); slot.After(c.told[told]) {
			warnings = engine.Remind(ctx, app, st, n, audit.HeadState{})
			c.told[told] = slot
			c.logf("%s: reminded: %s", key, n.What)
		}
	} else {
		at, wrote, recorded, err := engine.RecordNotice(ctx, app, st, n)
		switch slot := reminderDue(at, every, now); {
		case err != nil:
			return time.Time{}, fmt.Errorf("recording %s: %w", n.Event, err)
		case at.IsZero():
			return time.Time{}, nil
		case wrote:
			warnings = recorded
			c.Metrics.countNotice(n.Event)
			c.logf("%s: %s %s", key, n.What, n.Todo)
		case slot.After(at) && now.Sub(slot) < c.leaseDuration():
			// Due while no replica led: the one that did is gone.
			warnings = engine.Remind(ctx, app, st, n, audit.HeadState{})
			c.logf("%s: reminded: %s", key, n.What)
		}
		c.noticed[told], c.told[told] = at, reminderDue(at, every, now)
	}
	for _, w := range warnings {
		c.logf("%s: warning: %s", key, w)
	}
	return c.told[told].Add(every), nil
}

// reminderDue is the newest of the times at, at+every, at+2·every… that
// is not after now: the reminder a notice recorded at is due for.
func reminderDue(at time.Time, every time.Duration, now time.Time) time.Time {
	if now.Before(at) {
		return at
	}
	return at.Add(now.Sub(at) / every * every)
}

func (c *Controller) leaseDuration() time.Duration {
	if c.LeaseDuration == 0 {
		return 15 * time.Second
	}
	return c.LeaseDuration
}

// reconcile acts on app's open session: a session marked auto-restore
// whose Git has caught up as of Argo CD's last reconcile is restored, by
// Restore itself, which asks for a fresh refresh and applies restore's
// rule again before it writes anything. It returns when the session must
// be looked at again though nothing changes (zero: not before a change):
// its expiry, its next reminder, its next refresh.
func (c *Controller) reconcile(ctx context.Context, app argocd.App) (time.Time, error) {
	engine := c.Engine
	key := app.GetNamespace() + "/" + app.GetName()
	if _, open := app.GetAnnotations()[breakglass.SessionAnnotation]; !open {
		if c.targets != nil {
			c.targets.forget(key)
		}
		delete(c.orphanedSessions, key)
		err := c.unrecordedClose(ctx, engine, app)
		if errors.Is(err, breakglass.ErrCannotTellYet) {
			// Asked again once the log can tell (repaired, restored).
			return time.Now().Add(30 * time.Second), c.orphan(ctx, engine, app)
		}
		if errors.Is(err, errSettling) {
			return time.Now().Add(c.closeGrace()), c.orphan(ctx, engine, app)
		}
		if err != nil {
			return time.Time{}, err
		}
		return time.Time{}, c.orphan(ctx, engine, app)
	}
	if _, err := breakglass.SessionOf(app); err != nil {
		// Maybe no session at all, though it holds the Application as one.
		if recorded, orphanErr := c.orphanSession(ctx, engine, app); recorded || orphanErr != nil {
			return time.Time{}, orphanErr
		}
		return time.Time{}, err
	}
	st, err := engine.CaughtUp(ctx, app, c.Argo, false)
	if err != nil {
		return time.Time{}, err
	}
	// A session annotation the log has no session for is what a pause
	// by hand looks like (the admission policy lets one appear, since CEL
	// cannot read the log): recorded and told at once.
	if st.Untrusted != "" {
		if _, err := c.orphanSession(ctx, engine, app); err != nil {
			return time.Time{}, err
		}
	}
	if c.targets != nil {
		// A change of a patched object brings the Application back here,
		// where its live values are read (breakglass.reverted).
		for kind, err := range c.targets.follow(engine, app, key, st) {
			c.logf("%s: not watching %s, so a revert there is seen when the Application changes: %v", key, kind, err)
		}
	}
	// A break-glass run interrupted before it recorded its patch is
	// resolved from the live target; the write brings the session back.
	if st.Interrupted() {
		_, resolved, err := engine.Resolve(ctx, app, st, false)
		if err != nil {
			return time.Time{}, fmt.Errorf("resolving an interrupted run of session %s: %w", st.Session.ID, err)
		}
		for _, r := range resolved {
			c.logf("%s: %s", key, r)
		}
		return time.Time{}, nil
	}
	// The expiry is due whatever the annotation says (an edited one must
	// not silence the notice): st.Session is the log's session.
	var next time.Time
	if e := st.Session.Expires; e != nil && time.Now().Before(*e) {
		next = *e
	}
	// A run still in flight is resolved once it can no longer finish.
	for _, run := range st.InFlight {
		next = earliest(next, run.Planned.Add(breakglass.RunBound+time.Second))
	}
	// RecordNotice acts on the log's open session, whatever the
	// annotation says: an edit of it hides no notice.
	for _, n := range breakglass.NoticesOf(st) {
		reminder, err := c.notice(ctx, engine, app, st, n, key)
		if err != nil {
			return time.Time{}, err
		}
		next = earliest(next, reminder)
	}
	// A field of the annotation the log contradicts holds nothing back
	// (what is acted on is the log's session), but someone edited it:
	// told once. A run in flight is between a write of the annotation and
	// its record, which honestly differ for that while.
	if len(st.Mismatch) > 0 && st.Untrusted == "" && len(st.InFlight) == 0 {
		c.warnMismatch(ctx, engine, app, st, key)
	}
	// The banner is what people read before they press Sync: one the
	// session's records do not make is put back at once, not only told.
	if st.BannerForged() {
		if err := engine.PutBannerBack(ctx, app, st); err != nil {
			return time.Time{}, fmt.Errorf("putting back the banner of session %s: %w", st.Session.ID, err)
		}
		c.logf("%s: put back the notice banner of session %s, which someone rewrote", key, st.Session.ID)
	}
	// A session marked --propose that has no proposal gets one.
	if !st.Interrupted() && len(st.InFlight) == 0 {
		next = earliest(next, c.propose(ctx, app, st, key))
	}
	if !st.Session.AutoRestore || st.Untrusted != "" || st.SyncReenabled {
		return next, nil
	}
	return c.autoRestore(ctx, app, st, key, next)
}

// autoRestore restores st's auto-restore session once Git has caught up,
// asking Argo CD to look at Git again at most every RefreshEvery until
// then. next is when the session is due anyway; it returns when to look
// again (zero once restored).
func (c *Controller) autoRestore(ctx context.Context, app argocd.App, st *breakglass.SessionStatus, key string, next time.Time) (time.Time, error) {
	if st.CannotTell != "" && !st.Ready {
		// Refreshing would change nothing: say so once, and wait for
		// the session to be closed by hand.
		told := "cannot tell " + st.Session.ID
		if _, done := c.noticed[told]; !done {
			c.noticed[told] = time.Now()
			c.logf("%s: auto-restore session %s will not restore by itself: %s; give the controller a read-only Argo CD account (ARGOCD_SERVER, ARGOCD_AUTH_TOKEN from a Secret), or restore it by hand", key, st.Session.ID, st.CannotTell)
		}
		return next, nil
	}
	engine := c.Engine
	every := c.RefreshEvery
	if every == 0 {
		every = time.Minute
	}
	// Until it is restored, an auto-restore session is looked at again
	// when its next refresh is due.
	nextRefresh := func() time.Time { return earliest(next, c.refreshed[key].Add(every)) }
	due := time.Since(c.refreshed[key]) >= every
	if !st.Ready && due {
		// As of Argo CD's last reconcile Git has not caught up: ask it to
		// look at Git again now, at most every RefreshEvery (the refresh
		// is itself a change of the Application, which comes back here).
		c.refreshed[key] = time.Now()
		var err error
		if st, err = engine.CaughtUp(ctx, app, c.Argo, true); err != nil {
			return time.Time{}, err
		}
	}
	if !st.Ready {
		return nextRefresh(), nil
	}
	if st.Stale && !due {
		return nextRefresh(), nil // Restore refreshes: at most every RefreshEvery, lest its own refresh bring it back here at once
	}
	c.refreshed[key] = time.Now()
	restored, err := engine.Restore(ctx, breakglass.RestoreRequest{App: app.GetName(), Namespace: app.GetNamespace(), Argo: c.Argo, Session: st.Session.ID, AutoRestore: true})
	if errors.Is(err, breakglass.ErrNotCaughtUp) {
		return nextRefresh(), nil // not yet, after a fresh refresh
	}
	if err != nil {
		return time.Time{}, fmt.Errorf("restoring session %s: %w", st.Session.ID, err)
	}
	c.Metrics.countAutoRestore()
	c.logf("%s/%s: restored session %s: Git caught up (%s)", app.GetNamespace(), app.GetName(), restored.Session.ID, argocd.DescribeGit(restored.GitAt()))
	for _, w := range restored.Warnings {
		c.logf("%s/%s: warning: %s", app.GetNamespace(), app.GetName(), w)
	}
	return time.Time{}, nil
}

// warnMismatch emits, once per session and disagreement, a Warning Event
// naming what app's session annotation gets wrong.
func (c *Controller) warnMismatch(ctx context.Context, engine *breakglass.Engine, app argocd.App, st *breakglass.SessionStatus, key string) {
	told := "mismatch " + st.Session.ID + " " + strings.Join(st.Mismatch, "; ")
	if _, done := c.noticed[told]; done {
		return
	}
	c.noticed[told] = time.Now()
	c.logf("%s: the session annotation disagrees with its audit records: %s", key, strings.Join(st.Mismatch, "; "))
	if w := engine.WarnMismatch(ctx, app, st); w != "" {
		c.logf("%s: warning: %s", key, w)
	}
}

// orphanSession records app's session annotation when no session of the
// log accounts for it, once per session id while the annotation stays,
// and says whether it did. The Application is read afresh: the cached one
// may still carry the annotation of a session whose close removed it
// before its record.
func (c *Controller) orphanSession(ctx context.Context, engine *breakglass.Engine, cached argocd.App) (bool, error) {
	key := cached.GetNamespace() + "/" + cached.GetName()
	annotation := cached.GetAnnotations()[breakglass.SessionAnnotation]
	id, _, _ := strings.Cut(strings.TrimPrefix(annotation, `{"id":"`), `"`)
	if c.orphanedSessions[key] == id {
		return false, nil
	}
	app, err := engine.App(ctx, argocd.AppRef{Namespace: cached.GetNamespace(), Name: cached.GetName()})
	if err != nil || app.GetAnnotations()[breakglass.SessionAnnotation] != annotation {
		return false, err // changed since: its own event follows
	}
	why, err := engine.UnaccountedSession(ctx, app)
	if err != nil || why == "" {
		return false, err
	}
	paused := ""
	if !app.SyncsAutomatically() {
		paused = ", while its automated sync is off"
	}
	msg := fmt.Sprintf("application %s carries a break-glass session annotation %s that no session of the audit log accounts for: %s%s. Restore cannot close it; see when and with what it was written with kubectl get application %s -n %s --show-managed-fields (the API server's audit log has who), and have a cluster admin remove the %s annotation",
		key, strconv.Quote(breakglass.Clip(annotation, 120)), strconv.Quote(breakglass.Clip(why, 200)), paused, app.GetName(), app.GetNamespace(), breakglass.SessionAnnotation)
	if err := c.recordOrphan(ctx, engine, app, "", breakglass.EventOrphanedSessionReason, msg); err != nil {
		return false, err
	}
	c.orphanedSessions[key] = id
	return true, nil
}

// unrecordedClose records, once per mark, a last-session mark on app
// naming a session the audit log never opened there: one opened and
// closed by hand, in about a tenth of a second, which the session
// annotation alone may never show the controller. Everything it did
// (a terminated sync among them) is in no record but this one.
func (c *Controller) unrecordedClose(ctx context.Context, engine *breakglass.Engine, app argocd.App) error {
	mark, marked := app.GetAnnotations()[breakglass.LastSessionAnnotation]
	if !marked {
		return nil
	}
	told := "unrecorded " + app.GetNamespace() + "/" + app.GetName() + " " + mark
	if _, done := c.noticed[told]; done {
		return nil
	}
	why, err := engine.UnrecordedClose(ctx, app)
	if errors.Is(err, breakglass.ErrCloseSettling) {
		// A restore records its close right after its write: named
		// only once the close has stood unrecorded for CloseGrace.
		first, seen := c.settling[told]
		if !seen {
			if c.settling == nil {
				c.settling = map[string]time.Time{}
			}
			c.settling[told] = time.Now()
			return errSettling
		}
		if time.Since(first) < c.closeGrace() {
			return errSettling
		}
		err = nil
	}
	delete(c.settling, told)
	if err != nil || why == "" {
		return err
	}
	return c.recordOrphan(ctx, engine, app, told, breakglass.EventUnrecordedSessionReason, why)
}

// errSettling asks for the Application again after CloseGrace.
var errSettling = errors.New("a close settling")

func (c *Controller) closeGrace() time.Duration {
	if c.CloseGrace == 0 {
		return time.Minute
	}
	return c.CloseGrace
}

// orphan records, once per mark, a paused-by mark on app that no open
// session of the log accounts for.
func (c *Controller) orphan(ctx context.Context, engine *breakglass.Engine, app argocd.App) error {
	key := app.GetNamespace() + "/" + app.GetName()
	orphans, err := engine.OrphanedPauses(ctx, []argocd.App{app})
	if err != nil || len(orphans) == 0 {
		return err
	}
	return c.recordOrphan(ctx, engine, app, "orphan "+key+" "+app.GetAnnotations()[breakglass.PausedByAnnotation], breakglass.EventOrphanedReason, orphans[0])
}

// recordOrphan records msg about app once per told ("": the caller keeps
// count), as a breakglass.orphaned notice with a Warning Event of reason.
func (c *Controller) recordOrphan(ctx context.Context, engine *breakglass.Engine, app argocd.App, told, reason, msg string) error {
	if _, done := c.noticed[told]; done && told != "" {
		return nil
	}
	key := app.GetNamespace() + "/" + app.GetName()
	warnings, err := engine.RecordOrphan(ctx, app, reason, msg)
	if err != nil {
		return fmt.Errorf("recording %s: %w", reason, err)
	}
	if told != "" {
		c.noticed[told] = time.Now()
	}
	c.Metrics.countNotice(audit.EventOrphaned)
	c.logf("%s: %s", key, msg)
	for _, w := range warnings {
		c.logf("%s: warning: %s", key, w)
	}
	return nil
}

// earliest is the earlier of two times, zero meaning none.
func earliest(a, b time.Time) time.Time {
	if a.IsZero() || (!b.IsZero() && b.Before(a)) {
		return b
	}
	return a
}

func (c *Controller) remindEvery() time.Duration {
	if c.RemindEvery == 0 {
		return time.Hour
	}
	return c.RemindEvery
}
