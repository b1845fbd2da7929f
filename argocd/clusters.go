package argocd

import (
	"context"
	"fmt"

	"github.com/kubectl-gitops/kubectl-gitops/audit"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
)

// Cluster is where a target lives: the clients that reach it, and the
// kubeconfig context they came from.
type Cluster struct {
	Kube    kubernetes.Interface
	Dynamic dynamic.Interface
	Mapper  meta.RESTMapper
	// Context is the kubeconfig context; "" for the Argo CD cluster.
	Context string
	// Server is the cluster's API server URL as the kubeconfig has it.
	Server string
}

// Clusters finds the clients of an Application's destination cluster when
// it is not the Argo CD cluster.
type Clusters interface {
	// Destination returns the clients for the cluster an Application
	// deploys to (destination.server, or destination.name when the server is
	// not given), through kubeContext when it is set.
	Destination(server, name, kubeContext string) (*Cluster, error)
}

// InClusterServer is how an Application names the cluster Argo CD runs in.
const InClusterServer = "https://kubernetes.default.svc"

func (d Destination) inCluster() bool {
	return d.Server == InClusterServer || (d.Server == "" && d.Name == "in-cluster")
}

func (d Destination) cluster() string {
	if d.Server != "" {
		return d.Server
	}
	return "cluster " + d.Name
}

// ClusterOf is where app's resources live: the Argo CD cluster for
// in-cluster destinations, else what Clusters finds (through kubeContext
// when it is set).
func (c *Client) ClusterOf(app App, kubeContext string) (*Cluster, error) {
	dest := app.Destination()
	switch {
	case dest.inCluster() && kubeContext != "":
		return nil, Invalid(InputTargetContext, kubeContext, "application %s deploys to the Argo CD cluster itself: give no target context", app.GetName())
	case dest.inCluster():
		return &Cluster{Kube: c.Kube, Dynamic: c.Dynamic, Mapper: c.Mapper}, nil
	case c.Clusters == nil:
		return nil, fmt.Errorf("%w: application %s deploys to %s, not to the Argo CD cluster, and no kubeconfig reaches it", ErrNotSupported, app.GetName(), dest.cluster())
	}
	cluster, err := c.Clusters.Destination(dest.Server, dest.Name, kubeContext)
	if err != nil {
		return nil, fmt.Errorf("application %s deploys to %s: %w", app.GetName(), dest.cluster(), err)
	}
	return cluster, nil
}

// Object reads a managed resource from the cluster.
func (cluster *Cluster) Object(ctx context.Context, t audit.Target) (*unstructured.Unstructured, error) {
	mapping, err := cluster.Mapper.RESTMapping(schema.GroupKind{Group: t.Group, Kind: t.Kind})
	if err != nil {
		return nil, err
	}
	return cluster.Dynamic.Resource(mapping.Resource).Namespace(t.Namespace).Get(ctx, t.Name, metav1.GetOptions{})
}
