// Package next spells, in one place, every kubectl gitops command line the
// tool writes for a person to run next: in errors, warnings, notices,
// tickets and the Argo CD UI. plugin's tests parse each one through the
// real command tree, so a renamed command or flag breaks a test rather than
// an on-call engineer's next step.
//
// It imports nothing of ours and must never: every package may use it.
package next

import "strings"

// Elided stands for a value the person supplies (a reason, a target).
const Elided = "…"

const (
	gitops      = "kubectl gitops "
	defaultHome = "argocd"
)

// app is the arguments that name Application name of namespace: an empty
// namespace, or Argo CD's own, needs no --app-namespace.
func app(namespace, name string) string {
	if namespace != "" && namespace != defaultHome {
		return name + " --app-namespace " + namespace
	}
	return name
}

// Restore closes the session of the Application name in namespace.
func Restore(namespace, name string) string { return gitops + "restore " + app(namespace, name) }

// ForceRestore closes the session without Git's fix.
func ForceRestore(namespace, name string) string {
	return Restore(namespace, name) + " --force --reason " + Elided
}

// Breakglass opens a session on the Application app to patch target, with
// the flags the person adds.
func Breakglass(app, target string) string { return gitops + "breakglass " + app + " " + target }

// Join patches again within the session open on the Application.
func Join(namespace, name string) string {
	return gitops + "breakglass " + name + " " + Elided + " --join" + strings.TrimPrefix(app(namespace, name), name)
}

// Status says whether Git has caught up with the Application's fix; every
// open session when name is empty.
func Status(namespace, name string) string {
	if name == "" {
		return gitops + "status"
	}
	return gitops + "status " + app(namespace, name)
}

// Propose proposes the Application's live fix in Git.
func Propose(namespace, name string) string { return gitops + "propose " + app(namespace, name) }

// ProposeAny is the propose command, for a message that names no
// Application (the person knows which).
func ProposeAny() string { return gitops + "propose APP" }

// DriftPropose moves the Application's live drift into Git.
func DriftPropose(namespace, name string) string {
	return gitops + "drift " + app(namespace, name) + " --propose --yes"
}

// TicketSync does the Jira work the audit log has queued.
func TicketSync() string { return gitops + "ticket sync" }

// Debt lists the Application name's ignoreDifferences entries.
func Debt(name string) string { return gitops + "debt " + name }

// AuditLog lists the records of the Application name, of one event when
// event is not empty, as YAML when yaml is set.
func AuditLog(name, event string, yaml bool) string {
	s := gitops + "audit log --app " + name
	if event != "" {
		s += " --event " + event
	}
	if yaml {
		s += " -o yaml"
	}
	return s
}

// AuditLogUnreviewed lists the closed sessions that await review.
func AuditLogUnreviewed() string { return gitops + "audit log --unreviewed" }

// AuditLogAll lists every record.
func AuditLogAll() string { return gitops + "audit log" }

// AuditShow shows the record id.
func AuditShow(id string) string { return gitops + "audit show " + id }

// AuditVerify checks the chain of the audit log in namespace (the
// default's when empty).
func AuditVerify(namespace string) string {
	if namespace == "" {
		return gitops + "audit verify"
	}
	return gitops + "audit verify --audit-namespace " + namespace
}

// AuditVerifyFile checks the chain of the audit log kept in file path.
func AuditVerifyFile(path string) string { return gitops + "audit verify --file " + quote(path) }

// quote is s as one shell word: as it is when it needs no quoting.
func quote(s string) string {
	if s != "" && strings.Trim(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_./:=@%+,") == "" {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// AuditVerifyMirror checks the mirror at url: alone when only is set, else
// against the audit log in namespace (the default's when empty).
func AuditVerifyMirror(url, namespace string, only bool) string {
	s := gitops + "audit verify --mirror " + quote(url)
	if only {
		s += " --mirror-only"
	}
	if namespace != "" {
		s += " --audit-namespace " + namespace
	}
	return s
}

// AuditExport writes the audit log as the JSON lines --file reads.
func AuditExport() string { return gitops + "audit log -o jsonl" }

// AuditRepairHead puts right the head of the audit log in namespace (the
// default's when empty).
func AuditRepairHead(namespace string) string {
	if namespace == "" {
		return gitops + "audit repair-head"
	}
	return gitops + "audit repair-head --audit-namespace " + namespace
}
