package rooms

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// maxMethods is the most methods, exported and unexported, one type of
// the package may declare: past it a type does several things (the
// Service this package had, 67 methods over seats, messages, lobbies,
// read marks and private rooms, was split by concern).
const maxMethods = 35

// TestNoTypeDoesEverything counts the methods each type of the package
// declares in its non-test files and fails on a type with more than
// maxMethods.
func TestNoTypeDoesEverything(t *testing.T) {
	t.Parallel()
	fset := token.NewFileSet()
	pkgs, err := parser.ParseDir(fset, ".", func(fi os.FileInfo) bool {
		return !strings.HasSuffix(fi.Name(), "_test.go")
	}, 0)
	require.NoError(t, err)
	require.Contains(t, pkgs, "rooms")
	count := map[string]int{}
	for _, f := range pkgs["rooms"].Files {
		for _, d := range f.Decls {
			fd, ok := d.(*ast.FuncDecl)
			if !ok || fd.Recv == nil || len(fd.Recv.List) == 0 {
				continue
			}
			typ := fd.Recv.List[0].Type
			if star, ok := typ.(*ast.StarExpr); ok {
				typ = star.X
			}
			if id, ok := typ.(*ast.Ident); ok {
				count[id.Name]++
			}
		}
	}
	require.NotEmpty(t, count)
	for name, n := range count {
		assert.LessOrEqual(t, n, maxMethods, "type %s declares %d methods", name, n)
	}
}
