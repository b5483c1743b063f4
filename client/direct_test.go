package client_test

import (
	"fmt"
	"slices"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/chatd/chatd/client"
	"github.com/chatd/chatd/internal/chatdtest"
)

// directTexts returns the texts of the DirectEvents of evs, in order.
func directTexts(evs []client.Event) []string {
	var out []string
	for _, e := range evs {
		if d, ok := e.(client.DirectEvent); ok {
			out = append(out, d.Message.Text)
		}
	}
	return out
}

// TestDirectMessagesResumeAfterTheNodeDies: bob's Conn on n1 gets
// alice's direct messages (sent from n3); n1 is killed and, while bob's
// reconnect is held, alice writes more; the Conn reconnects to n2 and
// resumes the conversation by itself: every message once. Then alice's
// REST calls see the conversation, and a block refuses her with blocked.
func TestDirectMessagesResumeAfterTheNodeDies(t *testing.T) {
	skipShort(t)
	cl := chatdtest.Start(t, chatdtest.Options{Nodes: 3})
	ctx := ctxT(t)
	urls := cl.URLs()
	gate := make(chan struct{})
	var release sync.Once
	open := func() { release.Do(func() { close(gate) }) }
	bob := newClient(t, "bob", client.Config{NodeURLs: urls, NextURL: func(failed string) string {
		<-gate
		return urls[(slices.Index(urls, failed)+1)%len(urls)]
	}})
	alice := newClient(t, "alice", client.Config{BaseURL: cl.Nodes[2].URL})
	cb, rb := connect(t, bob, client.ConnOptions{})
	ca, _ := connect(t, alice, client.ConnOptions{})
	require.Equal(t, "n1", cb.Node())
	t.Cleanup(open)

	for i := 1; i <= 3; i++ {
		_, err := ca.SendDirect(ctx, "Bob", fmt.Sprintf("before %d", i))
		require.NoError(t, err)
	}
	rb.waitFor(t, "3 direct messages", func(evs []client.Event) bool { return len(directTexts(evs)) == 3 })

	cl.Nodes[0].Kill()
	for i := 1; i <= 3; i++ {
		_, err := alice.SendDirect(ctx, "bob", fmt.Sprintf("away %d", i))
		require.NoError(t, err)
	}
	open()
	evs := rb.waitFor(t, "the 3 sent while away", func(evs []client.Event) bool { return len(directTexts(evs)) >= 6 })
	assert.Equal(t, []string{"before 1", "before 2", "before 3", "away 1", "away 2", "away 3"}, directTexts(evs))
	assert.Equal(t, "n2", cb.Node())

	list, err := alice.Conversations(ctx, 0)
	require.NoError(t, err)
	require.Len(t, list, 1)
	assert.Equal(t, "Bob", list[0].With, "as first written")
	page, err := bob.DirectHistory(ctx, list[0].ID, client.HistoryOptions{})
	require.NoError(t, err)
	assert.Len(t, page.Messages, 6)

	require.NoError(t, bob.Block(ctx, "ALICE"))
	_, err = alice.SendDirect(ctx, "bob", "hello?")
	var e *client.Error
	require.ErrorAs(t, err, &e)
	assert.Equal(t, "blocked", string(e.Code))
	require.NoError(t, bob.Unblock(ctx, "alice"))
	_, err = alice.SendDirect(ctx, "bob", "back")
	require.NoError(t, err)
}
