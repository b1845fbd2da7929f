package plugin

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"
	"sigs.k8s.io/yaml"
)

// outputFlag registers -o/--output with the formats a command accepts; the
// first is the default.
func outputFlag(cmd *cobra.Command, target *string, formats ...string) {
	*target = formats[0]
	cmd.Flags().StringVarP(target, "output", "o", formats[0], fmt.Sprintf("output format, one of: %s", joinFormats(formats)))
}

func joinFormats(formats []string) string { return strings.Join(formats, "|") }

// validateOutput reports a usage error when format is not one of formats.
func validateOutput(format string, formats ...string) error {
	for _, f := range formats {
		if format == f {
			return nil
		}
	}
	return usageErrorf("--output %q is not supported: use one of %s", format, joinFormats(formats))
}

// printStructured writes v as indented JSON or as YAML.
func printStructured(w io.Writer, format string, v any) error {
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
