package drift

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/kubectl-gitops/kubectl-gitops/argocd"
	"github.com/kubectl-gitops/kubectl-gitops/audit"
)

// The live-state contract of a namespace: annotations on the Namespace,
// which only those who may edit namespaces (cluster admins, as a rule) can
// change. The break-glass group reads them; it cannot write them.
const (
	// ContractPatches says whether live patches are forbidden, allowed only
	// through break-glass, or allowed.
	ContractPatches = audit.KeyPrefix + "live-patches"
	// ContractGroups lists, comma-separated, the groups that may patch
	// live state (break-glass or allowed); empty means any.
	ContractGroups = audit.KeyPrefix + "live-patch-groups"
	// ContractSelfHeal says whether Applications deploying there are
	// expected to self-heal: on or off.
	ContractSelfHeal = audit.KeyPrefix + "self-heal"
	// ContractMaxPause is the longest a break-glass there may pause sync
	// (a Go duration such as 8h), and the expiry of one that names none.
	ContractMaxPause = audit.KeyPrefix + "max-pause"
	// ContractAutoRestore says whether a break-glass there restores sync
	// by itself once Git has caught up, unless it says otherwise: true or
	// false.
	ContractAutoRestore = audit.KeyPrefix + "auto-restore"
	// ContractHold is how a break-glass there holds its fix unless it
	// says otherwise: app, sync or fields (see kubectl gitops breakglass
	// --hold).
	ContractHold = audit.KeyPrefix + "hold"
)

// The rules of ContractPatches.
const (
	PatchesForbidden  = "forbidden"
	PatchesBreakGlass = "break-glass"
	PatchesAllowed    = "allowed"
)

// Contract is a namespace's declared rule for its live state; the zero
// value is a namespace that declares none.
type Contract struct {
	Namespace   string   `json:"namespace"`
	Patches     string   `json:"livePatches,omitempty"`
	Groups      []string `json:"groups,omitempty"`
	SelfHeal    string   `json:"selfHeal,omitempty"`
	MaxPause    string   `json:"maxPause,omitempty"`
	AutoRestore string   `json:"autoRestore,omitempty"`
	Hold        string   `json:"hold,omitempty"`
}

// Declared is whether the namespace declares any rule.
func (c Contract) Declared() bool {
	return c.Patches != "" || len(c.Groups) > 0 || c.SelfHeal != "" || c.MaxPause != "" || c.AutoRestore != "" || c.Hold != ""
}

// Pause is how long a break-glass there pauses sync, asked being what the
// user asked for (0: nothing), and whether it restores by itself, asked
// being the user's choice (nil: the contract's). Longer than max-pause is
// refused; so is a max-pause or auto-restore the contract spells wrongly
// (a typo must not lift the limit). 0 is a pause that does not expire.
func (c Contract) Pause(asked time.Duration, autoRestore *bool) (time.Duration, bool, error) {
	var max time.Duration
	if c.MaxPause != "" {
		var err error
		if max, err = time.ParseDuration(c.MaxPause); err != nil || max <= 0 {
			return 0, false, fmt.Errorf("%w: namespace %s declares %s: %q, which is not a duration such as 8h: its owners must fix the annotation", ErrContract, c.Namespace, ContractMaxPause, c.MaxPause)
		}
	}
	restore := false
	switch c.AutoRestore {
	case "", "false":
	case "true":
		restore = true
	default:
		return 0, false, fmt.Errorf("%w: namespace %s declares %s: %q, which is neither true nor false: its owners must fix the annotation", ErrContract, c.Namespace, ContractAutoRestore, c.AutoRestore)
	}
	if autoRestore != nil {
		restore = *autoRestore
	}
	switch {
	case max > 0 && asked > max:
		return 0, false, fmt.Errorf("%w: namespace %s pauses sync for at most %s (%s): ask for that or less", ErrContract, c.Namespace, max, ContractMaxPause)
	case asked > 0:
		return asked, restore, nil
	}
	return max, restore, nil
}

// ContractOf reads namespace's contract. A namespace that is gone declares
// nothing; one the caller may not read is an error for the caller to judge.
func ContractOf(ctx context.Context, kube kubernetes.Interface, namespace string) (Contract, error) {
	c := Contract{Namespace: namespace}
	ns, err := kube.CoreV1().Namespaces().Get(ctx, namespace, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return c, nil
	}
	if err != nil {
		return c, err
	}
	a := ns.GetAnnotations()
	c.Patches, c.SelfHeal = strings.TrimSpace(a[ContractPatches]), strings.TrimSpace(a[ContractSelfHeal])
	c.MaxPause, c.AutoRestore = strings.TrimSpace(a[ContractMaxPause]), strings.TrimSpace(a[ContractAutoRestore])
	c.Hold = strings.TrimSpace(a[ContractHold])
	for _, g := range strings.Split(a[ContractGroups], ",") {
		if g = strings.TrimSpace(g); g != "" {
			c.Groups = append(c.Groups, g)
		}
	}
	return c, nil
}

// AllowsBreakGlass checks a break-glass by actor against the contract: a
// namespace that forbids live patches refuses it, one that names groups
// refuses everyone else, and a rule it does not know refuses too (a typo
// must not open a namespace).
func (c Contract) AllowsBreakGlass(actor audit.Actor) error {
	switch c.Patches {
	case "", PatchesBreakGlass, PatchesAllowed:
	case PatchesForbidden:
		return fmt.Errorf("%w: namespace %s forbids live patches (%s: %s): change Git instead", ErrContract, c.Namespace, ContractPatches, c.Patches)
	default:
		return fmt.Errorf("%w: namespace %s declares %s: %q, which is none of forbidden, break-glass, allowed: its owners must fix the annotation", ErrContract, c.Namespace, ContractPatches, c.Patches)
	}
	if len(c.Groups) == 0 {
		return nil
	}
	for _, g := range actor.Groups {
		if slices.Contains(c.Groups, g) {
			return nil
		}
	}
	return fmt.Errorf("%w: namespace %s lets only groups %s patch live state (%s); %s is in %s", ErrContract, c.Namespace,
		strings.Join(c.Groups, ", "), ContractGroups, actor.Username, argocd.OrUnknown(strings.Join(actor.Groups, ", ")))
}

// violatedBy says how a live write by a manager of class violates the
// contract, "" when it does not: where live patches are forbidden, or
// allowed only through break-glass, a person's or a pipeline's write is a
// violation (controllers own their fields; break-glass is the sanctioned
// path).
func (c Contract) violatedBy(class Class) string {
	if class != Manual && class != Pipeline {
		return ""
	}
	switch c.Patches {
	case PatchesForbidden:
		return "namespace " + c.Namespace + " forbids live patches"
	case PatchesBreakGlass:
		return "namespace " + c.Namespace + " allows live patches only through break-glass"
	}
	return ""
}

// SelfHealFinding is an Application whose self-heal contradicts the
// contract of the namespace it deploys to.
type SelfHealFinding struct {
	App      audit.AppRef `json:"application"`
	Contract Contract     `json:"contract"`
	SelfHeal bool         `json:"selfHeal"`
	Problem  string       `json:"problem"`
}

// CheckContracts reports every Application whose self-heal setting
// contradicts its destination namespace's declared expectation, with the
// namespaces it could not read.
func CheckContracts(ctx context.Context, c *argocd.Client, apps []argocd.App) ([]SelfHealFinding, []string, error) {
	var findings []SelfHealFinding
	var notes []string
	for _, app := range apps {
		cluster, err := c.ClusterOf(app, "")
		if err != nil {
			notes = append(notes, fmt.Sprintf("%s: %v", app.GetName(), err))
			continue
		}
		namespace := app.Destination().Namespace
		contract, err := ContractOf(ctx, cluster.Kube, namespace)
		if err != nil {
			notes = append(notes, fmt.Sprintf("%s: reading namespace %s: %v", app.GetName(), namespace, argocd.Brief(err)))
			continue
		}
		selfHeal := app.SelfHealing()
		ref := app.Record()
		f := SelfHealFinding{App: ref, Contract: contract, SelfHeal: selfHeal}
		switch {
		case contract.SelfHeal == "on" && !selfHeal:
			f.Problem = "namespace " + contract.Namespace + " expects self-heal on, and this Application does not self-heal: live drift stays"
		case contract.SelfHeal == "off" && selfHeal:
			f.Problem = "namespace " + contract.Namespace + " expects self-heal off, and this Application self-heals: live changes there are reverted"
		case contract.SelfHeal != "" && contract.SelfHeal != "on" && contract.SelfHeal != "off":
			f.Problem = fmt.Sprintf("namespace %s declares %s: %q, which is neither on nor off", contract.Namespace, ContractSelfHeal, contract.SelfHeal)
		default:
			if _, _, err := contract.Pause(0, nil); err != nil {
				// A break-glass there would be refused mid-incident.
				f.Problem = err.Error()
				break
			}
			continue
		}
		findings = append(findings, f)
	}
	return findings, notes, nil
}

// ErrContract is a break-glass the namespace's live-state contract does
// not allow.
var ErrContract = fmt.Errorf("%w by the namespace's live-state contract", argocd.ErrForbidden)
