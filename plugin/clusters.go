package plugin

import (
	"fmt"
	"sort"
	"strings"

	"github.com/kubectl-gitops/kubectl-gitops/argocd"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/restmapper"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// kubeconfigClusters reaches destination clusters through the contexts of
// the user's kubeconfig (the same files --kubeconfig and KUBECONFIG name),
// keeping --as, --as-group and --request-timeout.
type kubeconfigClusters struct {
	flags *genericclioptions.ConfigFlags
}

// Destination implements argocd.Clusters.
func (k kubeconfigClusters) Destination(server, name, kubeContext string) (*argocd.Cluster, error) {
	raw, err := k.flags.ToRawKubeConfigLoader().RawConfig()
	if err != nil {
		return nil, err
	}
	if kubeContext == "" {
		if kubeContext, err = contextFor(raw, server, name); err != nil {
			return nil, err
		}
	} else if err := reaches(raw, kubeContext, server); err != nil {
		return nil, err
	}
	overrides := &clientcmd.ConfigOverrides{CurrentContext: kubeContext}
	if k.flags.Impersonate != nil {
		overrides.AuthInfo.Impersonate = *k.flags.Impersonate
	}
	if k.flags.ImpersonateGroup != nil {
		overrides.AuthInfo.ImpersonateGroups = *k.flags.ImpersonateGroup
	}
	if k.flags.Timeout != nil {
		overrides.Timeout = *k.flags.Timeout
	}
	config, err := clientcmd.NewNonInteractiveClientConfig(raw, kubeContext, overrides, nil).ClientConfig()
	if err != nil {
		return nil, fmt.Errorf("kubeconfig context %s: %w", kubeContext, err)
	}
	config = withClientRates(config)
	kube, err := kubernetes.NewForConfig(config)
	if err != nil {
		return nil, err
	}
	dyn, err := dynamic.NewForConfig(config)
	if err != nil {
		return nil, err
	}
	mapper := restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(kube.Discovery()))
	return &argocd.Cluster{Kube: kube, Dynamic: dyn, Mapper: mapper, Context: kubeContext, Server: config.Host}, nil
}

// reaches checks that --target-context names a context of the kubeconfig
// whose cluster is the destination's server: a context for another cluster
// would patch the wrong cluster while the record names the destination.
func reaches(raw clientcmdapi.Config, kubeContext, server string) error {
	c, ok := raw.Contexts[kubeContext]
	if !ok {
		return fmt.Errorf("--target-context %q is not a context of your kubeconfig (contexts: %s)", kubeContext, strings.Join(contextNames(raw), ", "))
	}
	cluster, ok := raw.Clusters[c.Cluster]
	if !ok {
		return fmt.Errorf("--target-context %q names cluster %q, which your kubeconfig does not define", kubeContext, c.Cluster)
	}
	if server != "" && !sameServer(cluster.Server, server) {
		return fmt.Errorf("--target-context %q reaches %s, not the application's destination %s: pass the context of the destination cluster", kubeContext, cluster.Server, server)
	}
	return nil
}

// contextFor finds the kubeconfig context of an Argo CD destination: the one
// whose cluster's server is the destination's server (the current context
// when several are), or, for a destination named but without a server, the
// context of that name (as `argocd cluster add CONTEXT` names clusters).
func contextFor(raw clientcmdapi.Config, server, name string) (string, error) {
	if server == "" {
		if _, ok := raw.Contexts[name]; ok {
			return name, nil
		}
		return "", fmt.Errorf("no kubeconfig context is named %q: pass --target-context with the context that reaches it", name)
	}
	var matches []string
	for _, ctxName := range contextNames(raw) {
		c := raw.Contexts[ctxName]
		if cluster, ok := raw.Clusters[c.Cluster]; ok && sameServer(cluster.Server, server) {
			matches = append(matches, ctxName)
		}
	}
	switch {
	case len(matches) == 1:
		return matches[0], nil
	case len(matches) == 0:
		return "", fmt.Errorf("no kubeconfig context reaches %s: pass --target-context with the context that does", server)
	}
	for _, m := range matches {
		if m == raw.CurrentContext {
			return m, nil
		}
	}
	return "", fmt.Errorf("several kubeconfig contexts reach %s (%s): pass --target-context with the one to use", server, strings.Join(matches, ", "))
}

func sameServer(a, b string) bool {
	return strings.EqualFold(strings.TrimSuffix(a, "/"), strings.TrimSuffix(b, "/"))
}

func contextNames(raw clientcmdapi.Config) []string {
	names := make([]string, 0, len(raw.Contexts))
	for n := range raw.Contexts {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}
