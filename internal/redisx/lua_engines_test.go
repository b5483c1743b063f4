package redisx_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	lua "github.com/yuin/gopher-lua"
	"github.com/yuin/gopher-lua/parse"

	"github.com/chatd/chatd/internal/redistest"
)

// engines are the two Redis engines every script must run on: a real
// redis-server (Lua 5.1 with struct, cjson, cmsgpack, bit) and the
// embedded miniredis of `go run ./cmd/chatd` (gopher-lua with cjson only).
var engines = []struct {
	name string
	get  func(testing.TB) *redistest.Redis
}{
	{"server", redistest.Real},
	{"embedded", redistest.InProcess},
}

// globalsProbe lists what a script may use on the engine it runs on:
// every global's name and every field of a global table ("math.frexp").
var globalsProbe = redis.NewScript(`
local out = {}
for k, v in pairs(_G) do
  if type(k) == 'string' then
    out[#out + 1] = k
    if type(v) == 'table' and k ~= '_G' then
      for f in pairs(v) do
        if type(f) == 'string' then
          out[#out + 1] = k .. '.' .. f
        end
      end
    end
  end
end
return out
`)

// TestLuaScriptsRunOnBothEngines checks every .lua file of the module
// against both engines: each loads (SCRIPT LOAD compiles it), and every
// global it reads and every field of a global library it reads
// (struct.pack, math.frexp, bit.band) exists on both. A script using
// something only one engine has fails here rather than in production on
// the other: queue_pick.lua called struct.pack, which the embedded Redis
// lacks, so no match ever formed on `go run ./cmd/chatd`. The packages'
// own tests run their scripts on both engines where it matters (see
// matchmaking's TestEveryScriptRunsOnBothEngines).
func TestLuaScriptsRunOnBothEngines(t *testing.T) {
	root := moduleRoot(t)
	var files []string
	for _, path := range luaSources(t, root) {
		if filepath.Base(filepath.Dir(path)) == "lua" {
			files = append(files, path)
		}
	}
	sort.Strings(files)
	require.GreaterOrEqual(t, len(files), 40, "the module's Lua scripts under %s", root)

	have := map[string]map[string]bool{}
	for _, e := range engines {
		r := e.get(t)
		names, err := globalsProbe.Run(context.Background(), r.Client, nil).StringSlice()
		require.NoError(t, err, "%s: list globals", e.name)
		have[e.name] = map[string]bool{}
		for _, n := range names {
			have[e.name][n] = true
		}
		// Each script compiles on the engine.
		for _, p := range files {
			src := readSrc(t, p)
			require.NoError(t, r.Client.ScriptLoad(context.Background(), src).Err(), "%s: SCRIPT LOAD %s", e.name, rel(root, p))
		}
	}
	require.True(t, have["server"]["struct.pack"] && !have["embedded"]["struct"],
		"the probe sees the server's struct library and the embedded engine's lack of it")

	// Helpers that a package prepends to its scripts in Go (rooms'
	// *_lib.lua, lock's fence_check.lua): top-level local functions of
	// another file, globals to the script read alone.
	helpers := map[string]bool{}
	for _, p := range files {
		for _, m := range topLocalFunc.FindAllStringSubmatch(readSrc(t, p), -1) {
			helpers[m[1]] = true
		}
	}
	for _, p := range files {
		uses, err := luaGlobalUses(readSrc(t, p), rel(root, p))
		require.NoError(t, err)
		for _, u := range uses {
			if helpers[u.name] && !have["server"][u.name] && !have["embedded"][u.name] {
				continue
			}
			for _, e := range engines {
				if !have[e.name][u.name] {
					t.Errorf("%s:%d uses %s, which the %s engine lacks", rel(root, p), u.line, u.name, e.name)
				}
			}
		}
	}
	t.Logf("%d Lua files checked on %d engines", len(files), len(engines))
}

// TestLuaGlobalUsesCatchesMissingLibraries checks the checker: it must
// see a library call (struct.pack), a method-less field read, and a bare
// global, and must not report locals, KEYS or ARGV fields.
func TestLuaGlobalUsesCatchesMissingLibraries(t *testing.T) {
	uses, err := luaGlobalUses(`
local struct2 = {}
local function f(x) return struct.pack('>d', x) end
local b = bit.band(1, 3)
local s = string.format('%d', #KEYS) .. ARGV[1]
local t = math.frexp(2)
return {f(1), nosuch, struct2.x, cjson.encode({b, s, t})}
`, "x.lua")
	require.NoError(t, err)
	var names []string
	for _, u := range uses {
		names = append(names, u.name)
	}
	assert.ElementsMatch(t, []string{"struct", "struct.pack", "bit", "bit.band", "string", "string.format", "KEYS", "ARGV",
		"math", "math.frexp", "nosuch", "cjson", "cjson.encode"}, names, "struct2 is a local")
}

var topLocalFunc = regexp.MustCompile(`(?m)^local function ([A-Za-z_][A-Za-z0-9_]*)`)

func readSrc(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	return string(b)
}

func rel(root, p string) string {
	r, err := filepath.Rel(root, p)
	if err != nil {
		return p
	}
	return r
}

// globalUse is a global a script reads, or a field of one ("math.frexp").
type globalUse struct {
	name string
	line int
}

// luaGlobalUses compiles src with gopher-lua and reads its bytecode: every
// GETGLOBAL is a global read, and a GETTABLEKS or SELF on the register a
// GETGLOBAL just filled is a field of that global (math.frexp, or the
// string.format of s:format). Locals and upvalues are never globals in
// the bytecode, whatever their names. It reads gopher-lua 1.1's
// instruction layout (opcode in the top 6 bits, A in the next 8, C in the
// 9 above B's low 9, Bx the low 18);
// TestLuaGlobalUsesCatchesMissingLibraries fails if that changes.
func luaGlobalUses(src, name string) ([]globalUse, error) {
	chunk, err := parse.Parse(strings.NewReader(src), name)
	if err != nil {
		return nil, fmt.Errorf("parse %s: %w", name, err)
	}
	proto, err := lua.Compile(chunk, name)
	if err != nil {
		return nil, fmt.Errorf("compile %s: %w", name, err)
	}
	seen := map[string]bool{}
	var out []globalUse
	var walk func(p *lua.FunctionProto)
	walk = func(p *lua.FunctionProto) {
		reg := map[int]string{} // register -> global it holds
		for i, inst := range p.Code {
			op, a := int(inst>>26), int(inst>>18)&0xff
			b, c, bx := int(inst&0x1ff), int(inst>>9)&0x1ff, int(inst&0x3ffff)
			line := 0
			if i < len(p.DbgSourcePositions) {
				line = p.DbgSourcePositions[i]
			}
			use := func(n string) {
				if !seen[n] {
					seen[n] = true
					out = append(out, globalUse{n, line})
				}
			}
			switch op {
			case lua.OP_GETGLOBAL:
				g := p.Constants[bx].String()
				use(g)
				reg[a] = g
				continue
			case lua.OP_GETTABLEKS, lua.OP_SELF:
				if g, ok := reg[b]; ok && c&0x100 != 0 {
					use(g + "." + p.Constants[c&0xff].String())
				}
			}
			delete(reg, a)
			if op == lua.OP_SELF {
				delete(reg, a+1)
			}
		}
		for _, f := range p.FunctionPrototypes {
			walk(f)
		}
	}
	walk(proto)
	return out, nil
}
