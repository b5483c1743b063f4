package web_test

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestBrowserQuickMatch: two pages on two nodes press Quick match, see how
// long they have waited, and land in the same match room, where they chat.
func TestBrowserQuickMatch(t *testing.T) {
	t.Parallel()
	n1, n2, browser := browserOnTwoNodes(t, 120*time.Second)
	shots := artifactDir(t)
	ann := openPage(t, browser, "http://"+n1.addr+"/", 1280, 800)
	bob := openPage(t, browser, "http://"+n2.addr+"/", 1280, 800)
	ann.signIn(t, "ann", "general")
	bob.signIn(t, "bob", "lounge")
	ann.waitJS(t, `text('room-label').startsWith('general · room 1')`, "ann is in general")
	bob.waitJS(t, `text('room-label').startsWith('lounge · room 1')`, "bob is in lounge")

	ann.do(t, chromedp.Click(`[data-testid="quick-match"]`))
	ann.waitJS(t, `/^Looking for players… 0:0[1-9]/.test(text('match-status'))`, "ann sees how long she has waited")
	ann.waitJS(t, `text('quick-match') === 'Cancel'`, "the control cancels while waiting")
	ann.screenshot(t, filepath.Join(shots, "quick-match-waiting-1280.png"))

	bob.do(t, chromedp.Click(`[data-testid="quick-match"]`))
	for _, p := range []*page{ann, bob} {
		p.waitJS(t, `text('match-status').startsWith('Match found with ')`, p.name+" sees the match found")
		p.waitJS(t, `/^mm\.quick\.[0-9]+ · match · /.test(text('room-label'))`, p.name+" is in the match room")
		p.waitJS(t, `members().length === 2`, p.name+" sees both players")
	}
	label := roomLabel(t, ann)
	assert.Equal(t, label, roomLabel(t, bob), "one room")
	ann.say(t, "glhf")
	bob.waitJS(t, `texts().includes('glhf')`, "bob reads ann in the match room")
	ann.screenshot(t, filepath.Join(shots, "quick-match-found-1280.png"))
	for _, p := range []*page{ann, bob} {
		assert.Empty(t, p.problems(), "%s: no script errors, CSP violations or console errors", p.name)
	}
}

// TestBrowserQuickMatchOverSSE: a page whose network refuses WebSocket
// upgrades (so on the SSE stream, its sends over HTTP) and a page on the
// WebSocket press Quick match and land in the same match room, where they
// chat: the ticket goes over REST, `matched` comes on the stream, and the
// match room is entered with POST /rooms/{room}/join.
func TestBrowserQuickMatchOverSSE(t *testing.T) {
	t.Parallel()
	n1, n2, browser := browserOnTwoNodes(t, 120*time.Second)
	proxy := newUpgradeRefusingProxy(t, n1)
	ann := openPage(t, browser, "http://"+proxy.addr+"/", 1280, 800)
	bob := openPage(t, browser, "http://"+n2.addr+"/", 1280, 800)
	ann.expectErrors(func() { // the browser logs the refused WebSocket
		ann.signIn(t, "ann", "general")
		ann.waitJS(t, `text('conn-text') + ' · ' + text('conn-via') === 'live · SSE'`, "ann's page is on SSE")
	})
	bob.signIn(t, "bob", "lounge")
	ann.waitJS(t, `text('room-label').startsWith('general · room 1')`, "ann is in general")
	bob.waitJS(t, `text('room-label').startsWith('lounge · room 1')`, "bob is in lounge")

	ann.do(t, chromedp.Click(`[data-testid="quick-match"]`))
	ann.waitJS(t, `/^Looking for players… 0:0[1-9]/.test(text('match-status'))`, "ann sees how long she has waited")
	ann.waitJS(t, `text('quick-match') === 'Cancel'`, "the control cancels while waiting")
	bob.do(t, chromedp.Click(`[data-testid="quick-match"]`))
	for _, p := range []*page{ann, bob} {
		p.waitJS(t, `text('match-status').startsWith('Match found with ')`, p.name+" sees the match found")
		p.waitJS(t, `/^mm\.quick\.[0-9]+ · match · /.test(text('room-label'))`, p.name+" is in the match room")
		p.waitJS(t, `members().length === 2`, p.name+" sees both players")
	}
	assert.Equal(t, roomLabel(t, ann), roomLabel(t, bob), "one room")
	ann.say(t, "glhf")
	bob.waitJS(t, `texts().includes('glhf')`, "bob reads ann in the match room")
	bob.say(t, "gg")
	ann.waitJS(t, `texts().join('|') === 'glhf|gg'`, "ann reads bob over the stream")
	assert.True(t, ann.eval(t, `sentTypes().length === 0`), "ann's page sent no WebSocket frame")
	assert.Empty(t, bob.problems(), "bob: no script errors, CSP violations or console errors")
}

// roomLabel is the page's room label.
func roomLabel(t *testing.T, p *page) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(p.ctx, 5*time.Second)
	defer cancel()
	s, err := chromedp.Run(ctx, chromedp.Evaluate[string](js(`text('room-label')`)))
	require.NoError(t, err, p.name)
	return s
}
