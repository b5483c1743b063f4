package web_test

import (
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/assert"
)

// TestDirectMessagesInTheBrowser drives the direct-message view in
// headless Chromium, each way round: one user at 1280 px on n1 opens a
// conversation from the member list and writes; the other at 390 px (a
// phone) on n2 sees the unread badge, opens it (the panel takes the
// screen, with a way back), reads and answers; the first sees the answer
// live. Then a block, refused plainly, and an unblock.
func TestDirectMessagesInTheBrowser(t *testing.T) {
	t.Parallel()
	n1, n2, browser := browserOnTwoNodes(t, 150*time.Second)
	shots := artifactDir(t)
	ann := openPage(t, browser, "http://"+n1.addr+"/", 1280, 800)
	bob := openPage(t, browser, "http://"+n2.addr+"/", 390, 844)
	ann.signIn(t, "ann", "general")
	bob.signIn(t, "bob", "general")
	ann.waitJS(t, `members().join() === 'ann,bob'`, "ann sees bob in the room")

	const dmTexts = `[...document.querySelectorAll('[data-testid="dm-text"]')].map(e => e.textContent)`
	const shown = `(id => { const e = document.getElementById(id); return !!e && e.offsetParent !== null && e.getBoundingClientRect().width > 0; })`

	t.Run("1280: ann opens a conversation with bob from the member list and writes", func(t *testing.T) {
		ann.do(t, chromedp.Click(`[data-testid="member"][data-user="bob"] [data-testid="member-message"]`))
		ann.waitJS(t, `text('dm-with') === 'bob' && `+shown+`('dm-input') && `+shown+`('messages')`, "the conversation opens beside the chat")
		ann.do(t, chromedp.SendKeys(`[data-testid="dm-input"]`, "psst bob"), chromedp.Click(`[data-testid="dm-send"]`))
		ann.waitJS(t, `!!document.querySelector('[data-testid="dm-message"][data-state="sent"][data-id]') && `+dmTexts+`.join() === 'psst bob'`, "ann's message is stored, shown once")
	})

	t.Run("390: bob sees the unread badge, opens the conversation full screen and answers", func(t *testing.T) {
		bob.waitJS(t, `text('dm-count') === '1'`, "the Messages tab counts one unread")
		bob.do(t, chromedp.Click(`[data-testid="tab-direct"]`))
		bob.waitJS(t, `text2('[data-testid="dm-conv"][data-with="ann"] [data-testid="dm-unread"]') === '1'`, "the conversation with ann has a badge")
		bob.screenshot(t, filepath.Join(shots, "direct-list-390.png"))
		bob.do(t, chromedp.Click(`[data-testid="dm-conv"][data-with="ann"]`))
		bob.waitJS(t, dmTexts+`.join() === 'psst bob'`, "bob reads ann's message")
		bob.waitJS(t, `!`+shown+`('messages') && `+shown+`('dm-back') && document.getElementById('direct-panel').getBoundingClientRect().width >= 380`,
			"the panel takes the screen, with a back button")
		bob.waitJS(t, `document.getElementById('dm-count').hidden && sentTypes().includes('dm_read')`, "opening it marks it read")
		bob.do(t, chromedp.SendKeys(`[data-testid="dm-input"]`, "hi ann"), chromedp.Click(`[data-testid="dm-send"]`))
		bob.screenshot(t, filepath.Join(shots, "direct-open-390.png"))
		bob.axe(t, "direct message at 390 px")
	})

	t.Run("1280: ann sees the answer live", func(t *testing.T) {
		ann.waitJS(t, dmTexts+`.join() === 'psst bob,hi ann'`, "the answer arrives over ann's WebSocket, once")
		ann.waitJS(t, `document.getElementById('dm-count').hidden`, "read as it arrives: no badge")
		ann.screenshot(t, filepath.Join(shots, "direct-open-1280.png"))
		ann.axe(t, "direct message at 1280 px")
	})

	t.Run("a block is shown plainly, and unblock restores the conversation", func(t *testing.T) {
		bob.do(t, chromedp.Click(`[data-testid="dm-block"]`))
		bob.waitJS(t, `text('dm-block') === 'Unblock'`, "bob blocked ann")
		ann.do(t, chromedp.SendKeys(`[data-testid="dm-input"]`, "still there?"), chromedp.Click(`[data-testid="dm-send"]`))
		ann.waitJS(t, `/^Not sent \(blocked\): /.test(text2('[data-testid="dm-failed"]'))`, "ann is told plainly her message was refused")
		assert.True(t, bob.eval(t, dmTexts+`.join() === 'psst bob,hi ann'`), "nothing reached bob")
		bob.do(t, chromedp.Click(`[data-testid="dm-block"]`))
		bob.waitJS(t, `text('dm-block') === 'Block'`, "bob unblocked ann")
		ann.do(t, chromedp.SendKeys(`[data-testid="dm-input"]`, "back again"), chromedp.Click(`[data-testid="dm-send"]`))
		bob.waitJS(t, fmt.Sprintf(`%s.includes('back again')`, dmTexts), "after unblock the conversation works again")
		bob.do(t, chromedp.Click(`[data-testid="dm-back"]`))
		bob.waitJS(t, `!!document.querySelector('[data-testid="dm-conv"][data-with="ann"]') && `+shown+`('dm-list')`, "back to the list")
	})

	for _, p := range []*page{ann, bob} {
		assert.Empty(t, p.problems(), "%s: no script errors, CSP violations or console errors", p.name)
	}
}
