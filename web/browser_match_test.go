package web_test

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/chatd/chatd/internal/redistest"
)

// TestBrowserQuickMatch: two pages on two nodes press Quick match, see how
// long they have waited, and land in the same match room, where they chat.
func TestBrowserQuickMatch(t *testing.T) {
	t.Parallel()
	chromium := findChromium(t)
	r := redistest.Real(t)
	n1 := startNode(t, r, "n1")
	n2 := startNode(t, r, "n2")
	shots := artifactDir(t)

	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	browser := startBrowser(t, ctx, chromium)
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
		p.waitJS(t, `/^mm\.quick\.[0-9]+ · room 1 /.test(text('room-label'))`, p.name+" is in the match room")
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

// roomLabel is the page's room label.
func roomLabel(t *testing.T, p *page) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(p.ctx, 5*time.Second)
	defer cancel()
	s, err := chromedp.Run(ctx, chromedp.Evaluate[string](js(`text('room-label')`)))
	require.NoError(t, err, p.name)
	return s
}
