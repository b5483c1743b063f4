package web

import (
	"fmt"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/chatd/chatd/internal/redistest"
)

// entries decodes {"entries": [...]}.
type entriesJSON struct {
	Entries []entryJSON `json:"entries"`
}

// expect sends a request and asserts its status and, for an error, its code.
func (c *cluster) expect(n *testNode, method, path, token string, body any, status int, code string) {
	c.t.Helper()
	got, p, _, err := c.call(n, method, path, token, body, nil)
	require.NoError(c.t, err)
	assert.Equal(c.t, status, got, "%s %s %v: %s", method, path, body, p)
	if code != "" {
		assert.Equal(c.t, code, errCode(p), "%s %s %v: %s", method, path, body, p)
	}
}

func TestLeaderboardsOverHTTP(t *testing.T) {
	t.Parallel()
	c := newCluster(t, redistest.Real(t), 3)
	n0, n1, n2 := c.nodes[0], c.nodes[1], c.nodes[2]
	tok := c.session(n0, "alice")
	post := func(n *testNode, board, player string, score any, mode string) entryJSON {
		t.Helper()
		body := map[string]any{"player": player, "score": score}
		if mode != "" {
			body["mode"] = mode
		}
		var out struct{ Entry entryJSON }
		require.Equal(t, 200, c.do(n, "POST", "/api/v1/leaderboards/"+board+"/scores", tok, body, &out))
		return out.Entry
	}
	get := func(n *testNode, path string) []entryJSON {
		t.Helper()
		var out entriesJSON
		require.Equal(t, 200, c.do(n, "GET", "/api/v1/leaderboards/"+path, tok, nil, &out))
		require.NotNil(t, out.Entries, "entries is always an array")
		return out.Entries
	}

	t.Run("modes best, incr and set combine as documented", func(t *testing.T) {
		assert.Equal(t, entryJSON{"p", 10, 0}, post(n0, "modes", "p", 10, ""), "best is the default")
		assert.Equal(t, entryJSON{"p", 10, 0}, post(n1, "modes", "p", 5, "best"), "a lower best keeps the higher")
		assert.Equal(t, entryJSON{"p", 12.5, 0}, post(n2, "modes", "p", 12.5, "best"))
		assert.Equal(t, entryJSON{"p", 15, 0}, post(n0, "modes", "p", 2.5, "incr"))
		assert.Equal(t, entryJSON{"q", 3, 1}, post(n1, "modes", "q", 3, "incr"), "incr on a new player starts from 0")
		assert.Equal(t, entryJSON{"p", 1, 1}, post(n2, "modes", "p", 1, "set"), "set replaces, even downwards")
		assert.Equal(t, entryJSON{"p", -2.125, 1}, post(n0, "modes", "p", -2.125, "set"))
	})

	// board "b": a 100, b 90, c 90 (c after b), d 80, e 70
	for _, ps := range []struct {
		p string
		s float64
	}{{"a", 100}, {"b", 90}, {"c", 90}, {"d", 80}, {"e", 70}} {
		post(c.nodes[len(ps.p)%3], "b", ps.p, ps.s, "")
	}

	t.Run("top is best first, equal scores first come first, limit bounds it", func(t *testing.T) {
		assert.Equal(t, []entryJSON{{"a", 100, 0}, {"b", 90, 1}, {"c", 90, 2}, {"d", 80, 3}, {"e", 70, 4}}, get(n1, "b/top"))
		assert.Equal(t, []entryJSON{{"a", 100, 0}, {"b", 90, 1}}, get(n2, "b/top?limit=2"))
		assert.Empty(t, get(n0, "empty/top"))
	})

	t.Run("a player's entry, or 404 unknown_player", func(t *testing.T) {
		var out struct{ Entry entryJSON }
		require.Equal(t, 200, c.do(n2, "GET", "/api/v1/leaderboards/b/players/c", tok, nil, &out))
		assert.Equal(t, entryJSON{"c", 90, 2}, out.Entry)
		c.expect(n0, "GET", "/api/v1/leaderboards/b/players/zed", tok, nil, 404, "unknown_player")
		c.expect(n0, "GET", "/api/v1/leaderboards/nothing/players/a", tok, nil, 404, "unknown_player")
		c.expect(n0, "GET", "/api/v1/leaderboards/b/around/zed", tok, nil, 404, "unknown_player")
	})

	t.Run("around is clipped at the ends", func(t *testing.T) {
		assert.Equal(t, []entryJSON{{"b", 90, 1}, {"c", 90, 2}, {"d", 80, 3}}, get(n0, "b/around/c?radius=1"))
		assert.Equal(t, []entryJSON{{"a", 100, 0}, {"b", 90, 1}, {"c", 90, 2}}, get(n1, "b/around/a?radius=2"))
		assert.Equal(t, []entryJSON{{"e", 70, 4}}, get(n2, "b/around/e?radius=0"))
		assert.Len(t, get(n2, "b/around/c"), 5, "the default radius covers this small board")
	})

	t.Run("range bounds are inclusive and optional", func(t *testing.T) {
		assert.Equal(t, []entryJSON{{"b", 90, 1}, {"c", 90, 2}, {"d", 80, 3}}, get(n0, "b/range?min=80&max=90"))
		assert.Equal(t, []entryJSON{{"a", 100, 0}, {"b", 90, 1}, {"c", 90, 2}}, get(n1, "b/range?min=90"))
		assert.Equal(t, []entryJSON{{"d", 80, 3}, {"e", 70, 4}}, get(n2, "b/range?max=80"))
		assert.Len(t, get(n0, "b/range"), 5)
		assert.Equal(t, []entryJSON{{"a", 100, 0}}, get(n0, "b/range?limit=1"))
		assert.Empty(t, get(n0, "b/range?min=91&max=99"))
		assert.Empty(t, get(n0, "b/range?min=90&max=80"), "min above max is empty")
	})

	t.Run("ranks answer in the order asked with -1 for unknown", func(t *testing.T) {
		var out entriesJSON
		require.Equal(t, 200, c.do(n1, "POST", "/api/v1/leaderboards/b/ranks", tok, map[string]any{"players": []string{"e", "nobody", "a", "c", "e"}}, &out))
		assert.Equal(t, []entryJSON{{"e", 70, 4}, {"nobody", 0, -1}, {"a", 100, 0}, {"c", 90, 2}, {"e", 70, 4}}, out.Entries)
		require.Equal(t, 200, c.do(n2, "POST", "/api/v1/leaderboards/b/ranks", tok, map[string]any{"players": []string{}}, &out))
		assert.Empty(t, out.Entries)
	})

	t.Run("a daily board is its own board", func(t *testing.T) {
		assert.Equal(t, entryJSON{"a", 7, 0}, post(n0, "b@daily", "a", 7, ""))
		assert.Equal(t, entryJSON{"z", 9, 0}, post(n1, "b@daily", "z", 9, ""))
		assert.Equal(t, []entryJSON{{"z", 9, 0}, {"a", 7, 1}}, get(n2, "b@daily/top"))
		assert.Equal(t, entryJSON{"w", 1, 0}, post(n2, "b@weekly", "w", 1, ""))
		assert.Equal(t, []entryJSON{{"a", 100, 0}}, get(n0, "b/top?limit=1"), "the all-time board is untouched")
	})

	t.Run("bad input is 400", func(t *testing.T) {
		scores := map[string]string{
			"NaN as a string":       `{"player": "p", "score": "NaN"}`,
			"NaN bare":              `{"player": "p", "score": NaN}`,
			"a number as a string":  `{"player": "p", "score": "1"}`,
			"above 1e15":            `{"player": "p", "score": 1e16}`,
			"four decimals":         `{"player": "p", "score": 0.0001}`,
			"no score":              `{"player": "p"}`,
			"null score":            `{"player": "p", "score": null}`,
			"unknown mode":          `{"player": "p", "score": 1, "mode": "max"}`,
			"a bad player":          `{"player": "p q", "score": 1}`,
			"no player":             `{"score": 1}`,
			"not an object":         `[1]`,
			"infinity as a string":  `{"player": "p", "score": "Infinity"}`,
			"an incr leaving range": `{"player": "a", "score": 999999999999999, "mode": "incr"}`,
		}
		for name, body := range scores {
			got, p, _, err := c.call(n0, "POST", "/api/v1/leaderboards/b/scores", tok, body, nil)
			require.NoError(t, err)
			assert.Equal(t, 400, got, "%s: %s", name, p)
			assert.NotEmpty(t, errCode(p), name)
		}
		c.expect(n0, "POST", "/api/v1/leaderboards/b/scores", tok, `{"player": "p", "score": "1"}`, 400, "bad_value")
		c.expect(n0, "POST", "/api/v1/leaderboards/b/scores", tok, `{"player": "p", "score": 1, "mode": "max"}`, 400, "bad_value")
		for _, board := range []string{"a b", "x{y}", "é", strings.Repeat("x", 65), "b@hourly"} {
			path := "/api/v1/leaderboards/" + url.PathEscape(board)
			c.expect(n1, "POST", path+"/scores", tok, map[string]any{"player": "p", "score": 1}, 400, "bad_name")
			c.expect(n1, "GET", path+"/top", tok, nil, 400, "bad_name")
		}
		for _, q := range []string{"b/top?limit=0", "b/top?limit=1001", "b/top?limit=x", "b/range?limit=0", "b/range?limit=1001",
			"b/around/a?radius=-1", "b/around/a?radius=501", "b/range?min=NaN", "b/range?max=0.0001", "b/range?min=1e16"} {
			got, p, _, err := c.call(n2, "GET", "/api/v1/leaderboards/"+q, tok, nil, nil)
			require.NoError(t, err)
			assert.Equal(t, 400, got, "%s: %s", q, p)
		}
		assert.Len(t, get(n2, "b/top?limit=1000"), 5, "limit 1000 is allowed")
		players := make([]string, 1001)
		for i := range players {
			players[i] = fmt.Sprint("p", i)
		}
		c.expect(n0, "POST", "/api/v1/leaderboards/b/ranks", tok, map[string]any{"players": players}, 413, "")
		c.expect(n0, "POST", "/api/v1/leaderboards/b/ranks", tok, map[string]any{"players": []string{"ok", "not ok"}}, 400, "bad_name")
		c.expect(n0, "GET", "/api/v1/leaderboards/b/top", "", nil, 401, "bad_token")
	})
}

func TestSeenOverHTTP(t *testing.T) {
	t.Parallel()
	c := newCluster(t, redistest.Real(t), 3)
	alice := c.session(c.nodes[0], "alice")
	bob := c.session(c.nodes[1], "bob")
	filter := func(n *testNode, tok string, items []string) []string {
		t.Helper()
		var out struct{ Unseen []string }
		require.Equal(t, 200, c.do(n, "POST", "/api/v1/seen/filter", tok, map[string]any{"items": items}, &out))
		require.NotNil(t, out.Unseen, "unseen is always an array")
		return out.Unseen
	}

	t.Run("a marked item is never returned, on any node", func(t *testing.T) {
		var items []string
		for i := 0; i < 300; i++ {
			items = append(items, fmt.Sprint("item-", i))
		}
		marked := items[:150]
		var ok struct{ OK bool }
		require.Equal(t, 200, c.do(c.nodes[0], "POST", "/api/v1/seen", alice, map[string]any{"items": marked}, &ok))
		assert.True(t, ok.OK)
		for _, n := range c.nodes {
			unseen := filter(n, alice, items)
			for _, it := range unseen {
				assert.NotContains(t, marked, it)
			}
			// 150 unmarked at a 1% false-positive rate: a handful held back at most
			assert.GreaterOrEqual(t, len(unseen), 140)
		}
		assert.Len(t, filter(c.nodes[2], bob, items), 300, "bob's filter is his own")
		assert.Empty(t, filter(c.nodes[1], alice, []string{}))
	})

	t.Run("bad input", func(t *testing.T) {
		many := make([]string, 1001)
		for i := range many {
			many[i] = fmt.Sprint(i)
		}
		for _, path := range []string{"/api/v1/seen", "/api/v1/seen/filter"} {
			c.expect(c.nodes[0], "POST", path, alice, map[string]any{"items": many}, 413, "too_large")
			c.expect(c.nodes[1], "POST", path, alice, map[string]any{"items": []string{"a", ""}}, 400, "bad_value")
			c.expect(c.nodes[2], "POST", path, alice, map[string]any{"items": []string{strings.Repeat("x", 257)}}, 400, "bad_value")
			c.expect(c.nodes[2], "POST", path, alice, `{"items": "a"}`, 400, "bad_request")
			c.expect(c.nodes[2], "POST", path, alice, `{"items": [1]}`, 400, "bad_request")
			c.expect(c.nodes[2], "POST", path, alice, `nope`, 400, "bad_json")
			c.expect(c.nodes[2], "POST", path, "", map[string]any{"items": []string{"a"}}, 401, "bad_token")
		}
	})
}

func TestShopRaceOverThreeNodes(t *testing.T) {
	t.Parallel()
	c := newCluster(t, redistest.Real(t), 3)
	const buyers, stock, price, coins = 40, 10, 30, 100
	require.Equal(t, 200, c.do(c.nodes[0], "POST", "/api/v1/shop/items", testAdmin, map[string]any{"item": "sword", "stock": stock, "price": price}, nil))
	toks := make([]string, buyers)
	for i := range toks {
		user := fmt.Sprintf("buyer%02d", i)
		toks[i] = c.session(c.nodes[i%3], user)
		assert.EqualValues(t, coins, c.grant(c.nodes[(i+1)%3], user, coins))
	}

	var (
		wg      sync.WaitGroup
		mu      sync.Mutex
		answers = map[string]int{}
		start   = make(chan struct{})
	)
	for i := range toks {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			status, body, _, err := c.call(c.nodes[i%3], "POST", "/api/v1/shop/buy", toks[i], map[string]any{"item": "sword", "qty": 1}, nil)
			key := fmt.Sprint(status, " ", errCode(body))
			if err != nil {
				key = err.Error()
			}
			mu.Lock()
			answers[key]++
			mu.Unlock()
		}()
	}
	close(start)
	wg.Wait()
	assert.Equal(t, map[string]int{"200 ": stock, "409 sold_out": buyers - stock}, answers)

	var total, swords int64
	for i, tok := range toks {
		var w walletJSON
		require.Equal(t, 200, c.do(c.nodes[(i+2)%3], "GET", "/api/v1/wallet", tok, nil, &w))
		total += w.Balance
		swords += w.Items["sword"]
	}
	assert.EqualValues(t, stock, swords, "10 swords sold")
	assert.EqualValues(t, buyers*coins, total+stock*price, "coins conserved: balances + spent = granted")
	var items struct {
		Items []struct {
			Item  string
			Stock int64
			Price int64
		}
	}
	require.Equal(t, 200, c.do(c.nodes[1], "GET", "/api/v1/shop/items", toks[0], nil, &items))
	require.Len(t, items.Items, 1)
	assert.EqualValues(t, 0, items.Items[0].Stock, "stock never below 0")
	var stats map[string]any
	require.Equal(t, 200, c.do(c.nodes[2], "GET", "/api/v1/stats", toks[0], nil, &stats))
	assert.EqualValues(t, stock, stats["purchases_total"])
}

func TestShopIdempotencyAndBadInput(t *testing.T) {
	t.Parallel()
	c := newCluster(t, redistest.Real(t), 3)
	n0, n1, n2 := c.nodes[0], c.nodes[1], c.nodes[2]
	require.Equal(t, 200, c.do(n0, "POST", "/api/v1/shop/items", testAdmin, map[string]any{"item": "gem", "stock": 100, "price": 10}, nil))
	alice := c.session(n0, "alice")
	c.grant(n1, "alice", 1000)
	buy := func(n *testNode, key string, body any) (int, string) {
		t.Helper()
		var hdr map[string]string
		if key != "" {
			hdr = map[string]string{"Idempotency-Key": key}
		}
		status, p, _, err := c.call(n, "POST", "/api/v1/shop/buy", alice, body, hdr)
		require.NoError(t, err)
		return status, string(p)
	}

	t.Run("the same Idempotency-Key twice buys once with the same answer", func(t *testing.T) {
		s1, b1 := buy(n0, "k-1", map[string]any{"item": "gem", "qty": 2})
		s2, b2 := buy(n2, "k-1", map[string]any{"item": "gem", "qty": 2})
		require.Equal(t, 200, s1, b1)
		assert.Equal(t, 200, s2)
		assert.JSONEq(t, b1, b2)
		assert.JSONEq(t, `{"balance": 980, "items": {"gem": 2}}`, b1)

		// two at once on two nodes
		var wg sync.WaitGroup
		var bodies [2]string
		var statuses [2]int
		for i := range 2 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				st, p, _, err := c.call(c.nodes[i], "POST", "/api/v1/shop/buy", alice, map[string]any{"item": "gem", "qty": 3}, map[string]string{"Idempotency-Key": "k-2"})
				if err == nil {
					statuses[i], bodies[i] = st, string(p)
				}
			}()
		}
		wg.Wait()
		assert.Equal(t, [2]int{200, 200}, statuses, "%v", bodies)
		assert.JSONEq(t, bodies[0], bodies[1])
		var w walletJSON
		require.Equal(t, 200, c.do(n1, "GET", "/api/v1/wallet", alice, nil, &w))
		assert.Equal(t, walletJSON{Balance: 950, Items: map[string]int64{"gem": 5}}, w, "each key bought once")

		st, p := buy(n1, "k-1", map[string]any{"item": "gem", "qty": 1})
		assert.Equal(t, 400, st, "a key reused for another purchase: %s", p)
	})

	t.Run("a grant with an Idempotency-Key is granted once", func(t *testing.T) {
		grant := func(n *testNode, key string, amount int) (int, string) {
			t.Helper()
			status, p, _, err := c.call(n, "POST", "/api/v1/wallet/grant", testAdmin, map[string]any{"user": "gus", "amount": amount},
				map[string]string{"Idempotency-Key": key})
			require.NoError(t, err)
			return status, string(p)
		}
		s1, b1 := grant(n0, "order-77", 40)
		s2, b2 := grant(n2, "order-77", 40)
		require.Equal(t, 200, s1, b1)
		assert.Equal(t, 200, s2, b2)
		assert.JSONEq(t, `{"balance": 40}`, b1)
		assert.JSONEq(t, b1, b2, "the first answer")
		st, p := grant(n1, "order-77", 41)
		assert.Equal(t, 400, st, "a key reused for another amount: %s", p)
		assert.Contains(t, p, `"bad_request"`)
		st, p = grant(n1, "bad key", 1)
		assert.Equal(t, 400, st, p)
		gus := c.session(n1, "gus")
		var w walletJSON
		require.Equal(t, 200, c.do(n1, "GET", "/api/v1/wallet", gus, nil, &w))
		assert.EqualValues(t, 40, w.Balance, "granted once")
	})

	t.Run("bad purchases", func(t *testing.T) {
		for _, body := range []string{`{"item": "gem", "qty": 0}`, `{"item": "gem", "qty": -1}`, `{"item": "gem", "qty": 1000001}`} {
			st, p := buy(n0, "", body)
			assert.Equal(t, 400, st, body)
			assert.Equal(t, "bad_value", errCode([]byte(p)), body)
		}
		for _, body := range []string{`{"item": "gem", "qty": 1.5}`, `{"item": "gem", "qty": "2"}`, `{"item": 5}`, `{`} {
			st, p := buy(n1, "", body)
			assert.Equal(t, 400, st, body)
			assert.Contains(t, []string{"bad_request", "bad_json"}, errCode([]byte(p)), body)
		}
		c.expect(n2, "POST", "/api/v1/shop/buy", alice, map[string]any{"item": "shield"}, 404, "unknown_item")
		c.expect(n2, "POST", "/api/v1/shop/buy", alice, map[string]any{"item": "a b"}, 400, "bad_name")
		c.expect(n2, "POST", "/api/v1/shop/buy", alice, map[string]any{"item": "gem", "qty": 1000}, 409, "sold_out")
		require.Equal(t, 200, c.do(n0, "POST", "/api/v1/shop/items", testAdmin, map[string]any{"item": "crown", "stock": 1, "price": 5000}, nil))
		c.expect(n1, "POST", "/api/v1/shop/buy", alice, map[string]any{"item": "crown"}, 409, "insufficient_funds")
		c.expect(n2, "POST", "/api/v1/shop/buy", "", map[string]any{"item": "gem"}, 401, "bad_token")
		st, p := buy(n0, strings.Repeat("k", 129), map[string]any{"item": "gem"})
		assert.Equal(t, 400, st, "an overlong Idempotency-Key: %s", p)
		var w walletJSON
		require.Equal(t, 200, c.do(n1, "GET", "/api/v1/wallet", alice, nil, &w))
		assert.EqualValues(t, 950, w.Balance, "no refused purchase took a coin")
	})

	t.Run("grants and stocking need the admin token", func(t *testing.T) {
		grant := map[string]any{"user": "alice", "amount": 5}
		c.expect(n0, "POST", "/api/v1/wallet/grant", "", grant, 401, "bad_token")
		c.expect(n0, "POST", "/api/v1/wallet/grant", "not-the-admin-token", grant, 401, "bad_token")
		c.expect(n1, "POST", "/api/v1/wallet/grant", alice, grant, 403, "forbidden")
		c.expect(n2, "POST", "/api/v1/shop/items", alice, map[string]any{"item": "x", "stock": 1, "price": 1}, 403, "forbidden")
		for _, body := range []string{`{"user": "alice", "amount": 1.5}`, `{"user": "alice", "amount": "5"}`, `{"user": "alice"}`} {
			c.expect(n2, "POST", "/api/v1/wallet/grant", testAdmin, body, 400, "")
		}
		for _, body := range []string{`{"user": "alice", "amount": 0}`, `{"user": "alice", "amount": -5}`} {
			c.expect(n2, "POST", "/api/v1/wallet/grant", testAdmin, body, 400, "bad_value")
		}
		c.expect(n0, "POST", "/api/v1/wallet/grant", testAdmin, map[string]any{"user": "a b", "amount": 5}, 400, "bad_name")
		for _, body := range []string{`{"item": "x", "stock": -1, "price": 1}`, `{"item": "x", "stock": 1, "price": -1}`, `{"item": "x", "stock": 1.5, "price": 1}`, `{"item": "x"}`} {
			c.expect(n1, "POST", "/api/v1/shop/items", testAdmin, body, 400, "")
		}
	})
}

func TestAdminEndpointsWithNoAdminConfiguredAre403(t *testing.T) {
	t.Parallel()
	c := newCluster(t, redistest.New(t), 1, nodeOpts{configure: func(cfg *nodeConfig) { cfg.AdminToken = "" }})
	n := c.nodes[0]
	alice := c.session(n, "alice")
	for _, tok := range []string{"", alice, testAdmin} {
		c.expect(n, "POST", "/api/v1/wallet/grant", tok, map[string]any{"user": "alice", "amount": 5}, 403, "forbidden")
		c.expect(n, "POST", "/api/v1/shop/items", tok, map[string]any{"item": "x", "stock": 1, "price": 1}, 403, "forbidden")
		c.expect(n, "PUT", "/api/v1/settings/motd", tok, map[string]any{"value": "x"}, 403, "forbidden")
		c.expect(n, "POST", "/api/v1/notices", tok, map[string]any{"text": "x"}, 403, "forbidden")
	}
}

func TestPollShopBoardsAndSeenOnRedisCluster(t *testing.T) {
	t.Parallel()
	c := newCluster(t, redistest.Cluster(t), 3)
	n0, n1, n2 := c.nodes[0], c.nodes[1], c.nodes[2]
	alice := c.session(n0, "alice")
	bob := c.session(n1, "bob")
	first := c.poll(n0, alice, "")
	assert.ElementsMatch(t, allSections, first.Dirty)

	room := c.join(n1, alice, "clu")
	exactly(t, c.pollUntil(alice, dirtyAny), "rooms")
	require.Equal(t, room.ID, c.join(n2, bob, "clu").ID)
	exactly(t, c.pollUntil(alice, dirtyAny), "rooms")
	m := c.say(n2, bob, room.ID, "over the cluster")
	a := exactly(t, c.pollUntil(alice, dirtyAny), "messages")
	var msgs map[string][]messageJSON
	a.section(t, "messages", &msgs)
	assert.Equal(t, map[string][]messageJSON{room.ID: {m}}, msgs)

	require.Equal(t, 200, c.do(n0, "POST", "/api/v1/shop/items", testAdmin, map[string]any{"item": "orb", "stock": 1, "price": 40}, nil))
	c.grant(n1, "alice", 50)
	exactly(t, c.pollUntil(alice, dirtyAny), "wallet")
	c.grant(n1, "bob", 50)
	var wg sync.WaitGroup
	codes := make([]string, 2)
	for i, tok := range []string{alice, bob} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			status, body, _, _ := c.call(c.nodes[i], "POST", "/api/v1/shop/buy", tok, map[string]any{"item": "orb"}, nil)
			codes[i] = fmt.Sprint(status, errCode(body))
		}()
	}
	wg.Wait()
	assert.ElementsMatch(t, []string{"200", "409sold_out"}, codes, "one orb, one buyer")

	require.Equal(t, 200, c.do(n2, "POST", "/api/v1/leaderboards/clu/scores", alice, map[string]any{"player": "alice", "score": 3}, nil))
	require.Equal(t, 200, c.do(n0, "POST", "/api/v1/leaderboards/clu/scores", bob, map[string]any{"player": "bob", "score": 4}, nil))
	var top entriesJSON
	require.Equal(t, 200, c.do(n1, "GET", "/api/v1/leaderboards/clu/top", alice, nil, &top))
	assert.Equal(t, []entryJSON{{"bob", 4, 0}, {"alice", 3, 1}}, top.Entries)
	var boards map[string]entryJSON
	c.pollUntil(alice, func(a pollAnswer) bool {
		return a.section(t, "leaderboards", &boards) && boards["clu"].Rank == 1
	})

	require.Equal(t, 200, c.do(n0, "POST", "/api/v1/seen", alice, map[string]any{"items": []string{"x", "y"}}, nil))
	var out struct{ Unseen []string }
	require.Equal(t, 200, c.do(n2, "POST", "/api/v1/seen/filter", alice, map[string]any{"items": []string{"x", "y", "z"}}, &out))
	assert.NotContains(t, out.Unseen, "x")
	assert.NotContains(t, out.Unseen, "y")

	// a long poll parked on one node wakes at a mark made on another. The
	// board marks of the posts above run in the background: first a long
	// poll must time out clean, so none is left to wake the parked one.
	quiet := false
	for tries := 0; tries < 10 && !quiet; tries++ {
		quiet = len(c.poll(n0, alice, "?wait=1").Dirty) == 0
	}
	require.True(t, quiet, "marks kept coming after the posts")
	ch := c.park(n0, alice, "?wait=20")
	c.grant(n2, "alice", 1)
	select {
	case a := <-ch:
		assert.Equal(t, []string{"wallet"}, a.Dirty, "woken by the grant's mark")
	case <-time.After(15 * time.Second):
		t.Fatal("the long poll was not woken")
	}
}

// TestBoardBurstMarksFollowersCoalescedAndLosesNone: 40 posts to one
// board over 3 nodes, each changing it. Every SMEMBERS a node's client
// sends is counted (a board mark reads the board's followers with one; no
// other code path sends one here), and each node's SMEMBERS are held until
// the whole burst has been answered, so the burst lands while each node's
// first mark runs. Coalesced, a node then runs that mark and at most one
// rerun for everything folded into it: at most 2 reads per node. A mark
// per post would read once per post, some 13 per node.
func TestBoardBurstMarksFollowersCoalescedAndLosesNone(t *testing.T) {
	t.Parallel()
	logs := map[string]*cmdLog{}
	c := newCluster(t, redistest.Real(t), 3, logCommands(logs))
	alice := c.session(c.nodes[0], "alice")
	bob := c.session(c.nodes[1], "bob")
	c.poll(c.nodes[0], alice, "")
	require.Equal(t, 200, c.do(c.nodes[0], "POST", "/api/v1/leaderboards/hot/scores", alice, map[string]any{"player": "alice", "score": 1}, nil))
	exactly(t, c.pollUntil(alice, dirtyAny), "leaderboards")

	release := make(chan struct{})
	for _, h := range logs {
		h.take()
		h.mu.Lock()
		h.hold = func(name string) {
			if name == "smembers" {
				select {
				case <-release:
				case <-time.After(10 * time.Second): // a mark that blocks its post
				}
			}
		}
		h.mu.Unlock()
	}

	const posts = 40
	var wg sync.WaitGroup
	for i := 0; i < posts; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			status, body, _, err := c.call(c.nodes[i%3], "POST", "/api/v1/leaderboards/hot/scores", bob, map[string]any{"player": fmt.Sprint("p", i), "score": 10 + i}, nil)
			if err != nil || status != 200 {
				t.Errorf("post %d: %d %s %v", i, status, body, err)
			}
		}()
	}
	wg.Wait()
	close(release)
	// the last post's mark is not lost to the coalescing: alice's poll ends
	// showing her rank below all 40
	var boards map[string]entryJSON
	c.pollUntil(alice, func(a pollAnswer) bool {
		return a.section(t, "leaderboards", &boards) && boards["hot"].Rank == posts
	})
	for k, n := range c.nodes {
		req, other := logs[n.srv.Node()].take()
		reads := 0
		for _, cmd := range slices.Concat(req, other) {
			if cmd == "smembers" {
				reads++
			}
		}
		t.Logf("%s: %d posts read the board's followers %d times", n.srv.Node(), (posts-k+2)/3, reads)
		assert.GreaterOrEqual(t, reads, 1, "%s marked the board's followers", n.srv.Node())
		assert.LessOrEqual(t, reads, 2, "%s: one mark, then one rerun for all the posts folded into it", n.srv.Node())
	}
}
