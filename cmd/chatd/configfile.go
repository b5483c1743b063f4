package main

import (
	"bytes"
	"fmt"
	"os"
	"regexp"
	"strings"

	"go.yaml.in/yaml/v3"
)

// A config file (--config FILE, or CHATD_CONFIG) is a YAML mapping with one
// key per flag, named as the flag without its dashes ("addr", "redis",
// "node-id", …; deploy/chatd.example.yaml lists them all). Values are
// strings as on the command line; the two list flags (allowed-origins,
// trusted-proxies) also take a YAML list. A flag or a non-empty environment
// twin wins over the file. An unknown key, a key given twice, a value that
// is not a string, or a YAML error is refused with the file's name and the
// line.
//
// The file is walked as a yaml.Node tree rather than decoded into a struct
// with KnownFields: the tree keeps every value's line, so that a bad value
// (not only an unknown key) is refused with its line, and yaml.v3's
// KnownFields error is several lines long where chatd's errors are one.

// fileValue is one key's value in the config file, and its line.
type fileValue struct {
	value string
	line  int
}

// notInFile are flags that are actions or name the file itself.
var notInFile = map[string]string{
	"config":       "the file cannot name another file",
	"print-config": "an action, not a setting",
	"version":      "an action, not a setting",
}

var yamlLine = regexp.MustCompile(`^yaml: line (\d+): (.*)$`)

// readConfigFile reads the config file at path: flag name → value.
func readConfigFile(path string) (map[string]fileValue, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("--config: %v", err)
	}
	var doc yaml.Node
	if err := yaml.Unmarshal(b, &doc); err != nil {
		msg := strings.ReplaceAll(err.Error(), "\n", " ")
		if m := yamlLine.FindStringSubmatch(msg); m != nil {
			return nil, fmt.Errorf("%s:%s: %s", path, m[1], m[2])
		}
		return nil, fmt.Errorf("%s: %s", path, strings.TrimPrefix(msg, "yaml: "))
	}
	out := map[string]fileValue{}
	if doc.Kind == 0 || len(doc.Content) == 0 {
		return out, nil // an empty file (or only comments)
	}
	root := doc.Content[0]
	if root.Kind == yaml.ScalarNode && root.Tag == "!!null" {
		return out, nil
	}
	if root.Kind != yaml.MappingNode {
		return nil, fmt.Errorf("%s:%d: expected a mapping of flag names to values (addr: \":8080\")", path, root.Line)
	}
	specs := map[string]flagSpec{}
	var known []string
	for _, f := range flagSpecs {
		specs[f.name] = f
		known = append(known, f.name)
	}
	for i := 0; i+1 < len(root.Content); i += 2 {
		k, v := root.Content[i], resolveAlias(root.Content[i+1])
		name := k.Value
		if why, ok := notInFile[name]; ok {
			return nil, fmt.Errorf("%s:%d: %q is not a config file key: %s", path, k.Line, name, why)
		}
		f, ok := specs[name]
		if !ok || k.Kind != yaml.ScalarNode {
			return nil, fmt.Errorf("%s:%d: unknown key %q (the keys are the flag names: %s)", path, k.Line, name, strings.Join(known, ", "))
		}
		if prev, dup := out[name]; dup {
			return nil, fmt.Errorf("%s:%d: %q is given twice (first at line %d)", path, k.Line, name, prev.line)
		}
		val, err := scalarValue(f, v)
		if err != nil {
			return nil, fmt.Errorf("%s:%d: %s: %v", path, v.Line, name, err)
		}
		out[name] = fileValue{value: val, line: v.Line}
	}
	return out, nil
}

func resolveAlias(n *yaml.Node) *yaml.Node {
	for n.Kind == yaml.AliasNode && n.Alias != nil {
		n = n.Alias
	}
	return n
}

// scalarValue is a value as its flag would take it: a scalar's text ("" for
// null), or a list flag's items joined with commas.
func scalarValue(f flagSpec, v *yaml.Node) (string, error) {
	switch v.Kind {
	case yaml.ScalarNode:
		if v.Tag == "!!null" {
			return "", nil
		}
		return v.Value, nil
	case yaml.SequenceNode:
		if !f.list {
			return "", fmt.Errorf("expected a string, not a list")
		}
		var items []string
		for _, it := range v.Content {
			it = resolveAlias(it)
			if it.Kind != yaml.ScalarNode {
				return "", fmt.Errorf("expected a list of strings")
			}
			items = append(items, it.Value)
		}
		return strings.Join(items, ","), nil
	}
	if f.list {
		return "", fmt.Errorf("expected a string or a list of strings")
	}
	return "", fmt.Errorf("expected a string")
}

// printConfig writes c as a config file that loads back to the same
// configuration: every key, in the order of the flags, with where its value
// came from as a comment. Secrets (secret, admin-token, admin-read-token, server-keys)
// are printed empty
// and the password of a Redis URL as ***: give them again (through the
// environment) when loading it.
func printConfig(c Config, r resolved) ([]byte, error) {
	m := &yaml.Node{Kind: yaml.MappingNode}
	str := func(s string) *yaml.Node {
		return &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: s, Style: yaml.DoubleQuotedStyle}
	}
	for _, f := range flagSpecs {
		if f.name == "debug-addr" {
			continue // folded into metrics-addr
		}
		from := r.from[f.name].String()
		var v *yaml.Node
		switch f.name {
		case "redis":
			masked := maskRedisPassword(c.Redis)
			v = str(masked)
			if masked != c.Redis {
				from += "; password masked"
			}
		case "allowed-origins":
			v = list(c.AllowedOrigins)
		case "trusted-proxies":
			var ps []string
			for _, p := range c.TrustedProxies {
				ps = append(ps, p.String())
			}
			v = list(ps)
		case "log-level":
			v = str(strings.ToLower(c.LogLevel.String()))
		case "shutdown-grace":
			v = str(c.ShutdownGrace.String())
		case "send-window":
			v = str(c.SendWindow.String())
		case "metrics-addr":
			v = str(c.MetricsAddr)
			if r.given("debug-addr") && r.val["debug-addr"] != "" && !r.given("metrics-addr") {
				from = r.from["debug-addr"].String() + " (deprecated --debug-addr)"
			}
		case "node-id":
			v = str(c.NodeID)
			if c.NodeID == "" {
				from += " (empty: hostname-pid)"
			}
		default:
			v = str(r.val[f.name])
			if f.secret && r.val[f.name] != "" {
				v = str("")
				from = "set, masked (" + from + ")"
			}
		}
		v.LineComment = from
		m.Content = append(m.Content, &yaml.Node{Kind: yaml.ScalarNode, Value: f.name}, v)
	}
	var buf bytes.Buffer
	buf.WriteString("# chatd --print-config: the effective configuration. Load it with --config;\n" +
		"# masked values (secret, admin-token, admin-read-token, server-keys, a Redis\n" +
		"# password) must be given again, through the environment (CHATD_SECRET,\n" +
		"# CHATD_ADMIN_TOKEN, CHATD_ADMIN_READ_TOKEN, CHATD_SERVER_KEYS, CHATD_REDIS).\n")
	enc := yaml.NewEncoder(&buf)
	enc.SetIndent(2)
	if err := enc.Encode(m); err != nil {
		return nil, err
	}
	if err := enc.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// list is a flow-style YAML list of strings ([] when empty).
func list(items []string) *yaml.Node {
	n := &yaml.Node{Kind: yaml.SequenceNode, Tag: "!!seq", Style: yaml.FlowStyle}
	for _, it := range items {
		n.Content = append(n.Content, &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: it, Style: yaml.DoubleQuotedStyle})
	}
	return n
}
