package redact

// The allow-list: the fields of a live resource whose string values are
// recorded and shown (everything else is recorded by its structure or
// redacted). It is the one place to extend. A field is allowed when its
// own name is one of allowedFields, or when it sits within one of
// allowedWithin (anywhere in its path) and not within one of
// neverWithin. Numbers and booleans are recorded wherever they are: a
// secret does not fit in one that a digest could not guess anyway.
var (
	// allowedFields hold names, references, images and settings.
	allowedFields = map[string]bool{
		"image": true, "imagePullPolicy": true, "name": true, "namespace": true, "kind": true,
		"apiVersion": true, "serviceAccountName": true, "restartPolicy": true, "dnsPolicy": true,
		"schedulerName": true, "priorityClassName": true, "runtimeClassName": true, "protocol": true,
		"scheme": true, "path": true, "mountPath": true, "subPath": true, "claimName": true,
		"storageClassName": true, "volumeName": true, "type": true, "schedule": true, "timeZone": true,
		"concurrencyPolicy": true, "maxSurge": true, "maxUnavailable": true, "podManagementPolicy": true,
		"key": true, "operator": true, "effect": true, "mountPropagation": true, "medium": true,
		"sizeLimit": true, "terminationMessagePolicy": true, "terminationMessagePath": true,
		"preemptionPolicy": true, "ipFamilyPolicy": true, "externalTrafficPolicy": true,
		"internalTrafficPolicy": true, "sessionAffinity": true, "clusterIP": true, "loadBalancerClass": true,
		"ingressClassName": true, "pathType": true, "secretName": true, "configMapName": true,
		"fieldPath": true, "resource": true, "divisor": true,
	}
	// allowedWithin are subtrees of settings: resources, probes, ports,
	// scheduling, update strategies, security settings, labels, selectors.
	allowedWithin = map[string]bool{
		"resources": true, "livenessProbe": true, "readinessProbe": true, "startupProbe": true,
		"ports": true, "tolerations": true, "affinity": true, "nodeSelector": true, "selector": true,
		"matchLabels": true, "matchExpressions": true, "strategy": true, "updateStrategy": true,
		"securityContext": true, "labels": true, "topologySpreadConstraints": true,
		"annotations": true,
	}
	// neverWithin are subtrees that may carry credentials even inside an
	// allowed one: a probe's HTTP headers.
	neverWithin = map[string]bool{"httpHeaders": true}
)

// Allowed is whether the string at segs (a path into a live resource, list
// items by name) is in a field known to hold non-secret data. Names that
// say they hold a credential are never allowed (Path), and free text is
// recorded by its structure before this is asked.
func Allowed(segs []string) bool {
	if len(segs) == 0 {
		return false
	}
	within := false
	for _, s := range segs[:len(segs)-1] {
		if neverWithin[s] {
			return false
		}
		within = within || allowedWithin[s]
	}
	last := segs[len(segs)-1]
	return (within || allowedFields[last]) && !Name(last)
}
