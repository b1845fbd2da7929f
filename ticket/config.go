// Package ticket files and closes the Jira issues that track bringing Git up
// to a break-glass's live state: configuration, the issue's content (Jira wiki
// markup, user text escaped, within Jira's field limits) and a client with
// bounded retries. It knows nothing of cobra or terminals, and of Argo CD
// only what package argocd says of an Application's source and how a change
// goes into Git (one advice for the ticket and for drift); it must never
// let a credential into a request body, an error or a log line.
package ticket

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"sigs.k8s.io/yaml"
)

// Config is how to reach Jira and what to file. Every field has an
// environment variable of the same name as its yaml key; the variable wins
// over the config file.
type Config struct {
	URL       string `json:"JIRA_URL,omitempty"`
	Project   string `json:"JIRA_PROJECT,omitempty"`
	IssueType string `json:"JIRA_ISSUE_TYPE,omitempty"`
	// User and APIToken are Jira Cloud's basic auth (email and API token);
	// PAT is a Data Center personal access token, sent as Bearer.
	User           string `json:"JIRA_USER,omitempty"`
	APIToken       string `json:"JIRA_API_TOKEN,omitempty"`
	PAT            string `json:"JIRA_PAT,omitempty"`
	DoneTransition string `json:"JIRA_DONE_TRANSITION,omitempty"`
	// Labels are added to the breakglass, application and session labels
	// (comma-separated in the environment).
	Labels    string `json:"JIRA_LABELS,omitempty"`
	Component string `json:"JIRA_COMPONENT,omitempty"`
	Priority  string `json:"JIRA_PRIORITY,omitempty"`
	// Timeout bounds each request (a Go duration); default 10s.
	Timeout string `json:"JIRA_TIMEOUT,omitempty"`
}

// ConfigVars lists the variables (and config file keys) Config reads.
var ConfigVars = []string{"JIRA_URL", "JIRA_PROJECT", "JIRA_ISSUE_TYPE", "JIRA_USER", "JIRA_API_TOKEN", "JIRA_PAT",
	"JIRA_DONE_TRANSITION", "JIRA_LABELS", "JIRA_COMPONENT", "JIRA_PRIORITY", "JIRA_TIMEOUT"}

// ErrNotConfigured means JIRA_URL or JIRA_PROJECT is unset: tickets are
// queued until Jira is configured.
var ErrNotConfigured = errors.New("jira is not configured: set JIRA_URL, JIRA_PROJECT and JIRA_USER with JIRA_API_TOKEN (Cloud) or JIRA_PAT (Data Center), in the environment or in " + displayPath)

const displayPath = "~/.config/kubectl-gitops/config.yaml"

// ConfigPath is the config file: $XDG_CONFIG_HOME/kubectl-gitops/config.yaml,
// else ~/.config/kubectl-gitops/config.yaml.
func ConfigPath(getenv func(string) string) string {
	dir := getenv("XDG_CONFIG_HOME")
	if dir == "" {
		dir = filepath.Join(getenv("HOME"), ".config")
	}
	return filepath.Join(dir, "kubectl-gitops", "config.yaml")
}

// LoadConfig reads the config file (absent is fine) and then the
// environment through getenv, which wins.
func LoadConfig(getenv func(string) string) (Config, error) {
	var c Config
	path := ConfigPath(getenv)
	data, err := os.ReadFile(path)
	switch {
	case errors.Is(err, os.ErrNotExist):
	case err != nil:
		return c, fmt.Errorf("reading %s: %w", path, err)
	default:
		if err := yaml.UnmarshalStrict(data, &c); err != nil {
			return c, fmt.Errorf("%s: %w (keys are %s)", path, err, strings.Join(ConfigVars, ", "))
		}
	}
	for _, f := range c.fields() {
		if v := getenv(f.name); v != "" {
			*f.value = v
		}
	}
	if c.IssueType == "" {
		c.IssueType = "Task"
	}
	if c.DoneTransition == "" {
		c.DoneTransition = "Done"
	}
	if _, err := c.timeout(); err != nil {
		return c, err
	}
	return c, nil
}

func (c *Config) fields() []struct {
	name  string
	value *string
} {
	return []struct {
		name  string
		value *string
	}{
		{"JIRA_URL", &c.URL}, {"JIRA_PROJECT", &c.Project}, {"JIRA_ISSUE_TYPE", &c.IssueType},
		{"JIRA_USER", &c.User}, {"JIRA_API_TOKEN", &c.APIToken}, {"JIRA_PAT", &c.PAT},
		{"JIRA_DONE_TRANSITION", &c.DoneTransition}, {"JIRA_LABELS", &c.Labels},
		{"JIRA_COMPONENT", &c.Component}, {"JIRA_PRIORITY", &c.Priority}, {"JIRA_TIMEOUT", &c.Timeout},
	}
}

// Configured is whether there is a Jira to talk to.
func (c Config) Configured() bool { return c.URL != "" && c.Project != "" }

// Validate says what is missing or contradictory, naming the variables.
func (c Config) Validate() error {
	switch {
	case !c.Configured():
		return ErrNotConfigured
	case c.PAT != "" && (c.User != "" || c.APIToken != ""):
		return errors.New("jira: set either JIRA_PAT (Data Center) or JIRA_USER with JIRA_API_TOKEN (Cloud), not both")
	case c.PAT == "" && (c.User == "" || c.APIToken == ""):
		return errors.New("jira: credentials missing: set JIRA_USER and JIRA_API_TOKEN (Cloud) or JIRA_PAT (Data Center)")
	}
	return nil
}

func (c Config) timeout() (time.Duration, error) {
	if c.Timeout == "" {
		return 10 * time.Second, nil
	}
	d, err := time.ParseDuration(c.Timeout)
	if err != nil || d <= 0 {
		return 0, fmt.Errorf("JIRA_TIMEOUT %q is not a positive duration such as 10s", c.Timeout)
	}
	return d, nil
}

// extraLabels splits JIRA_LABELS.
func (c Config) extraLabels() []string {
	var out []string
	for _, l := range strings.Split(c.Labels, ",") {
		if l = strings.TrimSpace(l); l != "" {
			out = append(out, label(l))
		}
	}
	return out
}
