package breakglass

import (
	"fmt"
	"strings"
	"time"

	"github.com/kubectl-gitops/kubectl-gitops/argocd"
	"github.com/kubectl-gitops/kubectl-gitops/next"
)

// Argo CD (3.5 and newer) shows an Application's notice annotations as a
// banner on its page and an icon in its lists (the Argo CD module's
// docs/user-guide/application-notice.md). While a session is open they
// tell whoever is about to press Sync that a break-glass holds the live
// fix; older versions ignore them.
const (
	NoticeContent   = "notice.argocd.argoproj.io/content"
	NoticeSeverity  = "notice.argocd.argoproj.io/severity"
	NoticeURL       = "notice.argocd.argoproj.io/url"
	NoticePermanent = "notice.argocd.argoproj.io/permanent"
)

// NoticeKeys are the notice annotations a session sets and puts back.
var NoticeKeys = []string{NoticeContent, NoticeSeverity, NoticeURL, NoticePermanent}

// noticePrefix starts every session's banner.
const noticePrefix = "BREAK-GLASS: do not sync."

// noticeMax is where Argo CD truncates a notice.
const noticeMax = 500

// savedNotice is app's own notice annotations, which the session's banner
// replaces until it closes.
func savedNotice(app argocd.App) map[string]string {
	var saved map[string]string
	for _, k := range NoticeKeys {
		if v, ok := app.GetAnnotations()[k]; ok {
			if saved == nil {
				saved = map[string]string{}
			}
			saved[k] = v
		}
	}
	return saved
}

// uiNotice is the banner of open session s: critical, permanent, linking
// the ticket. It holds what the session holds (redacted reason and
// incident, paths, never values).
func uiNotice(s *Session) map[string]any {
	var held []string
	for _, p := range latestPatches(s) {
		paths := make([]string, len(p.Fields))
		for i, f := range p.Fields {
			paths[i] = f.Path
		}
		held = append(held, fmt.Sprintf("%s (%s)", p.Target, strings.Join(paths, ", ")))
	}
	what := "a live fix being applied"
	if len(held) > 0 {
		what = "the live fix of " + strings.Join(held, "; ")
	}
	text := fmt.Sprintf(noticePrefix+" Session %s by %s holds %s. Reason: %s.", s.ID, s.OpenedBy, what, s.Reason)
	if s.Incident != "" {
		text += " Incident " + s.Incident + "."
	}
	if s.Ticket != "" {
		text += " Ticket " + s.Ticket + "."
	}
	if s.Expires != nil {
		text += " Expires " + s.Expires.UTC().Format(time.RFC3339) + "."
	}
	if s.pauses() {
		text += " Sync stays paused until Git has the fix: " + next.Status("") + "."
	} else {
		text += " Automated sync stays on; only these fields are held until Git has the fix: " + next.Status("") + "."
	}
	if s.holdsFields() {
		text += " A Sync keeps the held fields only with " + RespectIgnoreDifferences + " ticked."
	}
	if r := []rune(text); len(r) > noticeMax {
		text = string(r[:noticeMax-1]) + "…"
	}
	notice := map[string]any{NoticeContent: text, NoticeSeverity: "critical", NoticePermanent: "true", NoticeURL: nil}
	if strings.HasPrefix(s.TicketURL, "https://") || strings.HasPrefix(s.TicketURL, "http://") {
		notice[NoticeURL] = s.TicketURL
	}
	return notice
}

// restoredNotice is the patch of the notice annotations that puts back
// what s saved when it opened.
func restoredNotice(s *Session) map[string]any {
	out := map[string]any{}
	for _, k := range NoticeKeys {
		if v, ok := s.SavedNotice[k]; ok {
			out[k] = v
		} else {
			out[k] = nil
		}
	}
	return out
}
