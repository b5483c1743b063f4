package protocol_test

import (
	"encoding/json"
	"reflect"
	"sort"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/chatd/chatd/docs"
	"github.com/chatd/chatd/protocol"
)

// schemaDef is one object of docs/ws-frames.schema.json's $defs.
type schemaDef struct {
	Required   []string `json:"required"`
	Properties map[string]struct {
		Const string `json:"const"`
		Ref   string `json:"$ref"`
	} `json:"properties"`
	OneOf []struct {
		Ref string `json:"$ref"`
	} `json:"oneOf"`
}

func loadDefs(t *testing.T) map[string]schemaDef {
	t.Helper()
	var doc struct {
		Defs map[string]schemaDef `json:"$defs"`
	}
	require.NoError(t, json.Unmarshal(docs.WSFrames, &doc))
	return doc.Defs
}

func refName(ref string) string { return strings.TrimPrefix(ref, "#/$defs/") }

// members returns the object defs a oneOf group names, following nested
// groups (StreamEvent names ServerEvent).
func members(defs map[string]schemaDef, group string) []string {
	var out []string
	for _, r := range defs[group].OneOf {
		name := refName(r.Ref)
		if len(defs[name].OneOf) > 0 {
			continue // a group of its own, checked on its own
		}
		out = append(out, name)
	}
	sort.Strings(out)
	return out
}

// jsonFields returns a struct type's JSON field names and the required
// ones (those without omitempty).
func jsonFields(t reflect.Type) (all, required []string, types map[string]reflect.Type) {
	types = map[string]reflect.Type{}
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		if !f.IsExported() {
			continue
		}
		name, opts, _ := strings.Cut(f.Tag.Get("json"), ",")
		if name == "-" {
			continue
		}
		if name == "" {
			name = f.Name
		}
		all = append(all, name)
		types[name] = f.Type
		if !strings.Contains(opts, "omitempty") {
			required = append(required, name)
		}
	}
	sort.Strings(all)
	sort.Strings(required)
	return all, required, types
}

// checkObject compares Go type typ with the schema's def name: the same
// field names, the same required ones, and (recursively) the same for
// fields that are objects of the schema (Room, Message, Ticket).
func checkObject(t *testing.T, defs map[string]schemaDef, name string, typ reflect.Type) {
	t.Helper()
	def, ok := defs[name]
	if !assert.True(t, ok, "Go type %s has no $defs/%s in ws-frames.schema.json", typ.Name(), name) {
		return
	}
	all, required, types := jsonFields(typ)
	var props []string
	for p := range def.Properties {
		props = append(props, p)
	}
	sort.Strings(props)
	req := append([]string(nil), def.Required...)
	sort.Strings(req)
	assert.Equal(t, props, all, "%s: the schema's properties and the Go type's JSON fields differ", name)
	assert.Equal(t, req, required, "%s: the schema's required fields and the Go type's fields without omitempty differ", name)
	for p, prop := range def.Properties {
		sub := defs[refName(prop.Ref)]
		ft, ok := types[p]
		if prop.Ref == "" || len(sub.Properties) == 0 || !ok {
			continue
		}
		checkObject(t, defs, refName(prop.Ref), ft)
	}
}

// TestSchemaMatchesTypes checks docs/ws-frames.schema.json against the
// protocol package both ways: every frame and event of the schema is a Go
// type of the same name whose "type" is the schema's const, with the same
// fields and required fields; every Go frame and event type is in the
// schema.
func TestSchemaMatchesTypes(t *testing.T) {
	defs := loadDefs(t)
	for _, g := range []struct {
		group string
		types []reflect.Type
		name  func(i int) string
	}{
		{"ClientFrame", typesOf(protocol.ClientFrames), func(i int) string { return protocol.ClientFrames[i].FrameType() }},
		{"ServerEvent", typesOf(protocol.ServerEvents), func(i int) string { return protocol.ServerEvents[i].EventType() }},
		{"StreamEvent", typesOf(protocol.StreamEvents), func(i int) string { return protocol.StreamEvents[i].EventType() }},
	} {
		t.Run(g.group, func(t *testing.T) {
			var goNames []string
			for i, typ := range g.types {
				goNames = append(goNames, typ.Name())
				def := defs[typ.Name()]
				assert.Equal(t, g.name(i), def.Properties["type"].Const, "%s: the schema's type const differs from the Go type's", typ.Name())
				checkObject(t, defs, typ.Name(), typ)
			}
			sort.Strings(goNames)
			assert.Equal(t, members(defs, g.group), goNames, "the schema's %s and the protocol package's list differ", g.group)
		})
	}
}

// TestFrameHoldsEveryField: the server's decoded Frame has every field of
// every client frame, with the same Go type, so Decode reads them all.
func TestFrameHoldsEveryField(t *testing.T) {
	_, _, union := jsonFields(reflect.TypeFor[protocol.Frame]())
	for _, typ := range typesOf(protocol.ClientFrames) {
		_, _, fields := jsonFields(typ)
		for name, ft := range fields {
			assert.Equal(t, ft, union[name], "protocol.Frame lacks %s's field %q (or has another type)", typ.Name(), name)
		}
	}
}

func typesOf[T any](vs []T) []reflect.Type {
	out := make([]reflect.Type, len(vs))
	for i, v := range vs {
		out[i] = reflect.TypeOf(v)
	}
	return out
}

// reflectNew returns a pointer to a new zero value of ev's type.
func reflectNew(ev protocol.ServerEvent) any { return reflect.New(reflect.TypeOf(ev)).Interface() }

// TestTypeIsTheFirstField: DecodeEvent reads a decoded event's type from
// its first field.
func TestTypeIsTheFirstField(t *testing.T) {
	for _, typ := range append(typesOf(protocol.ServerEvents), typesOf(protocol.StreamEvents)...) {
		assert.Equal(t, "Type", typ.Field(0).Name, typ.Name())
	}
}
