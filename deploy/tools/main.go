// Command deploycheck renders and reads chatd's deployment files for the
// deploy tests, with the libraries the real tools use, so that the checks
// do not depend on a kubectl or promtool being installed:
//
//	deploycheck kustomize DIR   print the kustomization in DIR, rendered (kubectl kustomize DIR)
//	deploycheck promql          read PromQL expressions, one JSON string per line, and print
//	                            for each a JSON list of the metric names it selects
//
// It is a module of its own (deploy/tools/go.mod) so that chatd's go.mod
// carries neither kustomize nor Prometheus's server code.
package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"sort"

	"github.com/prometheus/prometheus/promql/parser"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"
)

func main() {
	if len(os.Args) < 2 {
		usage()
	}
	var err error
	switch os.Args[1] {
	case "kustomize":
		if len(os.Args) != 3 {
			usage()
		}
		err = kustomize(os.Args[2])
	case "promql":
		err = promql()
	default:
		usage()
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "deploycheck:", err)
		os.Exit(1)
	}
}

func usage() {
	fmt.Fprintln(os.Stderr, "usage: deploycheck kustomize DIR | deploycheck promql < expressions")
	os.Exit(2)
}

// kustomize renders dir as `kubectl kustomize dir` does.
func kustomize(dir string) error {
	opts := krusty.MakeDefaultOptions()
	opts.Reorder = krusty.ReorderOptionLegacy // kubectl's order: namespaces, services, … first
	k := krusty.MakeKustomizer(opts)
	m, err := k.Run(filesys.MakeFsOnDisk(), dir)
	if err != nil {
		return err
	}
	out, err := m.AsYaml()
	if err != nil {
		return err
	}
	_, err = os.Stdout.Write(out)
	return err
}

// promql prints the metric names each expression selects; an expression
// that does not parse is an error naming it.
func promql() error {
	p := parser.NewParser(parser.Options{})
	sc := bufio.NewScanner(os.Stdin)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	enc := json.NewEncoder(os.Stdout)
	for sc.Scan() {
		var expr string
		if err := json.Unmarshal(sc.Bytes(), &expr); err != nil {
			return fmt.Errorf("input line %q: %w", sc.Text(), err)
		}
		e, err := p.ParseExpr(expr)
		if err != nil {
			return fmt.Errorf("%q: %w", expr, err)
		}
		set := map[string]bool{}
		parser.Inspect(e, func(n parser.Node, _ []parser.Node) error {
			if vs, ok := n.(*parser.VectorSelector); ok {
				name := vs.Name
				if name == "" {
					for _, m := range vs.LabelMatchers {
						if m.Name == "__name__" {
							name = m.Value
						}
					}
				}
				set[name] = true
			}
			return nil
		})
		names := []string{}
		for n := range set {
			names = append(names, n)
		}
		sort.Strings(names)
		if err := enc.Encode(names); err != nil {
			return err
		}
	}
	return sc.Err()
}
