package deploy

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/chatd/chatd/protocol"
	"github.com/chatd/chatd/settings"
)

// The documents of docs/ are checked against each other and against the
// source: docs/openapi.json must name exactly the routes web registers,
// every $ref in it and in docs/ws-frames.schema.json must resolve, the
// shapes both files share must be the same, and docs/PROTOCOL.md must list
// every error code the server sends and every live setting as defined.

var docsDir = filepath.Join("..", "docs")

// readJSONDoc decodes a JSON document of docs/ into generic values.
func readJSONDoc(t *testing.T, name string) map[string]any {
	t.Helper()
	p, err := os.ReadFile(filepath.Join(docsDir, name))
	require.NoError(t, err)
	var doc map[string]any
	require.NoError(t, json.Unmarshal(p, &doc), "%s is not valid JSON", name)
	return doc
}

// resolvePointer follows a JSON pointer ("#/components/schemas/Room") in doc.
func resolvePointer(doc any, ref string) (any, error) {
	if !strings.HasPrefix(ref, "#") {
		return nil, fmt.Errorf("%q is not a local reference (the documents must stand alone)", ref)
	}
	cur := doc
	if ref == "#" {
		return cur, nil
	}
	if !strings.HasPrefix(ref, "#/") {
		return nil, fmt.Errorf("%q is not a JSON pointer", ref)
	}
	for _, tok := range strings.Split(ref[2:], "/") {
		tok = strings.ReplaceAll(strings.ReplaceAll(tok, "~1", "/"), "~0", "~")
		switch v := cur.(type) {
		case map[string]any:
			next, ok := v[tok]
			if !ok {
				return nil, fmt.Errorf("%q: no %q", ref, tok)
			}
			cur = next
		case []any:
			i, err := strconv.Atoi(tok)
			if err != nil || i < 0 || i >= len(v) {
				return nil, fmt.Errorf("%q: no index %q", ref, tok)
			}
			cur = v[i]
		default:
			return nil, fmt.Errorf("%q: %q is inside a scalar", ref, tok)
		}
	}
	return cur, nil
}

// refs returns every "$ref" value in v, with where it was found.
func refs(v any, at string, out map[string]string) {
	switch v := v.(type) {
	case map[string]any:
		for k, x := range v {
			if s, ok := x.(string); ok && k == "$ref" {
				out[at+"/$ref"] = s
				continue
			}
			refs(x, at+"/"+k, out)
		}
	case []any:
		for i, x := range v {
			refs(x, at+"/"+strconv.Itoa(i), out)
		}
	}
}

func TestDocsReferencesResolve(t *testing.T) {
	for _, name := range []string{"openapi.json", "ws-frames.schema.json"} {
		t.Run(name, func(t *testing.T) {
			doc := readJSONDoc(t, name)
			found := map[string]string{}
			refs(doc, "#", found)
			require.NotEmpty(t, found, "no $ref at all: the test would prove nothing")
			for at, ref := range found {
				_, err := resolvePointer(doc, ref)
				assert.NoError(t, err, "at %s", at)
			}
		})
	}
	t.Run("openapi.json is OpenAPI 3.1 with the error shape and both token schemes", func(t *testing.T) {
		doc := readJSONDoc(t, "openapi.json")
		assert.Equal(t, "3.1.0", doc["openapi"])
		e, err := resolvePointer(doc, "#/components/schemas/Error/properties/error/required")
		require.NoError(t, err)
		assert.ElementsMatch(t, []any{"code", "message"}, e)
		for _, scheme := range []string{"userToken", "adminToken"} {
			s, err := resolvePointer(doc, "#/components/securitySchemes/"+scheme)
			require.NoError(t, err)
			assert.Equal(t, "bearer", s.(map[string]any)["scheme"], scheme)
		}
	})
	t.Run("ws-frames.schema.json is draft 2020-12 and every frame names its type", func(t *testing.T) {
		doc := readJSONDoc(t, "ws-frames.schema.json")
		assert.Equal(t, "https://json-schema.org/draft/2020-12/schema", doc["$schema"])
		defs := doc["$defs"].(map[string]any)
		for _, group := range []string{"ClientFrame", "ServerEvent"} {
			one := defs[group].(map[string]any)["oneOf"].([]any)
			require.NotEmpty(t, one, group)
			seen := map[string]bool{}
			for _, r := range one {
				frame, err := resolvePointer(doc, r.(map[string]any)["$ref"].(string))
				require.NoError(t, err)
				f := frame.(map[string]any)
				typ, _ := f["properties"].(map[string]any)["type"].(map[string]any)["const"].(string)
				assert.NotEmpty(t, typ, "%s: a frame without a const type", r)
				assert.False(t, seen[typ], "%s: type %q twice", group, typ)
				seen[typ] = true
				assert.Contains(t, f["required"], "type", "%s", r)
			}
		}
	})
}

func TestDocsSharedShapesAgree(t *testing.T) {
	api := readJSONDoc(t, "openapi.json")
	ws := readJSONDoc(t, "ws-frames.schema.json")
	// The ws schema refers to its own $defs where openapi.json refers to
	// components/schemas: rewrite before comparing.
	norm := func(v any) any {
		p, err := json.Marshal(v)
		require.NoError(t, err)
		s := strings.ReplaceAll(string(p), "#/components/schemas/", "#/$defs/")
		var out any
		require.NoError(t, json.Unmarshal([]byte(s), &out))
		return out
	}
	for _, name := range []string{"Room", "Message", "RoomID", "MessageID", "ErrorCode", "SettingValue"} {
		a, err := resolvePointer(api, "#/components/schemas/"+name)
		require.NoError(t, err)
		w, err := resolvePointer(ws, "#/$defs/"+name)
		require.NoError(t, err)
		assert.True(t, reflect.DeepEqual(norm(a), norm(w)), "%s differs between openapi.json and ws-frames.schema.json", name)
	}
}

// errcodeRe is a Code constant of package errcode: `Name Code = "code"`.
var errcodeRe = regexp.MustCompile(`(?m)^\s*(\w+)\s+Code\s*=\s*"([a-z_]+)"`)

// errorCodes returns the codes package errcode defines, by constant name:
// every code a client can see is defined there, once.
func errorCodes(t *testing.T) map[string]string {
	t.Helper()
	p, err := os.ReadFile(filepath.Join("..", "errcode", "errcode.go"))
	require.NoError(t, err)
	out := map[string]string{}
	for _, m := range errcodeRe.FindAllStringSubmatch(string(p), -1) {
		out[m[1]] = m[2]
	}
	require.Greater(t, len(out), 30, "found only %v: has errcode's syntax changed?", out)
	return out
}

// commentRe is a whole-line Go or nginx comment (the error shape is
// quoted in comments with a placeholder code).
var commentRe = regexp.MustCompile(`(?m)^\s*(//|#).*$`)

// TestDocsErrorCodes: the codes of package errcode, the codes the bundled
// nginx sends itself, openapi.json's ErrorCode enum and PROTOCOL.md's
// error table are the same set.
func TestDocsErrorCodes(t *testing.T) {
	sent := map[string]string{}
	for name, code := range errorCodes(t) {
		sent[code] = "errcode." + name
	}
	p, err := os.ReadFile("nginx.conf")
	require.NoError(t, err)
	for _, m := range regexp.MustCompile(`"code":\s*"([a-z_]+)"`).FindAllStringSubmatch(commentRe.ReplaceAllString(string(p), ""), -1) {
		sent[m[1]] = "nginx.conf"
	}

	api := readJSONDoc(t, "openapi.json")
	e, err := resolvePointer(api, "#/components/schemas/ErrorCode/enum")
	require.NoError(t, err)
	enum := map[string]bool{}
	for _, c := range e.([]any) {
		enum[c.(string)] = true
	}
	proto, err := os.ReadFile(filepath.Join(docsDir, "PROTOCOL.md"))
	require.NoError(t, err)
	table := map[string]bool{}
	for _, m := range regexp.MustCompile("(?m)^\\| `([a-z_]+)` \\| (\\d{3})").FindAllStringSubmatch(string(proto), -1) {
		table[m[1]] = true
	}
	for code, where := range sent {
		assert.True(t, enum[code], "%s defines %q, which openapi.json's ErrorCode does not list", where, code)
		assert.True(t, table[code], "%s defines %q, which PROTOCOL.md's error table does not list", where, code)
	}
	for code := range enum {
		assert.True(t, table[code], "openapi.json lists %q, PROTOCOL.md's error table does not", code)
		_, isSent := sent[code]
		assert.True(t, isSent, "openapi.json lists %q, which neither errcode nor nginx.conf defines: stale?", code)
	}
}

// httpStatus maps the net/http constants the status table uses to their
// numbers; a new one fails the test until it is added here.
var httpStatus = map[string]int{
	"StatusBadRequest": 400, "StatusUnauthorized": 401, "StatusForbidden": 403, "StatusNotFound": 404,
	"StatusMethodNotAllowed": 405, "StatusRequestTimeout": 408, "StatusConflict": 409,
	"StatusRequestEntityTooLarge": 413, "StatusUpgradeRequired": 426, "StatusTooManyRequests": 429,
	"StatusRequestHeaderFieldsTooLarge": 431, "StatusInternalServerError": 500, "StatusBadGateway": 502,
	"StatusServiceUnavailable": 503, "StatusGatewayTimeout": 504,
}

// TestDocsErrorStatuses: every code has a row in web's one status table
// (statusOf), and PROTOCOL.md's error table names that status; the few
// answers web gives with a status of their own (426, 431) are documented
// too.
func TestDocsErrorStatuses(t *testing.T) {
	proto, err := os.ReadFile(filepath.Join(docsDir, "PROTOCOL.md"))
	require.NoError(t, err)
	documented := map[string]string{}
	for _, m := range regexp.MustCompile("(?m)^\\| `([a-z_]+)` \\| ([0-9, ]+) \\|").FindAllStringSubmatch(string(proto), -1) {
		documented[m[1]] = m[2]
	}
	codes := errorCodes(t)
	check := func(where, code, constant string) {
		status, ok := httpStatus[constant]
		if !assert.True(t, ok, "%s: http.%s is not in httpStatus", where, constant) {
			return
		}
		cell, ok := documented[code]
		if !assert.True(t, ok, "%s gives %q, which PROTOCOL.md's error table does not list", where, code) {
			return
		}
		assert.Contains(t, strings.Split(strings.ReplaceAll(cell, " ", ""), ","), strconv.Itoa(status),
			"%s gives %q the status %d; PROTOCOL.md's error table says %s", where, code, status, cell)
	}
	src := sourceOf(t, "web")
	rows := regexp.MustCompile(`errcode\.(\w+):\s*http\.(\w+),`).FindAllStringSubmatch(src, -1)
	inTable := map[string]bool{}
	for _, m := range rows {
		code, ok := codes[m[1]]
		if !assert.True(t, ok, "web's status table names errcode.%s, which errcode does not define", m[1]) {
			continue
		}
		inTable[code] = true
		check("web's status table", code, m[2])
	}
	for name, code := range codes {
		assert.True(t, inTable[code], "errcode.%s (%q) has no status in web's status table", name, code)
	}
	own := regexp.MustCompile(`Status:\s*http\.(\w+),\s*Code:\s*string\(errcode\.(\w+)\)`).FindAllStringSubmatch(src, -1)
	for _, m := range own {
		check("web", codes[m[2]], m[1])
	}
	own2 := regexp.MustCompile(`e\(http\.(\w+),\s*errcode\.(\w+),`).FindAllStringSubmatch(src, -1)
	for _, m := range own2 {
		check("web's Fiber errors", codes[m[2]], m[1])
	}
	require.NotEmpty(t, own, "the 426 of GET /ws without an upgrade is not found: has the syntax changed?")
	require.GreaterOrEqual(t, len(own2), 3, "Fiber's own errors are not found: has the syntax changed?")
}

// sourceOf reads the non-test Go files of dir with whole-line comments removed.
func sourceOf(t *testing.T, dir string) string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join("..", dir, "*.go"))
	require.NoError(t, err)
	var b strings.Builder
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		p, err := os.ReadFile(f)
		require.NoError(t, err)
		b.WriteString(commentRe.ReplaceAllString(string(p), ""))
		b.WriteByte('\n')
	}
	return b.String()
}

// schemaFrameTypes returns the const type of every frame of a oneOf group
// of ws-frames.schema.json.
func schemaFrameTypes(t *testing.T, ws map[string]any, group string) map[string]bool {
	t.Helper()
	out := map[string]bool{}
	for _, r := range ws["$defs"].(map[string]any)[group].(map[string]any)["oneOf"].([]any) {
		f, err := resolvePointer(ws, r.(map[string]any)["$ref"].(string))
		require.NoError(t, err)
		out[f.(map[string]any)["properties"].(map[string]any)["type"].(map[string]any)["const"].(string)] = true
	}
	return out
}

// wordBreak finds where a constant's name starts a word after an acronym
// (TypeDMOpen is "dm_open": DM, Open).
var wordBreak = regexp.MustCompile(`([A-Z])([A-Z][a-z])`)

// TestDocsFramesAndCloseCodes: every frame type the server handles or
// sends is in ws-frames.schema.json and PROTOCOL.md, and every close code
// realtime defines is in the schema's CloseCode and PROTOCOL.md's table.
func TestDocsFramesAndCloseCodes(t *testing.T) {
	ws := readJSONDoc(t, "ws-frames.schema.json")
	proto, err := os.ReadFile(filepath.Join(docsDir, "PROTOCOL.md"))
	require.NoError(t, err)

	// client frames: the cases of web's handleFrame, and its f.Type ==
	// protocol.TypeSay, by the protocol's constants (TypeDequeue is
	// "dequeue": every frame type is one word)
	client := schemaFrameTypes(t, ws, "ClientFrame")
	handled := regexp.MustCompile(`(?m)^\s*case protocol\.Type(\w+):|\bf\.Type == protocol\.Type(\w+)`).FindAllStringSubmatch(sourceOf(t, "web"), -1)
	require.Greater(t, len(handled), 5, "found only %v: has handleFrame's syntax changed?", handled)
	frameTypes := map[string]bool{}
	for _, f := range protocol.ClientFrames {
		frameTypes[f.FrameType()] = true
	}
	seen := map[string]bool{}
	for _, m := range handled {
		typ := strings.ToLower(wordBreak.ReplaceAllString(m[1]+m[2], "${1}_${2}"))
		require.True(t, frameTypes[typ], "web handles protocol.Type%s, which is no client frame of the protocol's", m[1]+m[2])
		seen[typ] = true
		assert.True(t, client[typ], "web handles %q frames, which ws-frames.schema.json's ClientFrame lacks", typ)
		assert.Contains(t, string(proto), "{\"type\": \""+typ+"\"", "PROTOCOL.md does not show a %q frame", typ)
	}
	for typ := range client {
		assert.True(t, seen[typ], "ClientFrame has %q, which web does not handle", typ)
	}

	// server events: "type": "x" in the source, the Event constants of rooms
	// and matchmaking (matched, ticket_expired), and the event stream's own
	// ending events (StreamEvent)
	server := schemaFrameTypes(t, ws, "ServerEvent")
	for _, r := range ws["$defs"].(map[string]any)["StreamEvent"].(map[string]any)["oneOf"].([]any) {
		ref := r.(map[string]any)["$ref"].(string)
		if ref == "#/$defs/ServerEvent" {
			continue
		}
		f, err := resolvePointer(ws, ref)
		require.NoError(t, err)
		server[f.(map[string]any)["properties"].(map[string]any)["type"].(map[string]any)["const"].(string)] = true
	}
	// what the server sends: each protocol event type its code builds
	// (protocol.Hello{…}) in the core, its use cases (realtime/*) and web,
	// and the Event constants of rooms and matchmaking, whose events are
	// encoded once and forwarded as they are
	src := sourceOf(t, "realtime") + sourceOf(t, "realtime/*") + sourceOf(t, "rooms") + sourceOf(t, "web") + sourceOf(t, "matchmaking") +
		sourceOf(t, "direct")
	sent := map[string]bool{}
	for _, ev := range append(protocol.ServerEvents, protocol.StreamEvents...) {
		if regexp.MustCompile(`\bprotocol\.` + reflect.TypeOf(ev).Name() + `\{`).MatchString(src) {
			sent[ev.EventType()] = true
		}
	}
	for _, m := range regexp.MustCompile(`\bEvent\w+\s*=\s*"([a-z_]+)"`).FindAllStringSubmatch(src, -1) {
		sent[m[1]] = true
	}
	require.Greater(t, len(sent), 8, "found only %v: has the event syntax changed?", sent)
	for typ := range sent {
		assert.True(t, server[typ], "the server sends %q events, which ws-frames.schema.json's ServerEvent lacks", typ)
		assert.Contains(t, string(proto), "{\"type\": \""+typ+"\"", "PROTOCOL.md does not show a %q event", typ)
	}
	for typ := range server {
		assert.True(t, sent[typ], "ServerEvent has %q, which nothing sends", typ)
	}

	// close codes: realtime's Close constants (CloseAbnormal is no close
	// frame; CloseGoingAway is declared and never sent — once it is, it
	// needs documenting)
	cc, err := resolvePointer(ws, "#/$defs/CloseCode/enum")
	require.NoError(t, err)
	enum := map[int]bool{}
	for _, c := range cc.([]any) {
		enum[int(c.(float64))] = true
	}
	rt := sourceOf(t, "realtime")
	consts := regexp.MustCompile(`\b(Close\w+)\s*=\s*(\d+)`).FindAllStringSubmatch(rt, -1)
	require.Greater(t, len(consts), 8, "found only %v", consts)
	for _, m := range consts {
		code, _ := strconv.Atoi(m[2])
		if code == 0 {
			continue
		}
		if m[1] == "CloseGoingAway" && strings.Count(rt+sourceOf(t, "web"), "CloseGoingAway") == 1 {
			continue
		}
		assert.True(t, enum[code], "realtime.%s = %d is not in ws-frames.schema.json's CloseCode", m[1], code)
		assert.Regexp(t, "(?m)^\\| "+m[2]+" \\| ", string(proto), "PROTOCOL.md's close code table has no row for %d (%s)", code, m[1])
	}
}

func TestDocsSettingsTable(t *testing.T) {
	proto, err := os.ReadFile(filepath.Join(docsDir, "PROTOCOL.md"))
	require.NoError(t, err)
	rows := map[string]string{}
	for _, line := range strings.Split(string(proto), "\n") {
		if m := regexp.MustCompile("^\\| `([a-z_.]+)` \\| (int|number|string) \\|").FindStringSubmatch(line); m != nil {
			rows[m[1]] = line
		}
	}
	defs := settings.Defs()
	require.NotEmpty(t, defs)
	for _, d := range defs {
		row, ok := rows[d.Key]
		if !assert.True(t, ok, "PROTOCOL.md's settings table has no row for %s", d.Key) {
			continue
		}
		cells := strings.Split(row, "|")
		require.GreaterOrEqual(t, len(cells), 6, row)
		assert.Equal(t, d.Type, strings.TrimSpace(cells[2]), "type of %s", d.Key)
		var def string
		switch v := d.Default.(type) {
		case string:
			def = "`" + strconv.Quote(v) + "`"
		case int:
			def = strconv.Itoa(v)
		case float64:
			def = strconv.FormatFloat(v, 'f', -1, 64)
		}
		assert.Equal(t, def, strings.TrimSpace(cells[4]), "default of %s", d.Key)
		rng := strings.TrimSpace(cells[3])
		if len(d.Enum) > 0 {
			for _, v := range d.Enum {
				assert.Contains(t, rng, "`"+v+"`", "range of %s must list its values", d.Key)
			}
			continue
		}
		assert.Contains(t, rng, strconv.FormatFloat(d.Max, 'f', -1, 64), "range of %s", d.Key)
		if !d.MinExclusive {
			assert.True(t, strings.HasPrefix(rng, strconv.FormatFloat(d.Min, 'f', -1, 64)), "range of %s: %q", d.Key, rng)
		}
	}
	assert.Len(t, rows, len(defs), "PROTOCOL.md lists settings the registry does not have")
}

// TestDocsLinks: the repository's documents link only to files it holds;
// the contract is docs/PROTOCOL.md, not a file outside the repository.
func TestDocsLinks(t *testing.T) {
	link := regexp.MustCompile(`\]\(([^)#\s]+)(#[^)]*)?\)`)
	root, err := filepath.Abs("..")
	require.NoError(t, err)
	var docs []string
	err = filepath.WalkDir(root, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && slices.Contains([]string{".git", ".run", "node_modules", "testdata"}, d.Name()) {
			return filepath.SkipDir
		}
		if !d.IsDir() && strings.HasSuffix(path, ".md") {
			docs = append(docs, path)
		}
		return nil
	})
	require.NoError(t, err)
	require.NotEmpty(t, docs)
	for _, doc := range docs {
		p, err := os.ReadFile(doc)
		require.NoError(t, err)
		for _, m := range link.FindAllStringSubmatch(string(p), -1) {
			target := m[1]
			if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
				continue
			}
			path := filepath.Join(filepath.Dir(doc), target)
			rel, err := filepath.Rel(root, path)
			require.NoError(t, err)
			if strings.HasPrefix(rel, "..") {
				t.Errorf("%s links to %s, outside the repository: a dead link on any clone", doc, target)
				continue
			}
			_, err = os.Stat(path)
			assert.NoError(t, err, "%s links to %s, which is not in the repository", doc, target)
		}
	}
	readme, err := os.ReadFile(filepath.Join("..", "README.md"))
	require.NoError(t, err)
	assert.True(t, strings.Contains(string(readme), "](docs/PROTOCOL.md)"), "README.md must link docs/PROTOCOL.md")
}
