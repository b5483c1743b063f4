package web

import (
	"net/http"
	"sort"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/chatd/chatd/internal/redistest"
)

// adminOps are the operations of docs/openapi.json that only an admin
// token opens (no user token), as "METHOD path" → whether the read-only
// token is listed.
func adminOps(t *testing.T) map[string]bool {
	s := mustSpec(t)
	out := map[string]bool{}
	for path, item := range s.doc.Paths.Map() {
		for method, op := range item.Operations() {
			if op.Security == nil {
				continue
			}
			admin, user, read := false, false, false
			for _, req := range *op.Security {
				_, a := req["adminToken"]
				_, u := req["userToken"]
				_, r := req["adminReadToken"]
				admin, user, read = admin || a, user || u, read || r
			}
			if admin && !user {
				out[method+" "+path] = read
			}
		}
	}
	return out
}

// TestAdminReadOnlyToken: the read-only admin token opens every admin read
// and no admin action — checked over every admin operation of
// docs/openapi.json, whose security must say the same — and its tries are
// in the audit log, beside the admin token's actions.
func TestAdminReadOnlyToken(t *testing.T) {
	t.Parallel()
	cl := newCluster(t, redistest.Real(t), 1)
	n := cl.nodes[0]
	ops := adminOps(t)
	require.Greater(t, len(ops), 15, "the admin operations were not read")

	// Admin reads the read-only token may not make: a user's private
	// conversation is read with the full admin token only, and audited
	// (docs/PROTOCOL.md, "Direct messages").
	fullAdminReads := map[string]bool{"GET /api/v1/admin/direct/{conversation}/messages": true}
	t.Run("the spec lists the read-only token on every admin GET and on no action", func(t *testing.T) {
		for op, read := range ops {
			assert.Equal(t, strings.HasPrefix(op, "GET ") && !fullAdminReads[op], read, "%s: adminReadToken listed = %v", op, read)
		}
	})

	fill := strings.NewReplacer("{room}", "ro-1", "{user}", "bob", "{key}", "motd", "{id}", "1700000000000-000001")
	var names []string
	for op := range ops {
		names = append(names, op)
	}
	sort.Strings(names)
	for _, op := range names {
		method, path, _ := strings.Cut(op, " ")
		path = fill.Replace(path)
		if path == "/api/v1/admin/users" {
			path += "?prefix=b"
		}
		if method == http.MethodGet && !fullAdminReads[op] {
			t.Run(op+" reads with the read-only token", func(t *testing.T) {
				var body map[string]any
				st := cl.doRaw(n, method, path, map[string]string{"Authorization": "Bearer " + testAdminRead}, nil, &body)
				assert.Contains(t, []int{200, 404}, st, "%v", body)
			})
			continue
		}
		t.Run(op+" is 403 to the read-only token", func(t *testing.T) {
			var body map[string]any
			st := cl.doRaw(n, method, path, map[string]string{"Authorization": "Bearer " + testAdminRead}, []byte(`{}`), &body)
			assertAPIError(t, 403, "forbidden", st, body)
			msg, _ := body["error"].(map[string]any)["message"].(string)
			assert.Contains(t, msg, "read-only admin token")
		})
	}

	t.Run("whoami names the role", func(t *testing.T) {
		var who struct{ Role, Node string }
		require.Equal(t, 200, cl.do(n, "GET", "/api/v1/admin/whoami", testAdminRead, nil, &who))
		assert.Equal(t, "read", who.Role)
		require.Equal(t, 200, cl.do(n, "GET", "/api/v1/admin/whoami", testAdmin, nil, &who))
		assert.Equal(t, "admin", who.Role)
		assert.Equal(t, "n1", who.Node)
	})

	t.Run("the audit log holds the admin's actions and the read-only token's tries, never a token", func(t *testing.T) {
		require.Equal(t, 200, cl.do(n, "POST", "/api/v1/moderation/mute", testAdmin, map[string]any{"user": "bob", "seconds": 60, "reason": "spam"}, nil))
		require.Equal(t, 200, cl.do(n, "DELETE", "/api/v1/moderation/mute/bob", testAdmin, nil, nil))
		var log struct {
			Entries []struct {
				Actor, Role, Action, Target, Detail, Node, At string
				Status                                        int
			}
		}
		require.Equal(t, 200, cl.do(n, "GET", "/api/v1/admin/audit?limit=1000", testAdminRead, nil, &log))
		require.GreaterOrEqual(t, len(log.Entries), 2)
		lift, mute := log.Entries[0], log.Entries[1]
		assert.Equal(t, "DELETE /moderation/mute/{user}", lift.Action)
		assert.Equal(t, "bob", lift.Target)
		assert.Equal(t, "admin", lift.Role)
		assert.Equal(t, 200, lift.Status)
		assert.Equal(t, "n1", lift.Node)
		assert.Regexp(t, `^admin [0-9a-f]{8}$`, lift.Actor)
		assert.Equal(t, "POST /moderation/mute", mute.Action)
		assert.Equal(t, "bob", mute.Target, "the user named in the body is the target")
		assert.Contains(t, mute.Detail, `"reason":"spam"`)
		reads := 0
		for _, e := range log.Entries {
			assert.NotContains(t, e.Actor+e.Detail, testAdmin)
			if e.Role == "read" {
				reads++
				assert.Equal(t, 403, e.Status, e.Action)
				assert.Regexp(t, `^read [0-9a-f]{8}$`, e.Actor)
			}
		}
		want := 0
		for _, read := range ops {
			if !read {
				want++
			}
		}
		assert.Equal(t, want, reads, "every action the read-only token tried is logged")
	})

	t.Run("a user token is 403 on admin reads, no token 401", func(t *testing.T) {
		tok := cl.session(n, "uma")
		var body map[string]any
		assertAPIError(t, 403, "forbidden", cl.doRaw(n, "GET", "/api/v1/admin/audit", map[string]string{"Authorization": "Bearer " + tok}, nil, &body), body)
		body = nil
		assertAPIError(t, 401, "bad_token", cl.doRaw(n, "GET", "/api/v1/admin/audit", nil, nil, &body), body)
	})

	t.Run("the read-only token may not be the admin token", func(t *testing.T) {
		_, err := New(UseCasesOf(n.node), Config{Node: "n9", AdminToken: "same", AdminReadToken: "same"})
		assert.ErrorContains(t, err, "AdminReadToken must differ")
	})
}
