package bus

import "strings"

func splitLines(s string) []string { return strings.Split(strings.TrimSpace(s), "\n") }
func contains(s, sub string) bool  { return strings.Contains(s, sub) }

// field returns the value of name=value in a CLIENT LIST line.
func field(line, name string) string {
	for _, f := range strings.Fields(line) {
		if v, ok := strings.CutPrefix(f, name+"="); ok {
			return v
		}
	}
	return ""
}
