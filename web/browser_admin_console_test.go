package web_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestBrowserAdminConsole drives the admin console's cluster screens on n1
// while dave chats on n2 and carol on n1: the Nodes tab, rooms by
// population with a room's presence and a message from the system, the
// user search with one connection disconnected, a member disconnected,
// the audit log; then the read-only token on n2, and all of it at 390 px.
func TestBrowserAdminConsole(t *testing.T) {
	t.Parallel()
	n1, n2, browser := browserOnTwoNodes(t, 240*time.Second)
	shots := artifactDir(t)
	// erin only joins over REST and never polls: her seat and presence
	// must outlast the test on a slow machine
	admin(t, n1, "PUT", "seat.lease_seconds", `{"value": 3600}`)

	dave := openPage(t, browser, "http://"+n2.addr+"/", 1280, 800)
	dave.signIn(t, "dave", "general")
	carol := openPage(t, browser, "http://"+n1.addr+"/", 1280, 800)
	carol.signIn(t, "carol", "general")
	dave.waitJS(t, `text('room-label') === 'general · room 1 · 2/50'`, "dave and carol share general-1")
	erin := guestToken(t, n1, "erin")
	post(t, n1, erin, "/api/v1/lobbies/quiet/join", ``)
	pollOnce(t, n1, erin)

	adm := openPage(t, browser, "http://"+n1.addr+"/admin#token=adm", 1280, 900)
	adm.name = "admin"
	adm.waitJS(t, `!document.getElementById('console').hidden`, "signed in from the link")
	adm.waitJS(t, `document.getElementById('readonly-banner').hidden && document.body.dataset.role === 'admin'`, "the full token acts")

	t.Run("nodes: each node's version, uptime, CPU, memory, goroutines and connections", func(t *testing.T) {
		adm.do(t, chromedp.Click(`[data-testid="tab-nodes"]`))
		row := func(node, cell string) string {
			return fmt.Sprintf(`text2('[data-testid="node-row"][data-node="%s"] [data-testid="node-%s"]')`, node, cell)
		}
		for _, n := range []string{"n1", "n2"} {
			adm.waitJSFor(t, 45*time.Second, row(n, "connections")+` === '1' && `+row(n, "version")+` === 'v0.0.0-test'`+
				` && /^\d+(s|m \d+s)$/.test(`+row(n, "uptime")+`) && /^\d+\.\d\d$/.test(`+row(n, "cpu")+`)`+
				` && /MiB$/.test(`+row(n, "memory")+`) && /iB$/.test(`+row(n, "heap")+`) && Number(`+row(n, "goroutines")+`) > 10`,
				n+" reports itself, with one connection")
		}
		adm.waitJS(t, `text2('[data-testid="nodes-hint"]').includes('not users')`, "the hint says connections are not users")
		adm.screenshot(t, filepath.Join(shots, "admin-nodes-1280.png"))
		adm.axe(t, "admin nodes")
	})

	t.Run("the dashboard explains online users against connections", func(t *testing.T) {
		adm.do(t, chromedp.Click(`[data-testid="tab-dash"]`))
		adm.waitJSFor(t, 30*time.Second, `text('st-online') === '3' && text2('[data-testid="online-hint"]').includes('counts twice')`,
			"three users online (erin only polls), and why that is not the connections' sum")
	})

	t.Run("rooms: most populated first, a room's members and history, a message from the system", func(t *testing.T) {
		adm.do(t, chromedp.Click(`[data-testid="tab-rooms"]`))
		adm.waitJS(t, `[...document.querySelectorAll('[data-testid="pop-row"]')].map(r => r.dataset.room + ':' + r.querySelector('[data-testid="pop-members"]').textContent).join() === 'general-1:2,quiet-1:1'`,
			"general-1 (2) before quiet-1 (1)")
		adm.do(t, chromedp.Click(`[data-testid="pop-row"][data-room="general-1"] [data-testid="pop-open"]`))
		adm.waitJSFor(t, 30*time.Second, `[...document.querySelectorAll('[data-testid="member-row"]')].map(r => r.dataset.user + ':' + r.querySelector('[data-testid="member-status"]').textContent).sort().join() === 'carol:online,dave:online'`,
			"both members, online")
		adm.do(t, chromedp.SendKeys(`[data-testid="say-text"]`, "Maintenance in five minutes"), chromedp.Click(`[data-testid="say-submit"]`))
		adm.waitJS(t, `/^Sent to general-1 as the system/.test(text('say-result'))`, "the send is confirmed")
		dave.waitJS(t, `texts().includes('Maintenance in five minutes')`, "dave, on the other node, reads it")
		carol.waitJS(t, `texts().includes('Maintenance in five minutes')`, "carol reads it")
		adm.waitJS(t, `[...document.querySelectorAll('[data-testid="admin-message"] .msg-from')].some(e => e.textContent === '@system')`, "it is in the room's history, from @system")
		adm.screenshot(t, filepath.Join(shots, "admin-rooms-population-1280.png"))
		adm.axe(t, "admin rooms")
	})

	t.Run("users: a mute of dave is cleared from the search; dave's send on n2 goes through", func(t *testing.T) {
		post(t, n1, "adm", "/api/v1/moderation/mute", `{"user": "dave", "seconds": 600, "reason": "cool down"}`)
		adm.do(t, chromedp.Click(`[data-testid="tab-users"]`), chromedp.SendKeys(`[data-testid="search-prefix"]`, "DA"), chromedp.Click(`[data-testid="search-submit"]`))
		adm.waitJS(t, `!!document.querySelector('[data-testid="user-row"][data-user="dave"] [data-testid="user-unmute"]')`, "dave's row offers Clear mute")
		adm.screenshot(t, filepath.Join(shots, "admin-users-muted-1280.png"))
		dave.say(t, "am I muted?")
		dave.waitJS(t, `!!document.querySelector('[data-code="muted"] [data-testid="message-error"]')`, "dave's send is refused: muted")
		adm.waitJS(t, `(b => !!b && (b.click(), true))(document.querySelector('[data-testid="user-row"][data-user="dave"] [data-testid="user-unmute"]'))`, "clear dave's mute")
		adm.waitJS(t, `text('search-result') === 'Cleared the mute of dave.'`, "the mute is cleared")
		dave.do(t, chromedp.Click(`[data-code="muted"] [data-testid="message-retry"]`))
		dave.waitJS(t, `sent('am I muted?')`, "the retry is sent")
		adm.waitJS(t, `!document.querySelector('[data-testid="user-row"][data-user="dave"] [data-testid="user-unmute"]')`, "the search no longer shows a mute")
	})

	t.Run("users: a prefix search lists dave's connection on n2; disconnecting it closes dave's page", func(t *testing.T) {
		adm.do(t, chromedp.SetValue(`[data-testid="search-prefix"]`, "dA"), chromedp.Click(`[data-testid="search-submit"]`))
		adm.waitJS(t, `!!document.querySelector('[data-testid="user-row"][data-user="dave"] [data-testid="user-conn"][data-node="n2"]') && text2('[data-testid="user-row"][data-user="dave"] [data-testid="user-sessions"]') === '1'`,
			"dave, one session, one connection on n2")
		adm.screenshot(t, filepath.Join(shots, "admin-users-search-1280.png"))
		adm.axe(t, "admin user search")
		adm.waitJS(t, `(b => !!b && (b.click(), true))(document.querySelector('[data-testid="user-row"][data-user="dave"] [data-testid="conn-disconnect"]'))`, "disconnect dave's connection")
		adm.waitJS(t, `/^Disconnected one connection of dave on n2/.test(text('search-result'))`, "the disconnect is confirmed")
		dave.waitJS(t, `!document.getElementById('ended').hidden && text('ended-text').includes('disconnected by an admin')`, "dave's page says an admin disconnected it")
	})

	t.Run("a member is disconnected from the room's view; the audit log lists both actions", func(t *testing.T) {
		adm.do(t, chromedp.Click(`[data-testid="tab-rooms"]`))
		adm.waitJS(t, `!document.getElementById('sec-rooms').hidden && !!document.querySelector('[data-testid="member-row"][data-user="carol"]')`, "carol is listed")
		// a click in the page: the list may be drawn again between a query
		// from here and a click from here
		adm.waitJS(t, `(b => !!b && (b.click(), true))(document.querySelector('[data-testid="member-row"][data-user="carol"] [data-testid="member-disconnect"]'))`, "disconnect carol")
		carol.waitJS(t, `!document.getElementById('ended').hidden`, "carol's page is closed")

		adm.do(t, chromedp.Click(`[data-testid="tab-audit"]`))
		adm.waitJS(t, `(a => a.filter(x => x === 'POST /admin/disconnect').length === 2 && a.includes('POST /admin/rooms/{room}/messages') && a.includes('DELETE /moderation/mute/{user}'))([...document.querySelectorAll('[data-testid="audit-action"]')].map(e => e.textContent))`,
			"two disconnects, the cleared mute and the system message are logged")
		adm.waitJS(t, `[...document.querySelectorAll('[data-testid="audit-actor"]')].every(e => /^admin [0-9a-f]{8}$/.test(e.textContent))`, "by the admin token, named by its fingerprint")
		adm.waitJS(t, `[...document.querySelectorAll('[data-testid="audit-target"]')].map(e => e.textContent).slice(0, 2).sort().join() === 'carol,dave'`, "on carol and dave")
		adm.screenshot(t, filepath.Join(shots, "admin-audit-1280.png"))
		adm.axe(t, "admin audit")
	})

	t.Run("the read-only token reads every screen and every action is off", func(t *testing.T) {
		ro := openPage(t, browser, "http://"+n2.addr+"/admin#token=adm-read", 1280, 900)
		ro.name = "read-only admin"
		ro.waitJS(t, `!document.getElementById('console').hidden && !document.getElementById('readonly-banner').hidden`, "signed in, read-only")
		ro.do(t, chromedp.Click(`[data-testid="tab-nodes"]`))
		ro.waitJS(t, `document.querySelectorAll('[data-testid="node-row"]').length === 2`, "the nodes")
		ro.do(t, chromedp.Click(`[data-testid="tab-rooms"]`))
		ro.waitJS(t, `!!document.querySelector('[data-testid="pop-row"][data-room="quiet-1"]')`, "the rooms")
		ro.do(t, chromedp.Click(`[data-testid="pop-row"][data-room="quiet-1"] [data-testid="pop-open"]`))
		ro.waitJS(t, `!!document.querySelector('[data-testid="member-row"][data-user="erin"]')`, "a room's members")
		ro.do(t, chromedp.Click(`[data-testid="tab-audit"]`))
		ro.waitJS(t, `document.querySelectorAll('[data-testid="audit-row"]').length >= 3`, "the audit log")
		ro.do(t, chromedp.Click(`[data-testid="tab-settings"]`))
		ro.waitJS(t, `!!document.querySelector('[data-testid="setting-motd"]')`, "the settings")
		ro.waitJS(t, `(b => b.length > 10 && b.every(e => e.disabled))([...document.querySelectorAll('[data-act]')])`, "every action control is off")
		ro.screenshot(t, filepath.Join(shots, "admin-readonly-1280.png"))
		ro.axe(t, "read-only admin console")
		assert.Empty(t, ro.problems(), "read-only admin: no script errors or refused requests")
	})

	t.Run("at 390 px: every tab in sight, node ids whole, nothing overflows the page", func(t *testing.T) {
		adm.do(t, chromedp.EmulateViewport(390, 844), chromedp.Click(`[data-testid="tab-nodes"]`))
		adm.waitJS(t, `[...document.querySelectorAll('.tab')].every(b => { const r = b.getBoundingClientRect(); return r.width > 0 && r.left >= 0 && r.right <= innerWidth; })`,
			"every tab, Shop included, is inside the viewport")
		adm.waitJS(t, `[...document.querySelectorAll('[data-testid="node-row"] td.id')].every(td => { const r = document.createRange(); r.selectNodeContents(td); return r.getClientRects().length === 1; })`,
			"node ids, versions and addresses keep one line")
		adm.screenshot(t, filepath.Join(shots, "admin-nodes-390.png"))
		adm.axe(t, "admin nodes at 390 px")
		assert.True(t, adm.eval(t, `document.documentElement.scrollWidth <= 390`), "nodes: nothing overflows sideways: %s", adm.wider(t, 390))
		for _, sec := range []string{"rooms", "users", "audit", "dash"} {
			adm.do(t, chromedp.Click(`[data-testid="tab-`+sec+`"]`))
			adm.waitJS(t, `!document.getElementById('sec-`+sec+`').hidden`, sec+" shows")
			adm.screenshot(t, filepath.Join(shots, "admin-"+sec+"-390.png"))
			assert.True(t, adm.eval(t, `document.documentElement.scrollWidth <= 390`), "%s: nothing overflows sideways: %s", sec, adm.wider(t, 390))
		}
		adm.axe(t, "admin dashboard at 390 px")
	})

	assert.Empty(t, adm.problems(), "admin: no script errors, CSP violations or console errors")
}

// wider names the visible elements whose right edge passes w px.
func (p *page) wider(t *testing.T, w int) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(p.ctx, 5*time.Second)
	defer cancel()
	out, err := chromedp.Run(ctx, chromedp.Evaluate[string](fmt.Sprintf(`[...document.querySelectorAll('body *')]
		.filter(e => e.offsetParent !== null && e.getBoundingClientRect().right > %d)
		.slice(0, 8).map(e => e.tagName.toLowerCase() + (e.id ? '#' + e.id : '') + '.' + e.className + ' ' + Math.round(e.getBoundingClientRect().right)).join(', ')`, w)))
	if err != nil {
		return err.Error()
	}
	return out
}

// pollOnce makes one short poll of a REST session: it is online from then.
func pollOnce(t *testing.T, n *node, token string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, "http://"+n.addr+"/api/v1/poll?wait=0", nil)
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+token)
	res, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	_, _ = io.Copy(io.Discard, res.Body)
	require.NoError(t, res.Body.Close())
	require.Equal(t, http.StatusOK, res.StatusCode)
}
