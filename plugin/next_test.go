package plugin

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"

	"github.com/kubectl-gitops/kubectl-gitops/next"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"k8s.io/cli-runtime/pkg/genericiooptions"
)

// nextSteps is every command line package next spells, as the tool would
// write it, keyed by the function that wrote it.
var nextSteps = map[string][]string{
	"Restore":            {next.Restore("argocd", "web"), next.Restore("team-a", "web")},
	"ForceRestore":       {next.ForceRestore("team-a", "web")},
	"Join":               {next.Join("argocd", "web"), next.Join("team-a", "web")},
	"Status":             {next.Status("argocd", "web"), next.Status("team-a", "web"), next.Status("", "")},
	"Propose":            {next.Propose("team-a", "web")},
	"TicketSync":         {next.TicketSync()},
	"Debt":               {next.Debt("web")},
	"AuditLog":           {next.AuditLog("web", "breakglass.paused", true), next.AuditLog("web", "", false)},
	"AuditLogUnreviewed": {next.AuditLogUnreviewed()},
	"AuditLogAll":        {next.AuditLogAll()},
	"AuditShow":          {next.AuditShow("20261203-031000-ab12c")},
	"AuditVerify":        {next.AuditVerify(""), next.AuditVerify("gitops-audit")},
	"AuditVerifyFile":    {next.AuditVerifyFile("/var/audit.jsonl"), next.AuditVerifyFile("/var/audit log's.jsonl")},
	"AuditVerifyMirror":  {next.AuditVerifyMirror("s3://audit/prod", "", true), next.AuditVerifyMirror("s3://audit/prod", "gitops-audit", false)},
	"AuditExport":        {next.AuditExport()},
	"ProposeAny":         {next.ProposeAny()},
	"DriftPropose":       {next.DriftPropose("argocd", "web"), next.DriftPropose("team-a", "web")},
	"Breakglass":         {next.Breakglass("web", "deploy/web") + " --replicas 3 --reason r"},
	"AuditRepairHead":    {next.AuditRepairHead(""), next.AuditRepairHead("gitops-audit")},
}

// TestEveryNextStepParses runs every command line the tool tells people to
// run through the real command tree: the command exists, its flags are
// flags it has, with values where they take one, and its arguments are as
// many as it accepts. A renamed command or flag fails here.
func TestEveryNextStepParses(t *testing.T) {
	root := NewCmdRoot(NewFactory(genericiooptions.NewTestIOStreamsDiscard()))
	for fn, lines := range nextSteps {
		for _, line := range lines {
			rest, ok := strings.CutPrefix(line, "kubectl gitops ")
			if !ok {
				t.Errorf("%s: %q is not a kubectl gitops command", fn, line)
				continue
			}
			args, ok := shellWords(strings.ReplaceAll(rest, next.Elided, "x"))
			if !ok {
				t.Errorf("%s: %q leaves a quote open", fn, line)
				continue
			}
			if err := parseCommandLine(root, args); err != nil {
				t.Errorf("%s: %q: %v", fn, line, err)
			}
		}
	}
}

// parseCommandLine runs args (the words after kubectl gitops) through the
// real command tree without running anything: the command exists and is
// one (not a group), its flags are flags it has, with values where they
// take one, and its arguments are as many as it accepts.
func parseCommandLine(root *cobra.Command, args []string) error {
	cmd, flags, err := root.Find(args)
	if err != nil || cmd == root {
		return fmt.Errorf("names no command (%v)", err)
	}
	if !cmd.Runnable() {
		return fmt.Errorf("names a command group, not a command")
	}
	cmd.Flags().VisitAll(func(f *pflag.Flag) { f.Changed = false })
	if err := cmd.ParseFlags(flags); err != nil {
		return err
	}
	return cmd.ValidateArgs(cmd.Flags().Args())
}

// TestEveryNextStepIsParsed keeps nextSteps whole: a function added to
// package next without a line here would never be parsed.
func TestEveryNextStepIsParsed(t *testing.T) {
	files, err := parser.ParseDir(token.NewFileSet(), "../next", nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	var missing []string
	for _, pkg := range files {
		for name, file := range pkg.Files {
			if strings.HasSuffix(name, "_test.go") {
				continue
			}
			for _, d := range file.Decls {
				if fd, ok := d.(*ast.FuncDecl); ok && fd.Recv == nil && fd.Name.IsExported() && nextSteps[fd.Name.Name] == nil {
					missing = append(missing, fd.Name.Name)
				}
			}
		}
	}
	sort.Strings(missing)
	if len(missing) > 0 {
		t.Errorf("package next spells command lines no test parses: %s", strings.Join(missing, ", "))
	}
}

// commandLine is a kubectl gitops command line in a string.
var commandLine = regexp.MustCompile(`kubectl gitops (breakglass|status|restore|propose|drift|debt|contract|audit|ticket|controller|version|completion)\b`)

// TestEveryCommandLineComesFromNext: a command line the tool prints, in any
// package, is spelt by package next, which TestEveryNextStepParses parses:
// the controller told people to run `kubectl gitops propose APP -n NS`,
// which the command refuses. Help text (a command's Use, Short, Long and
// Example, a flag's usage) is the command tree's own and is left out.
func TestEveryCommandLineComesFromNext(t *testing.T) {
	flagUsage := regexp.MustCompile(`^(Bool|String|StringArray|StringSlice|Int|Int64|Uint64|Duration|Float64)(Var)?P?$`)
	var found []string
	err := filepath.WalkDir("..", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			switch d.Name() {
			case "next", "test", "hack", "testdata", ".git", "bin", "dist":
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		fset := token.NewFileSet()
		file, err := parser.ParseFile(fset, path, nil, 0)
		if err != nil {
			return err
		}
		help := map[ast.Node]bool{}
		ast.Inspect(file, func(n ast.Node) bool {
			if help[n] {
				return false
			}
			switch n := n.(type) {
			case *ast.KeyValueExpr:
				if key, ok := n.Key.(*ast.Ident); ok && (key.Name == "Use" || key.Name == "Short" || key.Name == "Long" || key.Name == "Example") {
					help[n.Value] = true
				}
			case *ast.CallExpr:
				if sel, ok := n.Fun.(*ast.SelectorExpr); ok && flagUsage.MatchString(sel.Sel.Name) && len(n.Args) > 0 {
					help[n.Args[len(n.Args)-1]] = true
				}
			case *ast.BasicLit:
				if n.Kind == token.STRING && commandLine.MatchString(n.Value) {
					found = append(found, fmt.Sprintf("%s: %s", fset.Position(n.Pos()), n.Value))
				}
			}
			return true
		})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range found {
		t.Errorf("a command line spelt outside package next: %s", f)
	}
}
