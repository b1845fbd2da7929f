package plugin

import (
	"encoding/json"
	"fmt"
	"io"
	"reflect"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"
	"sigs.k8s.io/yaml"

	"github.com/kubectl-gitops/kubectl-gitops/redact"
)

// outputFlag registers -o/--output with the formats a command accepts; the
// first is the default. run() checks the value once for every command
// (validateOutput), so no command spells its formats twice.
func outputFlag(cmd *cobra.Command, target *string, formats ...string) {
	*target = formats[0]
	cmd.Flags().VarP(&outputValue{target: target, formats: formats}, "output", "o", fmt.Sprintf("output format, one of: %s", joinFormats(formats)))
}

func joinFormats(formats []string) string { return strings.Join(formats, "|") }

// outputValue is -o/--output and the formats its command prints.
type outputValue struct {
	target  *string
	formats []string
}

func (v *outputValue) String() string {
	if v.target == nil {
		return ""
	}
	return *v.target
}

func (v *outputValue) Type() string { return "string" }

func (v *outputValue) Set(format string) error {
	*v.target = format
	return nil
}

// validateOutput reports a usage error when cmd's --output is not one of
// the formats it registered.
func validateOutput(cmd *cobra.Command) error {
	flag := cmd.Flags().Lookup("output")
	if flag == nil {
		return nil
	}
	v, ok := flag.Value.(*outputValue)
	if !ok {
		return nil
	}
	for _, f := range v.formats {
		if *v.target == f {
			return nil
		}
	}
	return usageErrorf("--output %q is not supported: use one of %s", *v.target, joinFormats(v.formats))
}

// printStructured writes v as indented JSON or as YAML. A nil slice is an
// empty list ([]), never null: a script reading "nothing found" gets a list.
func printStructured(w io.Writer, format string, v any) error {
	if rv := reflect.ValueOf(v); rv.Kind() == reflect.Slice && rv.IsNil() {
		v = reflect.MakeSlice(rv.Type(), 0, 0).Interface()
	}
	switch format {
	case "json":
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(v)
	case "yaml":
		b, err := yaml.Marshal(v)
		if err != nil {
			return err
		}
		_, err = w.Write(b)
		return err
	}
	return fmt.Errorf("unknown structured output format %q", format)
}

// listWriter prints a list item by item, in exactly the JSON or YAML that
// printStructured prints for the whole list, so that a long list (an audit
// log of 100,000 records) is never held in memory at once.
type listWriter struct {
	w      io.Writer
	format string
	n      int
}

// add prints the next item.
func (l *listWriter) add(v any) error {
	var item []byte
	switch l.format {
	case "json":
		b, err := json.MarshalIndent(v, "  ", "  ")
		if err != nil {
			return err
		}
		sep := ",\n  "
		if l.n == 0 {
			sep = "[\n  "
		}
		item = append([]byte(sep), b...)
	case "yaml":
		b, err := yaml.Marshal(v)
		if err != nil {
			return err
		}
		lines := strings.SplitAfter(strings.TrimSuffix(string(b), "\n"), "\n")
		var buf strings.Builder
		for i, line := range lines {
			if i == 0 {
				buf.WriteString("- ")
			} else if line != "\n" {
				buf.WriteString("  ")
			}
			buf.WriteString(line)
		}
		buf.WriteString("\n")
		item = []byte(buf.String())
	default:
		return fmt.Errorf("unknown structured output format %q", l.format)
	}
	l.n++
	_, err := l.w.Write(item)
	return err
}

// close ends the list.
func (l *listWriter) close() error {
	end := ""
	switch {
	case l.n == 0:
		end = "[]\n"
	case l.format == "json":
		end = "\n]\n"
	}
	_, err := io.WriteString(l.w, end)
	return err
}

// printable makes one line of text safe for a terminal: user and server
// text may carry escape sequences (ESC, OSC, CSI as C1 codes) that would
// recolour, retitle or rewrite the screen. Line breaks and tabs become
// spaces; other control and bidi-override characters are shown escaped.
func printable(s string) string {
	return safeText(s, false)
}

// printableLines is printable for text that keeps its line breaks.
func printableLines(s string) string {
	return safeText(s, true)
}

func safeText(s string, keepLines bool) string {
	var b strings.Builder
	for _, r := range s {
		switch {
		case r == '\n' && keepLines:
			b.WriteRune(r)
		case r == '\n' || r == '\t' || r == '\r':
			b.WriteByte(' ')
		case r < 0x20 || r == 0x7f || (r >= 0x80 && r < 0xa0):
			fmt.Fprintf(&b, `\x%02x`, r)
		case r == '\u2028' || r == '\u2029' || (r >= '\u202a' && r <= '\u202e') || (r >= '\u2066' && r <= '\u2069') || r == '\u200e' || r == '\u200f':
			fmt.Fprintf(&b, `\u%04x`, r)
		default:
			b.WriteRune(r)
		}
	}
	return b.String()
}

// table prints rows in aligned columns, as kubectl get does: every
// command's table goes through it, every cell made printable.
type table struct {
	w *tabwriter.Writer
}

// newTable starts a table on out with its header row (none when header
// is empty).
func newTable(out io.Writer, header ...string) *table {
	t := &table{w: tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)}
	if len(header) > 0 {
		t.row(header...)
	}
	return t
}

// row adds a row.
func (t *table) row(cells ...string) {
	for i, c := range cells {
		cells[i] = printable(c)
	}
	fmt.Fprintln(t.w, strings.Join(cells, "\t"))
}

// flush writes the rows added so far.
func (t *table) flush() error { return t.w.Flush() }

// warn prints a warning on stderr, redacted and printable: warnings often
// carry a server's words, which may echo a value.
func warn(w io.Writer, msg string) {
	fmt.Fprintln(w, "warning: "+printable(redact.Text(msg)))
}

// note prints an informational line on stderr, redacted and printable.
func note(w io.Writer, format string, args ...any) {
	fmt.Fprintln(w, printable(redact.Text(fmt.Sprintf(format, args...))))
}

// csvCell neutralises a cell a spreadsheet would evaluate as a formula
// (OWASP's CSV injection advice): a leading =, +, -, @, tab or carriage
// return gets a single quote in front. Control characters are escaped.
func csvCell(s string) string {
	if s != "" && strings.ContainsRune("=+-@\t\r", rune(s[0])) {
		s = "'" + s
	}
	return safeText(s, true)
}

// jsonText is v as compact JSON, for a table cell.
func jsonText(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}
