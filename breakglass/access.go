package breakglass

import (
	"context"
	"fmt"
	"time"

	"github.com/kubectl-gitops/kubectl-gitops/argocd"
	"github.com/kubectl-gitops/kubectl-gitops/drift"
	authorizationv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes"
)

// checkAccess refuses a caller who may not patch the Application or the
// target, or whom the target namespace's contract does not allow a
// break-glass, and sets how long the pause may last.
func (p *planning) checkAccess(ctx context.Context) error {
	if _, err := p.appAllowed.wait(); err != nil {
		return err
	}
	if _, err := p.targetAllowed.wait(); err != nil {
		return err
	}
	contract, err := p.contractRead.wait()
	if namespace := p.plan.Target.Namespace; namespace != "" {
		// The contract is the target namespace's, checked with who the
		// target cluster says the caller is; one that cannot be read
		// refuses (a missing Namespace declares nothing).
		if err != nil {
			return fmt.Errorf("%w: the live-state contract of namespace %s could not be read (%s): ask for get on namespaces there", drift.ErrContract, namespace, argocd.Brief(err))
		}
		who := p.plan.Actor
		if cluster := p.plan.cluster; cluster.Kube != p.Kube {
			if who, err = argocd.Whoami(ctx, cluster.Kube); err != nil {
				return err
			}
		}
		if err := contract.AllowsBreakGlass(who); err != nil {
			return err
		}
	}
	p.contract = contract
	if p.plan.Join != nil {
		return joinWithin(contract, p.plan.Join, time.Now())
	}
	p.plan.PauseFor, p.plan.AutoRestore, err = contract.Pause(p.req.Expires, p.req.AutoRestore)
	return err
}

// allowed checks with a SelfSubjectAccessReview, in the cluster of kube,
// that the caller may patch.
func allowed(ctx context.Context, kube kubernetes.Interface, gvr schema.GroupVersionResource, namespace, name string) error {
	review := &authorizationv1.SelfSubjectAccessReview{Spec: authorizationv1.SelfSubjectAccessReviewSpec{
		ResourceAttributes: &authorizationv1.ResourceAttributes{Verb: "patch", Group: gvr.Group, Resource: gvr.Resource, Namespace: namespace, Name: name},
	}}
	res, err := kube.AuthorizationV1().SelfSubjectAccessReviews().Create(ctx, review, metav1.CreateOptions{})
	if err != nil {
		return fmt.Errorf("checking your permissions: %w", err)
	}
	if !res.Status.Allowed {
		return fmt.Errorf("%w: you may not patch %s %s/%s", argocd.ErrForbidden, gvr.GroupResource(), namespace, name)
	}
	return nil
}
