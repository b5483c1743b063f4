package redisx_test

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/yuin/gopher-lua/ast"
	"github.com/yuin/gopher-lua/parse"
)

// TestLuaScriptsBuildNoKeyNames parses every .lua file of the module and
// fails on a key name built inside a script: every key a script touches
// must come in KEYS, so that Redis Cluster can check, before the script
// runs, that all of them are on the node (a key the script builds is
// checked only when it is touched — during a resharding, after the
// script's first writes).
//
// The rule, on the syntax tree of each file:
//
//  1. A key expression is KEYS[i]; a name assigned a key expression
//     (local k = KEYS[1]); a table field assigned one anywhere ({seats =
//     KEYS[2]} or t.seats = KEYS[2]: then any x.seats is one); an element
//     of a table that was assigned one (t[i] = KEYS[3]: then any t[j]); an
//     element of a name bound to the KEYS table itself (local k = KEYS, or
//     a function parameter in a position where some call passes KEYS); and
//     a function parameter in a position where some call passes a key
//     expression. Neither operand of '..' may be a key expression.
//  2. A built expression is a '..' concatenation, a call of string.format,
//     string.gsub, string.rep, string.sub or table.concat, a name assigned
//     a built expression in scope, or an 'and'/'or' of one. The key
//     arguments of redis.call and redis.pcall must not be built: the first
//     argument after the command by default; every argument of the
//     commands that take only keys (DEL, EXISTS, MGET, SUNION, ...); both
//     of RENAME, SMOVE, LMOVE and the like; the destination and the
//     numkeys keys of ZUNIONSTORE and its kin. PUBLISH and SPUBLISH name a
//     channel, not a key, and TIME, PING and ECHO none. When the command
//     is not a string literal, its first argument counts as a key: a
//     script that publishes on a built channel names the command
//     literally. Arguments after an unpack(...) are not checked.
//
// A file named *_lib.lua is a library that its package prepends to other
// scripts (scripts.go): it is checked alone, and each other script of its
// directory is checked with the directory's libraries before it, so that
// the library's bindings (lobby_args' fields) count in the script. The
// rule is syntactic: a key built from ARGV and passed to a function that
// uses its parameter as a key is not caught; one built from KEYS is,
// wherever it is built.
func TestLuaScriptsBuildNoKeyNames(t *testing.T) {
	root := moduleRoot(t)
	byDir := map[string][]string{}
	for _, path := range luaSources(t, root) {
		byDir[filepath.Dir(path)] = append(byDir[filepath.Dir(path)], path)
	}
	require.NotEmpty(t, byDir, "no .lua file under %s", root)
	files := 0
	seen := map[string]bool{} // a library's problems show in every set it is in
	for _, paths := range byDir {
		sort.Strings(paths)
		var libs []luaFile
		for _, p := range paths {
			if strings.HasSuffix(p, "_lib.lua") {
				libs = append(libs, readLua(t, root, p))
			}
		}
		for _, p := range paths {
			f := readLua(t, root, p)
			set := []luaFile{f}
			if !strings.HasSuffix(p, "_lib.lua") {
				set = append(append([]luaFile{}, libs...), f)
			}
			problems := checkLuaKeys(set)
			for _, pr := range problems {
				if !seen[pr] {
					seen[pr] = true
					t.Error(pr)
				}
			}
			files++
		}
	}
	t.Logf("%d Lua files checked", files)
}

func TestLuaKeyCheckCatchesBuiltKeys(t *testing.T) {
	bad := []struct{ name, src, says string }{
		{"a KEYS element concatenated", `return redis.call('ZCARD', KEYS[1] .. ARGV[1])`, "'..' on a key"},
		{"a local holding a built key", "local seats = KEYS[2] .. ':' .. ARGV[1]\nreturn redis.call('ZCARD', seats)", "'..' on a key"},
		{"a key built from ARGV", "local k = 'chatd:' .. ARGV[1]\nreturn redis.call('GET', k)", "key argument of redis.call('GET') is built"},
		{"a key built with string.format", `return redis.call('GET', string.format('%s:x', ARGV[1]))`, "is built"},
		{"the second key of a multi-key command", `return redis.call('DEL', KEYS[1], ARGV[1] .. 'x')`, "key argument of redis.call('DEL')"},
		{"a destination of ZUNIONSTORE", `return redis.call('ZUNIONSTORE', ARGV[2] .. 'x', 1, KEYS[1])`, "ZUNIONSTORE"},
		{"a publish whose command is not a literal", `redis.call(ARGV[1], 'ch:' .. ARGV[2], 'x')`, "key argument of redis.call(<dynamic>)"},
		{"a table element assigned a key", "local t = {}\nt[1] = KEYS[1]\nlocal x = t[1] .. 'y'", "'..' on a key"},
		{"a key passed to a function", "local function f(k) return redis.call('GET', k .. ':x') end\nreturn f(KEYS[1])", "'..' on a key"},
		{"the KEYS table passed to a function (the old lobby_lib pattern)",
			"local function args(keys) return {seats = keys[9]} end\nlocal L = args(KEYS)\nreturn redis.call('ZCARD', L.seats .. '3')", "'..' on a key"},
		{"pcall too", `return redis.pcall('GET', 'x' .. ARGV[1])`, "redis.pcall('GET')"},
	}
	for _, tc := range bad {
		t.Run("flags "+tc.name, func(t *testing.T) {
			problems := checkLuaKeys([]luaFile{parseLua(t, "bad.lua", tc.src)})
			require.NotEmpty(t, problems, "the rule let this through:\n%s", tc.src)
			assert.Contains(t, strings.Join(problems, "\n"), tc.says)
		})
	}

	t.Run("flags a script built on a library's bindings, in the script", func(t *testing.T) {
		lib := parseLua(t, "x_lib.lua", "local function lobby_args()\n  return {rooms = KEYS[1], seats = KEYS[2]}\nend")
		script := parseLua(t, "seat_claim.lua", "local L = lobby_args()\nreturn redis.call('ZCARD', L.seats .. ARGV[1])")
		problems := checkLuaKeys([]luaFile{lib, script})
		require.Len(t, problems, 2, "%v", problems)
		assert.True(t, strings.HasPrefix(problems[0], "seat_claim.lua:2:"), problems[0])
	})

	good := []struct{ name, src string }{
		{"a channel built for PUBLISH", `redis.call('PUBLISH', 'ch:' .. ARGV[1], 'x')`},
		{"a channel in a local, for SPUBLISH", "local ch = ARGV[1] .. '3'\nredis.call('SPUBLISH', ch, ARGV[2] .. '!')"},
		{"fields, members, values and bounds built", "redis.call('HSET', KEYS[1], 'f' .. ARGV[1], ARGV[2] .. 'x')\n" +
			"redis.call('ZRANGEBYSCORE', KEYS[2], '(' .. ARGV[1], '+inf')\nredis.call('ZADD', KEYS[2], 1, ARGV[1] .. ' ' .. ARGV[2])"},
		{"key indexes computed", "local n = #KEYS - 1\nreturn redis.call('GET', KEYS[2 + ARGV[1] % n])"},
		{"keys through fields and tables", "local L = {members = KEYS[1]}\nlocal h = {}\nh[ARGV[1]] = KEYS[2]\n" +
			"redis.call('ZCARD', L.members)\nredis.call('PEXPIRE', h[ARGV[1]], 10)"},
		{"a key variable as a command's parameter", "local function bulk(cmd, key, items)\n  return redis.call(cmd, key, unpack(items))\nend\nreturn bulk('ZREM', KEYS[1], {ARGV[1]})"},
		{"no key at all", `return redis.call('TIME')`},
	}
	for _, tc := range good {
		t.Run("lets "+tc.name+" through", func(t *testing.T) {
			problems := checkLuaKeys([]luaFile{parseLua(t, "good.lua", tc.src)})
			assert.Empty(t, problems)
		})
	}
}

// luaFile is one parsed file: its name (relative to the module root) and
// its statements.
type luaFile struct {
	name  string
	stmts []ast.Stmt
}

func readLua(t *testing.T, root, path string) luaFile {
	t.Helper()
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	rel, err := filepath.Rel(root, path)
	require.NoError(t, err)
	return parseLua(t, filepath.ToSlash(rel), string(b))
}

func parseLua(t *testing.T, name, src string) luaFile {
	t.Helper()
	stmts, err := parse.Parse(strings.NewReader(src), name)
	require.NoError(t, err, "%s does not parse", name)
	return luaFile{name: name, stmts: stmts}
}

func moduleRoot(t *testing.T) string {
	t.Helper()
	dir, err := os.Getwd()
	require.NoError(t, err)
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		require.NotEqual(t, parent, dir, "no go.mod above the test's directory")
		dir = parent
	}
}

// keyPositions are the 1-based argument positions (after the command) of
// the keys of the commands whose keys are not just their first argument:
// -1 means every argument, 0 a command without keys.
var keyPositions = map[string][]int{
	"DEL": {-1}, "UNLINK": {-1}, "EXISTS": {-1}, "TOUCH": {-1}, "MGET": {-1}, "WATCH": {-1},
	"SINTER": {-1}, "SUNION": {-1}, "SDIFF": {-1}, "SINTERSTORE": {-1}, "SUNIONSTORE": {-1},
	"SDIFFSTORE": {-1}, "PFCOUNT": {-1}, "PFMERGE": {-1},
	"RENAME": {1, 2}, "RENAMENX": {1, 2}, "RPOPLPUSH": {1, 2}, "LMOVE": {1, 2}, "BLMOVE": {1, 2},
	"SMOVE": {1, 2}, "COPY": {1, 2}, "ZRANGESTORE": {1, 2}, "GEOSEARCHSTORE": {1, 2},
	"PUBLISH": {0}, "SPUBLISH": {0}, "TIME": {0}, "PING": {0}, "ECHO": {0},
}

// numkeysAt are the commands with a numkeys argument: its position, and
// whether the argument before it is a destination key.
var numkeysAt = map[string]struct {
	pos  int
	dest bool
}{
	"ZUNIONSTORE": {2, true}, "ZINTERSTORE": {2, true}, "ZDIFFSTORE": {2, true},
	"ZUNION": {1, false}, "ZINTER": {1, false}, "ZDIFF": {1, false}, "ZINTERCARD": {1, false},
	"SINTERCARD": {1, false}, "LMPOP": {1, false}, "ZMPOP": {1, false},
}

type binding struct{ key, keysTable, built bool }

type scope struct {
	parent *scope
	vars   map[string]*binding
}

func (s *scope) lookup(name string) *binding {
	for ; s != nil; s = s.parent {
		if b, ok := s.vars[name]; ok {
			return b
		}
	}
	return nil
}

// luaChecker applies the rule of TestLuaScriptsBuildNoKeyNames to a set of
// files run as one script (libraries first).
type luaChecker struct {
	funcs     map[string]*ast.FunctionExpr // by name
	keyParams map[*ast.FunctionExpr]map[int]*binding
	keyFields map[string]bool // x.name is a key expression
	keyTables map[string]bool // t[i] is a key expression
	changed   bool            // a fact was learnt in this pass
	report    bool
	file      string
	problems  []string
}

// checkLuaKeys returns the problems of files, "file:line: what".
func checkLuaKeys(files []luaFile) []string {
	c := &luaChecker{funcs: map[string]*ast.FunctionExpr{}, keyParams: map[*ast.FunctionExpr]map[int]*binding{},
		keyFields: map[string]bool{}, keyTables: map[string]bool{}}
	run := func() {
		global := &scope{vars: map[string]*binding{}}
		for _, f := range files {
			c.file = f.name
			c.block(f.stmts, global)
		}
	}
	for pass := 0; pass < 10; pass++ { // learn bindings that flow through calls until nothing changes
		c.changed = false
		run()
		if !c.changed {
			break
		}
	}
	c.report = true
	run()
	return c.problems
}

func (c *luaChecker) problem(n ast.PositionHolder, format string, args ...any) {
	if c.report {
		c.problems = append(c.problems, fmt.Sprintf("%s:%d: %s", c.file, n.Line(), fmt.Sprintf(format, args...)))
	}
}

func (c *luaChecker) learn(set map[string]bool, name string) {
	if !set[name] {
		set[name] = true
		c.changed = true
	}
}

func (c *luaChecker) block(stmts []ast.Stmt, sc *scope) {
	for _, st := range stmts {
		c.stmt(st, sc)
	}
}

func (c *luaChecker) bind(e ast.Expr, sc *scope) *binding {
	return &binding{key: c.isKey(e, sc), keysTable: c.isKeysTable(e, sc), built: c.isBuilt(e, sc)}
}

func (c *luaChecker) stmt(st ast.Stmt, sc *scope) {
	switch s := st.(type) {
	case *ast.LocalAssignStmt:
		for _, e := range s.Exprs {
			c.expr(e, sc)
		}
		for i, name := range s.Names {
			b := &binding{}
			if i < len(s.Exprs) {
				b = c.bind(s.Exprs[i], sc)
				if fn, ok := s.Exprs[i].(*ast.FunctionExpr); ok {
					c.funcs[name] = fn
				}
			}
			sc.vars[name] = b
		}
	case *ast.AssignStmt:
		for _, e := range s.Rhs {
			c.expr(e, sc)
		}
		for i, lhs := range s.Lhs {
			var rhs ast.Expr
			if i < len(s.Rhs) {
				rhs = s.Rhs[i]
			}
			c.assign(lhs, rhs, sc)
		}
	case *ast.FuncCallStmt:
		c.expr(s.Expr, sc)
	case *ast.DoBlockStmt:
		c.block(s.Stmts, &scope{parent: sc, vars: map[string]*binding{}})
	case *ast.WhileStmt:
		c.expr(s.Condition, sc)
		c.block(s.Stmts, &scope{parent: sc, vars: map[string]*binding{}})
	case *ast.RepeatStmt:
		inner := &scope{parent: sc, vars: map[string]*binding{}}
		c.block(s.Stmts, inner)
		c.expr(s.Condition, inner)
	case *ast.IfStmt:
		c.expr(s.Condition, sc)
		c.block(s.Then, &scope{parent: sc, vars: map[string]*binding{}})
		c.block(s.Else, &scope{parent: sc, vars: map[string]*binding{}})
	case *ast.NumberForStmt:
		for _, e := range []ast.Expr{s.Init, s.Limit, s.Step} {
			if e != nil {
				c.expr(e, sc)
			}
		}
		c.block(s.Stmts, &scope{parent: sc, vars: map[string]*binding{s.Name: {}}})
	case *ast.GenericForStmt:
		for _, e := range s.Exprs {
			c.expr(e, sc)
		}
		inner := &scope{parent: sc, vars: map[string]*binding{}}
		for _, n := range s.Names {
			inner.vars[n] = &binding{}
		}
		c.block(s.Stmts, inner)
	case *ast.FuncDefStmt:
		if id, ok := s.Name.Func.(*ast.IdentExpr); ok && s.Name.Method == "" {
			c.funcs[id.Value] = s.Func
		}
		c.expr(s.Func, sc)
	case *ast.ReturnStmt:
		for _, e := range s.Exprs {
			c.expr(e, sc)
		}
	}
}

// assign records what lhs = rhs teaches (rhs may be nil).
func (c *luaChecker) assign(lhs, rhs ast.Expr, sc *scope) {
	b := &binding{}
	if rhs != nil {
		b = c.bind(rhs, sc)
	}
	switch l := lhs.(type) {
	case *ast.IdentExpr:
		if old := sc.lookup(l.Value); old != nil {
			*old = *b
			return
		}
		root := sc
		for root.parent != nil {
			root = root.parent
		}
		root.vars[l.Value] = b
	case *ast.AttrGetExpr:
		c.expr(l.Object, sc)
		c.expr(l.Key, sc)
		if !b.key {
			return
		}
		if name, ok := l.Key.(*ast.StringExpr); ok {
			c.learn(c.keyFields, name.Value)
		} else if id, ok := l.Object.(*ast.IdentExpr); ok {
			c.learn(c.keyTables, id.Value)
		}
	}
}

func (c *luaChecker) isKeysTable(e ast.Expr, sc *scope) bool {
	id, ok := e.(*ast.IdentExpr)
	if !ok {
		return false
	}
	if b := sc.lookup(id.Value); b != nil {
		return b.keysTable
	}
	return id.Value == "KEYS"
}

func (c *luaChecker) isKey(e ast.Expr, sc *scope) bool {
	switch x := e.(type) {
	case *ast.AttrGetExpr:
		if c.isKeysTable(x.Object, sc) {
			return true
		}
		if name, ok := x.Key.(*ast.StringExpr); ok {
			return c.keyFields[name.Value]
		}
		if id, ok := x.Object.(*ast.IdentExpr); ok {
			return c.keyTables[id.Value]
		}
	case *ast.IdentExpr:
		if b := sc.lookup(x.Value); b != nil {
			return b.key
		}
	}
	return false
}

func (c *luaChecker) isBuilt(e ast.Expr, sc *scope) bool {
	switch x := e.(type) {
	case *ast.StringConcatOpExpr:
		return true
	case *ast.LogicalOpExpr:
		return c.isBuilt(x.Lhs, sc) || c.isBuilt(x.Rhs, sc)
	case *ast.IdentExpr:
		if b := sc.lookup(x.Value); b != nil {
			return b.built
		}
	case *ast.FuncCallExpr:
		switch callName(x) {
		case "string.format", "string.gsub", "string.rep", "string.sub", "table.concat":
			return true
		}
	}
	return false
}

// callName is "a.b" or "a" for a call of a.b(...) or a(...), else "".
func callName(call *ast.FuncCallExpr) string {
	switch f := call.Func.(type) {
	case *ast.IdentExpr:
		return f.Value
	case *ast.AttrGetExpr:
		obj, ok1 := f.Object.(*ast.IdentExpr)
		key, ok2 := f.Key.(*ast.StringExpr)
		if ok1 && ok2 {
			return obj.Value + "." + key.Value
		}
	}
	return ""
}

func (c *luaChecker) expr(e ast.Expr, sc *scope) {
	switch x := e.(type) {
	case *ast.StringConcatOpExpr:
		if c.isKey(x.Lhs, sc) || c.isKey(x.Rhs, sc) {
			c.problem(x, "'..' on a key: a key name built inside the script (pass it in KEYS)")
		}
		c.expr(x.Lhs, sc)
		c.expr(x.Rhs, sc)
	case *ast.FuncCallExpr:
		c.call(x, sc)
	case *ast.AttrGetExpr:
		c.expr(x.Object, sc)
		c.expr(x.Key, sc)
	case *ast.TableExpr:
		for _, f := range x.Fields {
			if f.Key != nil {
				c.expr(f.Key, sc)
			}
			c.expr(f.Value, sc)
			if name, ok := f.Key.(*ast.StringExpr); ok && c.isKey(f.Value, sc) {
				c.learn(c.keyFields, name.Value)
			}
		}
	case *ast.LogicalOpExpr:
		c.expr(x.Lhs, sc)
		c.expr(x.Rhs, sc)
	case *ast.RelationalOpExpr:
		c.expr(x.Lhs, sc)
		c.expr(x.Rhs, sc)
	case *ast.ArithmeticOpExpr:
		c.expr(x.Lhs, sc)
		c.expr(x.Rhs, sc)
	case *ast.UnaryMinusOpExpr:
		c.expr(x.Expr, sc)
	case *ast.UnaryNotOpExpr:
		c.expr(x.Expr, sc)
	case *ast.UnaryLenOpExpr:
		c.expr(x.Expr, sc)
	case *ast.FunctionExpr:
		inner := &scope{parent: sc, vars: map[string]*binding{}}
		for i, p := range x.ParList.Names {
			b := &binding{}
			if known := c.keyParams[x][i]; known != nil {
				*b = *known
			}
			inner.vars[p] = b
		}
		c.block(x.Stmts, inner)
	}
}

func (c *luaChecker) call(x *ast.FuncCallExpr, sc *scope) {
	c.expr(x.Func, sc)
	if x.Receiver != nil {
		c.expr(x.Receiver, sc)
	}
	for _, a := range x.Args {
		c.expr(a, sc)
	}
	name := callName(x)
	if fn := c.funcs[name]; fn != nil {
		// What the arguments are, the parameters are (in every call).
		for i, a := range x.Args {
			key, table := c.isKey(a, sc), c.isKeysTable(a, sc)
			if !key && !table {
				continue
			}
			if c.keyParams[fn] == nil {
				c.keyParams[fn] = map[int]*binding{}
			}
			b := c.keyParams[fn][i]
			if b == nil {
				b = &binding{}
				c.keyParams[fn][i] = b
			}
			if (key && !b.key) || (table && !b.keysTable) {
				b.key, b.keysTable = b.key || key, b.keysTable || table
				c.changed = true
			}
		}
	}
	if name != "redis.call" && name != "redis.pcall" || len(x.Args) < 2 {
		return
	}
	cmd, literal := x.Args[0].(*ast.StringExpr)
	label := "<dynamic>"
	positions := []int{1}
	if literal {
		label = "'" + strings.ToUpper(cmd.Value) + "'"
		if p, ok := keyPositions[strings.ToUpper(cmd.Value)]; ok {
			positions = p
		}
		if nk, ok := numkeysAt[strings.ToUpper(cmd.Value)]; ok {
			positions = nil
			if nk.dest {
				positions = append(positions, nk.pos-1)
			}
			n := -1
			if nk.pos < len(x.Args) {
				if num, ok := x.Args[nk.pos].(*ast.NumberExpr); ok {
					_, _ = fmt.Sscan(num.Value, &n)
				}
			}
			if n < 0 {
				positions = []int{-1}
			} else {
				for i := 1; i <= n; i++ {
					positions = append(positions, nk.pos+i)
				}
			}
		}
	}
	args := x.Args[1:]
	check := func(i int) bool {
		if i < 1 || i > len(args) {
			return false
		}
		a := args[i-1]
		if inner, ok := a.(*ast.FuncCallExpr); ok && (callName(inner) == "unpack" || callName(inner) == "table.unpack") {
			return false // the rest is unknown
		}
		if c.isBuilt(a, sc) {
			c.problem(a, "key argument of %s(%s) is built inside the script (pass it in KEYS)", name, label)
		}
		return true
	}
	for _, p := range positions {
		switch p {
		case 0:
		case -1:
			for i := 1; check(i); i++ {
			}
		default:
			check(p)
		}
	}
}

// luaSources returns every .lua file of the module under root, skipping
// .git, vendor, node_modules and testdata.
func luaSources(t *testing.T, root string) []string {
	t.Helper()
	var files []string
	require.NoError(t, filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			switch d.Name() {
			case ".git", "vendor", "node_modules", "testdata":
				return filepath.SkipDir
			}
			return nil
		}
		if strings.HasSuffix(path, ".lua") {
			files = append(files, path)
		}
		return nil
	}))
	return files
}
