package ticket

import (
	"encoding/json"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/kubectl-gitops/kubectl-gitops/argocd"
	"github.com/kubectl-gitops/kubectl-gitops/audit"
	"github.com/kubectl-gitops/kubectl-gitops/next"
	"github.com/kubectl-gitops/kubectl-gitops/redact"
)

// MaxFieldLength is Jira's limit for a text field such as the description
// or a comment body, in characters.
const MaxFieldLength = 32767

// Reconcile is what a ticket says about a session: its stored (already
// redacted) breakglass.patched records, oldest first, where the manifests
// live, and the command that closes the loop.
type Reconcile struct {
	Patches []*audit.Record
	Source  argocd.Source
	Restore string
	// Witness is the newest audit record when the text is written.
	Witness audit.HeadState
}

func (rc Reconcile) first() *audit.Record { return rc.Patches[0] }
func (rc Reconcile) last() *audit.Record  { return rc.Patches[len(rc.Patches)-1] }

// Issue is a Jira issue as kubectl gitops knows it.
type Issue struct {
	Key string `json:"key"`
	URL string `json:"url"`
}

// SessionLabel is the label that finds a session's ticket in Jira, so that
// a ticket is filed once even when filing is retried.
func SessionLabel(session string) string { return label("kubectl-gitops-session-" + session) }

// Summary is the issue's one-line summary.
func Summary(rc Reconcile) string {
	r := rc.first()
	s := fmt.Sprintf("Reconcile Git after break-glass on %s: %s/%s", appName(r), targetKind(r), targetName(r))
	if n := len(rc.Patches) - 1; n > 0 {
		s += fmt.Sprintf(" (+%d more)", n)
	}
	return truncate(stripControl(s), 255, "…")
}

// Labels are the issue's labels: breakglass, the application, the session
// label, then the configured extras.
func (c Config) labels(r *audit.Record) []string {
	out := []string{"breakglass", label(appName(r)), SessionLabel(r.Session)}
	return append(out, c.extraLabels()...)
}

// Description is the issue's description in Jira wiki markup: who, when,
// why, what changed, where Git is, and how to bring Git up to the live state.
func Description(rc Reconcile) string {
	var b strings.Builder
	r := rc.first()
	fmt.Fprintf(&b, "h2. Bring Git up to the live state of %s\n\n", Escape(targetKind(r)+"/"+targetName(r)))
	fmt.Fprintf(&b, "A break-glass on Argo CD Application *%s* paused its automated sync and patched a live resource. "+
		"Sync stays paused until Git holds the same values; then restore it.\n\n", Escape(appName(r)))
	b.WriteString(details(r))
	if w := WitnessLine(rc.Witness); w != "" {
		b.WriteString(w + "\n\n")
	}
	b.WriteString(gitSection(rc.Source, rc.Patches))
	for i, p := range rc.Patches {
		if i > 0 {
			fmt.Fprintf(&b, "h3. Later patch by %s at %s: %s\n", Escape(p.Actor.Username), p.Time.UTC().Format("2006-01-02 15:04:05 UTC"), Escape(p.Reason))
		}
		b.WriteString(changesSection(p))
		b.WriteString(patchSection(p))
	}
	fmt.Fprintf(&b, "h3. Once Git has the fix\n{noformat}\n%s\n%s\n{noformat}\n", noformat(next.Status(appNamespace(r), appName(r))), noformat(rc.Restore))
	return fitField(b.String(), r.ID)
}

// PatchComment is the comment a later patch of the session adds to the
// session's ticket: the newest patch.
func PatchComment(rc Reconcile) string {
	r := rc.last()
	var b strings.Builder
	fmt.Fprintf(&b, "h3. Another break-glass patch in session %s: %s\n\n", Escape(r.Session), Escape(targetKind(r)+"/"+targetName(r)))
	b.WriteString(details(r))
	if w := WitnessLine(rc.Witness); w != "" {
		b.WriteString(w + "\n\n")
	}
	b.WriteString(gitSection(rc.Source, []*audit.Record{r}))
	b.WriteString(changesSection(r))
	b.WriteString(patchSection(r))
	return fitField(b.String(), r.ID)
}

// RestoreComment is the comment restore adds before closing the ticket.
func RestoreComment(revision, user string, forced bool, reason string, witness audit.HeadState) string {
	if forced {
		return fmt.Sprintf("Sync restored by %s with --force while Git had not caught up (Git at %s). Reason: %s\n\n%s",
			Escape(user), Escape(short(revision)), Escape(reason), WitnessLine(witness))
	}
	return fmt.Sprintf("Git caught up at %s; sync restored by %s.\n\n%s", Escape(short(revision)), Escape(user), WitnessLine(witness))
}

// ProposalComment tells the ticket that the live fix is proposed in Git.
// The request's URL is a Jira link when it is a plain web address, so
// that escaping does not break it.
func ProposalComment(user string, p audit.Proposal, witness audit.HeadState) string {
	link := Escape(p.URL)
	if plainURL.MatchString(p.URL) {
		link = "[" + Escape(p.Branch) + "|" + p.URL + "]"
	}
	return fmt.Sprintf("%s proposed the live fix in Git: %s (branch %s, commit %s, files %s). Once it is merged and Argo CD has caught up, sync can be restored.\n\n%s",
		Escape(user), link, Escape(p.Branch), Escape(short(p.Commit)), Escape(strings.Join(p.Files, ", ")), WitnessLine(witness))
}

// plainURL is a web address with nothing Jira's link syntax would read.
var plainURL = regexp.MustCompile(`^https?://[A-Za-z0-9._~:/?#@!$&'()*+,;=%-]+$`)

// ReviewComment tells the ticket of a closed session its review.
func ReviewComment(reviewer, verdict, note string, witness audit.HeadState) string {
	return fmt.Sprintf("Post-incident review by %s: %s. %s\n\n%s", Escape(reviewer), Escape(verdict), Escape(note), WitnessLine(witness))
}

// WitnessLine puts the newest audit record's sequence number and hash in
// Jira, outside the cluster: whoever rewrites the whole log cannot also
// rewrite what Jira holds, and `audit verify --jira` compares the two.
func WitnessLine(h audit.HeadState) string {
	if h.Seq == 0 {
		return ""
	}
	return fmt.Sprintf("Audit log witness: record %d, hash %s", h.Seq, h.Hash)
}

// witnessLine finds the witnesses in a ticket's text.
var witnessLine = regexp.MustCompile(`Audit log witness: record (\d+), hash ([0-9a-f]{64})`)

// Witnesses returns the records a ticket's text witnesses.
func Witnesses(text string) []audit.HeadState {
	var out []audit.HeadState
	for _, m := range witnessLine.FindAllStringSubmatch(text, -1) {
		seq, err := strconv.ParseUint(m[1], 10, 64)
		if err == nil {
			out = append(out, audit.HeadState{Seq: seq, Hash: m[2]})
		}
	}
	return out
}

func details(r *audit.Record) string {
	var b strings.Builder
	row := func(k, v string) {
		if v != "" {
			fmt.Fprintf(&b, "||%s|%s|\n", k, Escape(v))
		}
	}
	who := r.Actor.Username
	if r.Client.User != "" || r.Client.Host != "" {
		who += fmt.Sprintf(" (as %s on %s)", r.Client.User, r.Client.Host)
	}
	row("Who", who)
	row("When", r.Time.UTC().Format("2006-01-02 15:04:05 UTC"))
	row("Reason", r.Reason)
	row("Incident", r.Incident)
	if r.Application != nil {
		row("Application", fmt.Sprintf("%s/%s (project %s)", r.Application.Namespace, r.Application.Name, r.Application.Project))
	}
	if r.Cluster != nil {
		row("Cluster", r.Cluster.Server)
	}
	if r.Target != nil {
		row("Resource", fmt.Sprintf("%s %s/%s (%s)", r.Target.Kind, r.Target.Namespace, r.Target.Name, strings.TrimPrefix(r.Target.Group+"/"+r.Target.Version, "/")))
	}
	row("Session", r.Session)
	row("Audit record", r.ID+" ("+next.AuditShow(r.ID)+")")
	b.WriteString("\n")
	return b.String()
}

func gitSection(src argocd.Source, patches []*audit.Record) string {
	var b strings.Builder
	b.WriteString("h3. Git\n")
	if src.RepoURL != "" {
		if len(src.Others) > 0 {
			b.WriteString("The resource comes from one of the Application's sources that render manifests:\n")
		}
		b.WriteString(sourceLines(src))
		for _, o := range src.Others {
			b.WriteString(sourceLines(o))
		}
	}
	if src.HydratedBranch != "" {
		fmt.Fprintf(&b, "* Argo CD's source hydrator renders this dry source into branch %s", Escape(src.HydratedBranch))
		if src.HydratedPath != "" {
			fmt.Fprintf(&b, ", path %s", Escape(src.HydratedPath))
		}
		b.WriteString(": that branch is generated; make the change in the dry source above\n")
	}
	if g := patches[0].Git; g != nil {
		switch {
		case g.Hydrated != "":
			fmt.Fprintf(&b, "* Dry commit at break-glass: %s (hydrated as %s)\n", Escape(dashIfEmpty(g.Revision)), Escape(g.Hydrated))
		case len(g.Revisions) > 0:
			for i, r := range g.Revisions {
				fmt.Fprintf(&b, "* Revision of source %d at break-glass: %s\n", i+1, Escape(dashIfEmpty(r)))
			}
		default:
			fmt.Fprintf(&b, "* Revision at break-glass: %s\n", Escape(dashIfEmpty(g.Revision)))
		}
	}
	var changes []audit.Change
	for _, p := range patches {
		changes = append(changes, p.Changes...)
	}
	b.WriteString("\nh3. Suggested Git change\n")
	b.WriteString(suggestion(src, changes))
	b.WriteString("\n")
	return b.String()
}

// sourceLines are a source's bullet lines: repository, path or chart, the
// revision it tracks, and the value files it reads from other sources.
func sourceLines(src argocd.Source) string {
	var b strings.Builder
	where := "* Repository: "
	if src.Position > 0 {
		where = fmt.Sprintf("* Source %d: repository ", src.Position)
	}
	b.WriteString(where + Escape(src.RepoURL) + "\n")
	if src.Chart != "" {
		fmt.Fprintf(&b, "* Chart: %s\n", Escape(src.Chart))
	} else {
		fmt.Fprintf(&b, "* Path: %s\n", Escape(dashIfEmpty(src.Path)))
	}
	fmt.Fprintf(&b, "* Tracks: %s\n", Escape(dashIfEmpty(src.TargetRevision)))
	for _, v := range src.ValueFiles {
		fmt.Fprintf(&b, "* Helm values: %s in repository %s (tracks %s)\n", Escape(v.Path), Escape(v.RepoURL), Escape(dashIfEmpty(v.TargetRevision)))
	}
	return b.String()
}

// suggestion says how to change Git: the kustomize line for an image, else
// each path and its live value (argocd.AdviseChange decides which).
func suggestion(src argocd.Source, changes []audit.Change) string {
	var images, values []string
	for _, change := range changes {
		switch c := argocd.AdviseChange(src, change.Path, change.Before, change.After); c.Kind {
		case argocd.ChangeSecret:
			values = append(values, fmt.Sprintf("* %s: a value not recorded here (it may be a secret): set it in Git as it is live, a secret from your secret store", Escape(c.Path)))
		case argocd.ChangeManifestImage:
			values = append(values, fmt.Sprintf("* container %s: image: %s", Escape(c.Container), Escape(c.Image)))
		case argocd.ChangeHelmImage:
			where := ""
			if c.ValueFile != "" {
				where = " in " + Escape(c.ValueFile) + " (the last value file wins)"
			}
			values = append(values, fmt.Sprintf("* the chart renders container %s's image: set its values (such as image.repository and image.tag)%s so it renders %s", Escape(c.Container), where, Escape(c.Image)))
		case argocd.ChangeKustomizeImage:
			images = append(images, fmt.Sprintf("kustomize edit set image %s=%s", noformat(c.ImageName), noformat(c.Image)))
		default:
			values = append(values, fmt.Sprintf("* %s = %s", Escape(c.Path), Escape(jsonText(c.Value))))
		}
	}
	var b strings.Builder
	if len(images) > 0 {
		dir := src.Path
		if dir == "" {
			dir = "."
		}
		fmt.Fprintf(&b, "In the Application's source path (kustomize):\n{noformat}\ncd %s\n%s\n{noformat}\n", noformat(dir), strings.Join(images, "\n"))
	}
	if len(values) > 0 {
		b.WriteString("Set these values in the manifests")
		if src.Path != "" {
			b.WriteString(" under " + Escape(src.Path))
		}
		b.WriteString(":\n" + strings.Join(values, "\n") + "\n")
	}
	return b.String()
}

func changesSection(r *audit.Record) string {
	var b strings.Builder
	b.WriteString("h3. What changed (live)\n||Path||Before (as in Git)||After (live)||\n")
	for _, c := range r.Changes {
		fmt.Fprintf(&b, "|%s|%s|%s|\n", Escape(c.Path), Escape(jsonText(c.Before)), Escape(jsonText(c.After)))
	}
	b.WriteString("\n")
	return b.String()
}

func patchSection(r *audit.Record) string {
	if r.Patch == nil {
		return ""
	}
	text := fmt.Sprintf("h3. The patch (%s, secret values redacted)\n{noformat}\n%s\n{noformat}\n", Escape(r.Patch.Type), noformat(r.Patch.Body))
	// No digest: whoever reads Jira could test guesses of a secret in
	// the patch against it. The audit record keeps a keyed one.
	return text + "\n"
}

// wikiSpecial are the characters Jira's wiki renderer gives meaning to
// (formatting, links, macros, tables, emoticons); each is escaped with a
// backslash in user text.
const wikiSpecial = `\*_-+^~?{}[]|!#()`

// Escape makes user text literal in Jira wiki markup: control characters
// (newlines included) become spaces and markup characters are escaped.
func Escape(s string) string {
	s = stripControl(redact.Text(s))
	var b strings.Builder
	for _, r := range s {
		if strings.ContainsRune(wikiSpecial, r) {
			b.WriteByte('\\')
		}
		b.WriteRune(r)
	}
	return b.String()
}

// noformat makes user text safe inside a {noformat} block: it stays on one
// line (control characters, newlines included, become spaces), and the
// closing tag is broken.
func noformat(s string) string {
	s = stripControl(redact.Text(s))
	return strings.ReplaceAll(s, "{noformat}", "{noformat\u200b}")
}

// stripControl turns control characters (newlines included) into spaces.
func stripControl(s string) string {
	return strings.Map(func(r rune) rune {
		if r == utf8.RuneError || unicode.IsControl(r) || r == '\u2028' || r == '\u2029' {
			return ' '
		}
		return r
	}, s)
}

// fitField keeps a text within Jira's field limit, closing an open
// {noformat} block and saying where the whole record is.
func fitField(s, recordID string) string {
	if utf8.RuneCountInString(s) <= MaxFieldLength {
		return s
	}
	note := fmt.Sprintf("\n\n_(Truncated to fit Jira's %d-character limit: the whole change is in the audit log, %s)_\n", MaxFieldLength, Escape(next.AuditShow(recordID)))
	cut := truncate(s, MaxFieldLength-utf8.RuneCountInString(note)-len("\n{noformat}"), "")
	if strings.Count(cut, "{noformat}")%2 == 1 {
		cut += "\n{noformat}"
	}
	return cut + note
}

func truncate(s string, n int, ellipsis string) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	runes := []rune(s)
	return string(runes[:n-utf8.RuneCountInString(ellipsis)]) + ellipsis
}

var labelUnsafe = regexp.MustCompile(`[^A-Za-z0-9._:-]+`)

// label turns s into a Jira label: no spaces, at most 255 characters.
func label(s string) string {
	return truncate(labelUnsafe.ReplaceAllString(s, "_"), 255, "")
}

func appNamespace(r *audit.Record) string {
	if r.Application == nil {
		return ""
	}
	return r.Application.Namespace
}

func appName(r *audit.Record) string {
	if r.Application == nil {
		return ""
	}
	return r.Application.Name
}

func targetKind(r *audit.Record) string {
	if r.Target == nil {
		return ""
	}
	return r.Target.Kind
}

func targetName(r *audit.Record) string {
	if r.Target == nil {
		return ""
	}
	return r.Target.Name
}

func jsonText(v any) string {
	if v == nil {
		return "(unset)"
	}
	b, _ := json.Marshal(v)
	return string(b)
}

func short(rev string) string {
	if len(rev) > 12 {
		return rev[:12]
	}
	return dashIfEmpty(rev)
}

func dashIfEmpty(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// NoticeComment tells a session's ticket what was noticed about it (its
// pause expired, sync turned back on) and what to do.
func NoticeComment(what, todo string, witness audit.HeadState) string {
	return fmt.Sprintf("%s %s\n\n%s", Escape(what), Escape(todo), WitnessLine(witness))
}
