package argocd

import (
	"context"
	"fmt"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/watch"
)

// WaitApps is the engine's one way to wait on Argo CD: it watches the
// Applications keyed NAMESPACE/NAME until done holds for each, or ctx
// ends, and returns the newest version of each it saw. Each watch starts
// from a list, so a change made before the watch is seen; a watch the
// server closes is started again. One Application is listed by name
// alone, so a namespace of a thousand costs nothing.
func (c *Client) WaitApps(ctx context.Context, keys []string, done func(App) bool) map[string]App {
	fresh := map[string]App{}
	pending := map[string]bool{}
	namespaces := map[string]bool{}
	for _, key := range keys {
		pending[key] = true
		namespace, _ := splitKey(key)
		namespaces[namespace] = true
	}
	namespace, options := "", metav1.ListOptions{}
	if len(namespaces) == 1 {
		namespace, _ = splitKey(keys[0])
	}
	if len(keys) == 1 {
		_, name := splitKey(keys[0])
		options.FieldSelector = fields.OneTermEqualSelector("metadata.name", name).String()
	}
	client := c.Dynamic.Resource(ApplicationGVR).Namespace(namespace)
	seen := func(obj *unstructured.Unstructured) {
		key := obj.GetNamespace() + "/" + obj.GetName()
		if _, wanted := pending[key]; !wanted {
			if _, tracked := fresh[key]; !tracked {
				return
			}
		}
		fresh[key] = App{obj}
		if done(App{obj}) {
			delete(pending, key)
		}
	}
	for len(pending) > 0 && ctx.Err() == nil {
		list, err := client.List(ctx, options)
		if err != nil {
			return fresh
		}
		for i := range list.Items {
			seen(&list.Items[i])
		}
		if len(pending) == 0 {
			return fresh
		}
		watchOptions := options
		watchOptions.ResourceVersion = list.GetResourceVersion()
		w, err := client.Watch(ctx, watchOptions)
		if err != nil {
			return fresh
		}
		drain(ctx, w, pending, seen)
		w.Stop()
	}
	return fresh
}

// drain feeds watch events to seen until nothing is pending, the watch
// ends, or ctx does.
func drain(ctx context.Context, w watch.Interface, pending map[string]bool, seen func(*unstructured.Unstructured)) {
	for len(pending) > 0 {
		select {
		case <-ctx.Done():
			return
		case ev, open := <-w.ResultChan():
			if !open {
				return
			}
			if obj, ok := ev.Object.(*unstructured.Unstructured); ok {
				seen(obj)
			}
		}
	}
}

// WaitApplication waits, as WaitApps does, until done holds for the
// Application name of the engine's namespace, and returns it (on timeout,
// its newest version too, with ctx's error).
func (c *Client) WaitApplication(ctx context.Context, name string, done func(App) bool) (App, error) {
	key := c.AppNamespace + "/" + name
	got, ok := c.WaitApps(ctx, []string{key}, done)[key]
	if !ok || !done(got) {
		if ctx.Err() != nil {
			return got, ctx.Err()
		}
		return got, fmt.Errorf("could not watch application %s", key)
	}
	return got, nil
}

// WaitApp waits, at most wait, until done holds for the Application key
// (namespace/name), and returns it as last seen and whether done held.
func (c *Client) WaitApp(ctx context.Context, key string, wait time.Duration, done func(App) bool) (App, bool) {
	ctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	app, ok := c.WaitApps(ctx, []string{key}, done)[key]
	return app, ok && done(app)
}

// WaitRefreshed waits, at most the controller wait, until the controller
// has reconciled the Application since the refresh requested by written
// (this tool's write, as the API server returned it), and returns it as
// the controller left it, so that the next step need not read it again.
// A request removed by hand is no answer: RefreshedSince.
func (c *Client) WaitRefreshed(ctx context.Context, written App) (App, error) {
	ctx, cancel := context.WithTimeout(ctx, c.ControllerTimeout())
	defer cancel()
	since := WrittenAt(written.Unstructured)
	key := NamespaceOr(written.GetNamespace(), c.AppNamespace) + "/" + written.GetName()
	done := func(app App) bool { return app.RefreshedSince(since) }
	if app, ok := c.WaitApps(ctx, []string{key}, done)[key]; ok && done(app) {
		return app, nil
	}
	if ctx.Err() != nil {
		return App{}, ctx.Err()
	}
	return App{}, fmt.Errorf("could not watch application %s", key)
}

func splitKey(key string) (string, string) {
	namespace, name, _ := strings.Cut(key, "/")
	return namespace, name
}
