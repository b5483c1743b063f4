package web_test

import (
	"encoding/json"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestBrowserAdmin drives the admin console at /admin on n1 while dave
// chats on n2: the console signs in from the #token= link, watches the
// cluster, and moderates dave, whose page on the other node hears it.
func TestBrowserAdmin(t *testing.T) {
	t.Parallel()
	n1, n2, browser := browserOnTwoNodes(t, 150*time.Second)
	shots := artifactDir(t)

	dave := openPage(t, browser, "http://"+n2.addr+"/", 1280, 800)
	dave.signIn(t, "dave", "general")
	dave.waitJS(t, `text('room-label') === 'general · room 1 · 1/50'`, "dave is in general")
	dave.say(t, "hello from dave")
	dave.say(t, "remove me please")
	dave.waitJS(t, `sent('remove me please')`, "dave's messages are stored")

	adm := openPage(t, browser, "http://"+n1.addr+"/admin", 1280, 800)
	adm.name = "admin"

	t.Run("a wrong token is refused with a plain message", func(t *testing.T) {
		adm.do(t, chromedp.WaitVisible(`[data-testid="admin-token"]`))
		adm.expectErrors(func() { // the 401 is logged by the browser
			adm.do(t, chromedp.SendKeys(`[data-testid="admin-token"]`, "wrong"), chromedp.Click(`[data-testid="admin-signin-submit"]`))
			adm.waitJS(t, `text('admin-signin-error') === 'That is not the admin token of this server.'`, "the refusal says what is wrong")
		})
	})

	t.Run("the sign-in link's token is taken from the fragment and kept for the tab", func(t *testing.T) {
		adm.do(t, chromedp.Navigate("http://"+n1.addr+"/admin#token=adm"))
		adm.waitJS(t, `!document.getElementById('console').hidden`, "signed in from the link")
		adm.waitJS(t, `!location.hash.includes('token') && sessionStorage.getItem('chatd.admin') === 'adm'`, "the token left the address bar and stays in the tab")
		adm.do(t, chromedp.Reload())
		adm.waitJS(t, `!document.getElementById('console').hidden`, "a reload stays signed in")
	})

	t.Run("the dashboard shows the cluster and charts /stats every 2 s", func(t *testing.T) {
		adm.do(t, chromedp.Click(`[data-testid="tab-dash"]`))
		adm.waitJS(t, `text('st-online') === '1' && text('st-nodes') === '2' && /^\d/.test(text('st-rate'))`, "online users, nodes and messages/s")
		adm.waitJS(t, `[...document.querySelectorAll('[data-testid="node-row"]')].map(r => r.dataset.node + ':' + r.lastElementChild.textContent).sort().join() === 'n1:healthy,n2:healthy'`,
			"both nodes, healthy")
		adm.waitJS(t, `text('st-redis') === 'ok' && text('health').startsWith('Redis ok')`, "Redis is ready")
		adm.waitJS(t, `(c => { const d = c.getContext('2d').getImageData(0, 0, c.width, c.height).data; for (let i = 3; i < d.length; i += 4) if (d[i]) return true; return false; })(document.getElementById('chart'))`,
			"the chart is drawn")
		post(t, n2, guestToken(t, n2, "erin"), "/api/v1/matchmaking/quick/tickets", `{"skill": 1}`)
		adm.waitJS(t, `(r => r && r.querySelector('[data-testid="queue-tickets"]').textContent === '1' &&
			/^[0-9]+ s$/.test(r.querySelector('[data-testid="queue-oldest"]').textContent))(document.querySelector('[data-testid="queue-row"][data-queue="quick"]'))`,
			"the quick queue's depth and oldest wait")
		adm.screenshot(t, filepath.Join(shots, "admin-dashboard-1280.png"))
		adm.axe(t, "admin dashboard")
	})

	t.Run("users: look up, mute (dave's send shows the error), lift, kick (dave's page says why)", func(t *testing.T) {
		adm.do(t, chromedp.Click(`[data-testid="tab-users"]`))
		adm.do(t, chromedp.SendKeys(`[data-testid="lookup-user"]`, "dave"), chromedp.Click(`[data-testid="lookup-submit"]`))
		adm.waitJS(t, `text2('[data-testid="lookup-status"]') === 'online' && text2('[data-testid="lookup-node"]') === 'n2'`, "dave is online on n2")

		adm.do(t, chromedp.Click(`[data-testid="mod-mute"]`),
			chromedp.SetValue(`[data-testid="mod-reason"]`, "cool down"),
			chromedp.Click(`[data-testid="mod-submit"]`))
		adm.waitJS(t, `/^Muted dave until/.test(text('mod-result'))`, "the mute is confirmed")
		adm.waitJS(t, `text2('[data-testid="mute-row"][data-user="dave"] td:nth-child(3)') === 'cool down'`, "the mute is listed with its reason")
		adm.screenshot(t, filepath.Join(shots, "admin-users-1280.png"))
		adm.axe(t, "admin users")
		dave.say(t, "can I talk?")
		dave.waitJS(t, `(m => m && /muted until/.test(m.textContent))(document.querySelector('[data-code="muted"] [data-testid="message-error"]'))`, "dave's send shows that he is muted")

		adm.do(t, chromedp.Click(`[data-testid="mute-row"][data-user="dave"] [data-testid="lift-mute"]`))
		adm.waitJS(t, `!document.querySelector('[data-testid="mute-row"]')`, "the mute is lifted")
		dave.do(t, chromedp.Click(`[data-code="muted"] [data-testid="message-retry"]`))
		dave.waitJS(t, `sent('can I talk?')`, "after the lift, Retry sends it")

		adm.do(t, chromedp.Click(`[data-testid="mod-ban"]`),
			chromedp.SetValue(`[data-testid="mod-user"]`, "eve"),
			chromedp.SetValue(`[data-testid="mod-reason"]`, "spam"),
			chromedp.Click(`[data-testid="mod-submit"]`))
		adm.waitJS(t, `!!document.querySelector('[data-testid="ban-row"][data-user="eve"]')`, "eve's ban is listed")
		adm.do(t, chromedp.Click(`[data-testid="ban-row"][data-user="eve"] [data-testid="lift-ban"]`))
		adm.waitJS(t, `!document.querySelector('[data-testid="ban-row"]')`, "the ban is lifted")
	})

	t.Run("rooms: members, recent messages, and a removal that reaches dave's page", func(t *testing.T) {
		adm.do(t, chromedp.Click(`[data-testid="tab-rooms"]`))
		adm.waitJS(t, `!!document.querySelector('[data-testid="admin-lobby"]')`, "the busiest lobbies are listed")
		adm.do(t, chromedp.Click(`[data-testid="admin-lobby"]`))
		adm.waitJS(t, `!!document.querySelector('[data-testid="admin-room"]')`, "the lobby's rooms are listed")
		adm.do(t, chromedp.Click(`[data-testid="admin-room"]`))
		adm.waitJS(t, `text('room-members') === 'Members: dave' && [...document.querySelectorAll('[data-testid="admin-message"] .admin-msg-text')].map(e => e.textContent).includes('remove me please')`,
			"the room shows its member and messages")
		adm.do(t, chromedp.Click(`[data-testid="admin-message"]:nth-child(2) [data-testid="remove-message"]`))
		dave.waitJS(t, `!texts().includes('remove me please') && texts().includes('hello from dave')`, "dave's page drops the removed message")
		adm.screenshot(t, filepath.Join(shots, "admin-rooms-1280.png"))
	})

	t.Run("leaderboards: top and around a player", func(t *testing.T) {
		tok := guestToken(t, n1, "zed")
		post(t, n1, tok, "/api/v1/leaderboards/clicks@daily/scores", `{"player": "zed", "score": 42, "mode": "best"}`)
		adm.do(t, chromedp.Click(`[data-testid="tab-boards"]`), chromedp.Click(`[data-testid="board-show"]`))
		adm.waitJS(t, `text2('[data-testid="board-entry"][data-player="zed"] .score') === '42'`, "the top shows zed")
		adm.do(t, chromedp.SetValue(`[data-testid="board-player"]`, "nobody"), chromedp.Click(`[data-testid="board-show"]`))
		adm.waitJS(t, `text('board-error') === 'nobody has no score on clicks@daily.'`, "a player without a score is said so, without a 404")
		adm.do(t, chromedp.SetValue(`[data-testid="board-player"]`, "zed"), chromedp.Click(`[data-testid="board-show"]`))
		adm.waitJS(t, `text('board-list-title') === 'Around zed' && !!document.querySelector('.me-row[data-player="zed"]')`, "around zed")
	})

	t.Run("shop: stock an item and grant coins", func(t *testing.T) {
		adm.do(t, chromedp.Click(`[data-testid="tab-shop"]`))
		adm.do(t, chromedp.SendKeys(`[data-testid="stock-item"]`, "sword"),
			chromedp.SetValue(`[data-testid="stock-count"]`, "5"), chromedp.SetValue(`[data-testid="stock-price"]`, "100"),
			chromedp.Click(`[data-testid="stock-submit"]`))
		adm.waitJS(t, `text2('[data-testid="item-row"][data-item="sword"]') === 'sword5100'`, "the item is listed")
		adm.do(t, chromedp.SendKeys(`[data-testid="grant-user"]`, "dave"), chromedp.SetValue(`[data-testid="grant-amount"]`, "250"),
			chromedp.Click(`[data-testid="grant-submit"]`))
		adm.waitJS(t, `text('grant-result') === 'Granted 250 coins to dave; balance 250.'`, "the grant is confirmed with the balance")
		adm.screenshot(t, filepath.Join(shots, "admin-shop-1280.png"))
	})

	t.Run("settings: the form comes from the registry and shows the server's reasons", func(t *testing.T) {
		adm.do(t, chromedp.Click(`[data-testid="tab-settings"]`))
		adm.waitJS(t, `!!document.querySelector('[data-testid="setting-motd"]')`, "the form is built from /settings/defs")
		adm.expectErrors(func() { // the browser logs the 400
			adm.do(t, chromedp.SetValue(`[data-testid="setting-room.capacity"]`, "0"), chromedp.Click(`[data-testid="setting-save-room.capacity"]`))
			adm.waitJS(t, `/integer from 1 to 10000/.test(text2('[data-testid="setting-error-room.capacity"]'))`, "a bad value shows the server's reason")
		})
		adm.do(t, chromedp.SetValue(`[data-testid="setting-motd"]`, "Welcome to chatd <3"), chromedp.Click(`[data-testid="setting-save-motd"]`))
		dave.waitJS(t, `!document.getElementById('motd').hidden && text('motd-text') === 'Welcome to chatd <3'`, "dave's page shows the new MOTD")
		adm.screenshot(t, filepath.Join(shots, "admin-settings-1280.png"))
		adm.axe(t, "admin settings")
	})

	t.Run("notices reach dave's page on the other node", func(t *testing.T) {
		adm.do(t, chromedp.Click(`[data-testid="tab-notices"]`))
		adm.do(t, chromedp.SendKeys(`[data-testid="notice-text"]`, "Maintenance at 22:00 UTC"), chromedp.Click(`[data-testid="notice-send"]`))
		adm.waitJS(t, `/^Posted to everyone/.test(text('notice-result'))`, "the notice is posted")
		dave.waitJS(t, `[...document.querySelectorAll('[data-testid="notice"] .notice-text')].map(n => n.textContent).join('|') === 'Maintenance at 22:00 UTC'`, "dave sees it once")
	})

	t.Run("at 360 px", func(t *testing.T) {
		adm.do(t, chromedp.EmulateViewport(360, 740), chromedp.Click(`[data-testid="tab-dash"]`))
		adm.waitJS(t, `document.getElementById('chart').clientWidth < 360`, "the chart fits")
		adm.screenshot(t, filepath.Join(shots, "admin-dashboard-360.png"))
		adm.do(t, chromedp.Click(`[data-testid="tab-users"]`))
		adm.screenshot(t, filepath.Join(shots, "admin-users-360.png"))
		adm.axe(t, "admin users at 360 px")
		assert.True(t, adm.eval(t, `document.documentElement.scrollWidth <= 360`), "nothing overflows sideways")
	})

	t.Run("a kick closes dave's page on the other node with the reason", func(t *testing.T) {
		adm.do(t, chromedp.Click(`[data-testid="mod-kick"]`),
			chromedp.SetValue(`[data-testid="mod-user"]`, "dave"),
			chromedp.SetValue(`[data-testid="mod-reason"]`, "flooding the room"),
			chromedp.Click(`[data-testid="mod-submit"]`))
		dave.waitJS(t, `!document.getElementById('ended').hidden && text('ended-title') === 'You were removed from the chat' && text('ended-text') === 'A moderator removed you: flooding the room'`,
			"dave's page says he was kicked and why")
		dave.waitJS(t, `document.getElementById('conn-status').dataset.state === 'closed'`, "and stops reconnecting")
		dave.screenshot(t, filepath.Join(shots, "chat-kicked-1280.png"))
		dave.axe(t, "kicked page")
	})

	assert.Empty(t, dave.problems(), "dave: no script errors, CSP violations or console errors")
	// The console's first read of each kind of user endpoint with the admin
	// token is refused (401) on a server that keeps the admin token out of
	// user endpoints (the browser logs it); it then reads that kind with a
	// session of its own. Nothing else may be logged.
	var rest []string
	refused := 0
	for _, e := range adm.problems() {
		if strings.Contains(e, "status of 401") {
			refused++
		} else {
			rest = append(rest, e)
		}
	}
	t.Logf("admin: %d reads refused to the admin token", refused)
	assert.LessOrEqual(t, refused, 8, "admin: at most one refused read per kind (presence, stats, rooms, lobbies, leaderboards, shop, settings)")
	assert.Empty(t, rest, "admin: no script errors, CSP violations or console errors")
}

// guestToken signs a guest in over HTTP.
func guestToken(t *testing.T, n *node, user string) string {
	t.Helper()
	var out struct {
		Token string `json:"token"`
	}
	require.NoError(t, json.Unmarshal(post(t, n, "", "/api/v1/session", `{"user": "`+user+`"}`), &out))
	return out.Token
}

// post sends a JSON POST and requires a 200.
func post(t *testing.T, n *node, token, path, body string) []byte {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, "http://"+n.addr+path, strings.NewReader(body))
	require.NoError(t, err)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	req.Header.Set("Content-Type", "application/json")
	res, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	msg, _ := io.ReadAll(res.Body)
	require.NoError(t, res.Body.Close())
	require.Equal(t, http.StatusOK, res.StatusCode, "POST %s: %s", path, msg)
	return msg
}
