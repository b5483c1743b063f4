package main

import (
	"context"
	"log/slog"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/chatd/chatd/client"
	"github.com/chatd/chatd/internal/chatdtest"
)

func TestMain(m *testing.M) {
	code := m.Run()
	chatdtest.Cleanup()
	os.Exit(code)
}

func TestReply(t *testing.T) {
	roll := func(n int) int { return n } // the highest face: shows the sides used
	for _, tc := range []struct {
		in, want string
		ok       bool
	}{
		{"!ping", "pong", true},
		{"  !PING  ", "pong", true},
		{"!roll", "6", true},
		{"!roll 20", "20", true},
		{"!roll 1", "usage: !roll [sides], sides from 2 to 1000", true},
		{"!roll many", "usage: !roll [sides], sides from 2 to 1000", true},
		{"!help", "commands: !ping, !roll [sides], !help", true},
		{"hello", "", false},
		{"ping", "", false},
		{"", "", false},
	} {
		got, ok := reply(tc.in, roll)
		assert.Equal(t, tc.ok, ok, "%q", tc.in)
		assert.Equal(t, tc.want, got, "%q", tc.in)
	}
}

const wait = 30 * time.Second

// inbox collects the messages a Conn receives.
type inbox struct {
	mu   sync.Mutex
	msgs []client.Message
}

func listen(cn *client.Conn) *inbox {
	in := &inbox{}
	go func() {
		for ev := range cn.Events() {
			if m, ok := ev.(client.MessageEvent); ok {
				in.mu.Lock()
				in.msgs = append(in.msgs, m.Message)
				in.mu.Unlock()
			}
		}
	}()
	return in
}

// from returns the texts of the messages from user, in order.
func (in *inbox) from(user string) []string {
	in.mu.Lock()
	defer in.mu.Unlock()
	var out []string
	for _, m := range in.msgs {
		if m.From == user {
			out = append(out, m.Text)
		}
	}
	return out
}

// waitFrom waits until user has sent n messages, and returns their texts.
func (in *inbox) waitFrom(t *testing.T, user string, n int) []string {
	t.Helper()
	deadline := time.Now().Add(wait)
	for {
		got := in.from(user)
		if len(got) >= n {
			return got
		}
		if time.Now().After(deadline) {
			t.Fatalf("waited for %d messages from %s, got %q", n, user, got)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// The bot runs on node n1 and a player talks to it from node n2 through
// the SDK: commands get their answers in order, other lines none, a
// command sent before the bot joined (replayed to it by the join) none;
// when its context ends the bot returns nil and its name is free.
func TestBotAnswersInALobby(t *testing.T) {
	if testing.Short() {
		t.Skip("starts chatd processes")
	}
	cl := chatdtest.Start(t, chatdtest.Options{Nodes: 2})
	ctx, cancel := context.WithTimeout(context.Background(), 2*wait)
	defer cancel()

	alice, err := client.New(client.Config{BaseURL: cl.Nodes[1].URL})
	require.NoError(t, err)
	require.NoError(t, alice.SignIn(ctx, "alice"))
	conn, err := alice.Connect(ctx, client.ConnOptions{})
	require.NoError(t, err)
	t.Cleanup(func() { _ = conn.Close() })
	in := listen(conn)
	room, err := conn.Join(ctx, "tavern")
	require.NoError(t, err)
	_, err = conn.Say(ctx, room.ID, "!ping (before the bot came)")
	require.NoError(t, err)

	botCtx, stopBot := context.WithCancel(ctx)
	defer stopBot()
	ready := make(chan string, 1)
	done := make(chan error, 1)
	finished := make(chan struct{})
	t.Cleanup(func() { // a failed test stops the bot before its log goes away
		stopBot()
		select {
		case <-finished:
		case <-time.After(wait):
		}
	})
	go func() {
		defer close(finished)
		done <- runBot(botCtx, botConfig{
			URLs:  []string{cl.Nodes[0].URL},
			Name:  "bot",
			Lobby: "tavern",
			Roll:  func(n int) int { return n },
			Log:   slog.New(slog.NewTextHandler(testWriter{t}, nil)),
			Ready: func(room string) { ready <- room },
		})
	}()
	select {
	case r := <-ready:
		assert.Equal(t, room.ID, r, "the bot sits in alice's room")
	case err := <-done:
		t.Fatalf("the bot ended before it listened: %v", err)
	case <-time.After(wait):
		t.Fatal("the bot did not start listening")
	}

	for _, text := range []string{"hello bot", "!ping", "!roll", "!roll 20", "!ping"} {
		_, err := conn.Say(ctx, room.ID, text)
		require.NoError(t, err)
	}
	// The bot answers in order, so when the last pong is here every
	// answer it gave is: one too many (to the old ping, to "hello") would
	// show in the list.
	assert.Equal(t, []string{"pong", "6", "20", "pong"}, in.waitFrom(t, "bot", 4))

	stopBot()
	select {
	case err := <-done:
		assert.NoError(t, err)
	case <-time.After(wait):
		t.Fatal("the bot did not stop")
	}
	again, err := client.New(client.Config{BaseURL: cl.Nodes[0].URL})
	require.NoError(t, err)
	require.NoError(t, again.SignIn(ctx, "bot"), "the bot signed out: its name is free")
}

// testWriter sends the bot's log to the test log.
type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}
