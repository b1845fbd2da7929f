package controller

import (
	"context"
	"sync"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/tools/cache"

	"github.com/kubectl-gitops/kubectl-gitops/argocd"
	"github.com/kubectl-gitops/kubectl-gitops/breakglass"
)

// targets watches the live objects the open sessions patched, one informer
// per kind in use (per destination cluster), keeping only each object's
// name and versions, and hands the Application whose session patched an
// object to the queue when its spec (or, for objects without a
// generation, anything) changes: a reverted fix is noticed within seconds
// whatever wrote it, not when the Application's status next moves.
type targets struct {
	ctx     context.Context
	enqueue func(key string)

	mu       sync.Mutex
	watching map[string]bool
	// owners maps an object (cluster, group, kind, namespace, name) to
	// the Applications whose open sessions patched it.
	owners map[string]map[string]bool
	// failed keeps a kind that could not be watched (no list/watch
	// right): the Application's own changes are what notice it then.
	failed map[string]error
	// told keeps the problems already returned, so each is said once.
	told map[string]bool
}

func newTargets(ctx context.Context, enqueue func(string)) *targets {
	return &targets{ctx: ctx, enqueue: enqueue, watching: map[string]bool{}, owners: map[string]map[string]bool{}, failed: map[string]error{}, told: map[string]bool{}}
}

func objectKey(cluster string, gk schema.GroupKind, namespace, name string) string {
	return cluster + "\x00" + gk.Group + "/" + gk.Kind + "\x00" + namespace + "/" + name
}

// follow makes app (key) the owner of the objects st's session patched
// and starts watching their kinds; the objects of a session no longer
// open are dropped by forget. It returns the kinds that could not be
// watched, with why.
func (t *targets) follow(engine *breakglass.Engine, app argocd.App, key string, st *breakglass.SessionStatus) map[string]error {
	cluster, err := engine.ClusterOf(app, "")
	if err != nil {
		return map[string]error{"destination": err}
	}
	problems := map[string]error{}
	t.forget(key)
	for _, target := range breakglass.PatchedTargets(st.Session) {
		gk := schema.GroupKind{Group: target.Group, Kind: target.Kind}
		mapping, err := cluster.Mapper.RESTMapping(gk, target.Version)
		if err != nil {
			problems[gk.String()] = err
			continue
		}
		kind := cluster.Server + "\x00" + mapping.Resource.String()
		t.mu.Lock()
		obj := objectKey(cluster.Server, gk, target.Namespace, target.Name)
		if t.owners[obj] == nil {
			t.owners[obj] = map[string]bool{}
		}
		t.owners[obj][key] = true
		start := !t.watching[kind] && t.failed[kind] == nil
		t.watching[kind] = true
		failed := t.failed[kind]
		t.mu.Unlock()
		if failed != nil && !t.toldOnce(kind) {
			problems[gk.String()] = failed
		}
		if start {
			go t.watch(cluster, mapping.Resource, gk, kind)
		}
	}
	return problems
}

// toldOnce is whether the problem of kind was returned before; it is from
// now on.
func (t *targets) toldOnce(kind string) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	told := t.told[kind]
	t.told[kind] = true
	return told
}

// forget drops app (key) as the owner of every object.
func (t *targets) forget(key string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for obj, apps := range t.owners {
		delete(apps, key)
		if len(apps) == 0 {
			delete(t.owners, obj)
		}
	}
}

// watch runs the informer of one kind in one cluster until the lead ends.
func (t *targets) watch(cluster *argocd.Cluster, gvr schema.GroupVersionResource, gk schema.GroupKind, kind string) {
	informer := dynamicinformer.NewFilteredDynamicInformer(cluster.Dynamic, gvr, metav1.NamespaceAll, 0, cache.Indexers{}, nil).Informer()
	// Only what says that an object changed is kept: a watch on every
	// Deployment must not hold every Deployment.
	_ = informer.SetTransform(func(obj any) (any, error) {
		u, ok := obj.(*unstructured.Unstructured)
		if !ok {
			return obj, nil
		}
		slim := &unstructured.Unstructured{}
		slim.SetAPIVersion(u.GetAPIVersion())
		slim.SetKind(u.GetKind())
		slim.SetNamespace(u.GetNamespace())
		slim.SetName(u.GetName())
		slim.SetResourceVersion(u.GetResourceVersion())
		slim.SetGeneration(u.GetGeneration())
		return slim, nil
	})
	_ = informer.SetWatchErrorHandler(func(_ *cache.Reflector, err error) {
		t.mu.Lock()
		t.failed[kind] = err
		t.mu.Unlock()
	})
	_, _ = informer.AddEventHandler(cache.ResourceEventHandlerFuncs{
		UpdateFunc: func(before, after any) {
			b, okB := before.(*unstructured.Unstructured)
			a, okA := after.(*unstructured.Unstructured)
			if !okB || !okA || !changed(b, a) {
				return
			}
			t.changed(objectKey(cluster.Server, gk, a.GetNamespace(), a.GetName()))
		},
		DeleteFunc: func(obj any) {
			if u, ok := obj.(*unstructured.Unstructured); ok {
				t.changed(objectKey(cluster.Server, gk, u.GetNamespace(), u.GetName()))
			}
		},
	})
	informer.Run(t.ctx.Done())
}

// changed is whether an object's spec changed (its generation), or, for
// kinds without a generation, the object did.
func changed(before, after *unstructured.Unstructured) bool {
	if after.GetGeneration() != 0 || before.GetGeneration() != 0 {
		return after.GetGeneration() != before.GetGeneration()
	}
	return after.GetResourceVersion() != before.GetResourceVersion()
}

// changed hands the owners of obj to the queue.
func (t *targets) changed(obj string) {
	t.mu.Lock()
	var keys []string
	for key := range t.owners[obj] {
		keys = append(keys, key)
	}
	t.mu.Unlock()
	for _, key := range keys {
		t.enqueue(key)
	}
}

// watched is how many kinds are watched, for the metrics.
func (t *targets) watched() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.watching)
}
