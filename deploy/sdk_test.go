package deploy

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/chatd/chatd/client"
	"github.com/chatd/chatd/internal/chatdtest"
)

// Helpers of the tests that speak to chatdtest nodes through the Go SDK
// (STYLE rule 17): sessions, the admin, and a member that records every
// message its Conn hands over.

// sdkUser signs user in through urls[0] and returns its Client, which
// moves along urls when a node fails.
func sdkUser(ctx context.Context, t testing.TB, urls []string, user string) *client.Client {
	t.Helper()
	cl, err := client.New(client.Config{NodeURLs: urls, Backoff: client.Backoff{Min: 50 * time.Millisecond, Max: time.Second}})
	require.NoError(t, err)
	var last error
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
		if last = cl.SignIn(ctx, user); last == nil {
			return cl
		}
	}
	require.NoError(t, last, "sign in %s", user)
	return cl
}

// sdkAdmin returns a Client of c's admin token.
func sdkAdmin(t testing.TB, c *chatdtest.Cluster) *client.Client {
	t.Helper()
	cl, err := client.New(client.Config{NodeURLs: c.URLs(), Token: c.AdminToken})
	require.NoError(t, err)
	return cl
}

// sdkMember is a Conn whose events are read at once and recorded: the
// messages of every room, in the order handed over.
type sdkMember struct {
	user string
	cl   *client.Client
	conn *client.Conn

	mu       sync.Mutex
	msgs     map[string][]client.Message // room → messages
	gaps     int                         // ResumeGapEvents
	lost     []string                    // rooms lost (RoomLostEvent)
	final    error                       // the final disconnect, if any
	discs    int                         // disconnects
	lastDisc error                       // why the last disconnect happened
	readDone chan struct{}
}

// connectMember opens cl's Conn and starts recording its events.
func connectMember(ctx context.Context, t testing.TB, cl *client.Client) *sdkMember {
	t.Helper()
	var conn *client.Conn
	var err error
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(200 * time.Millisecond) {
		conn, err = cl.Connect(ctx, client.ConnOptions{ReadTimeout: 15 * time.Second})
		if err == nil || time.Now().After(deadline) {
			break
		}
	}
	require.NoError(t, err, "connect %s", cl.User())
	m := &sdkMember{user: cl.User(), cl: cl, conn: conn, msgs: map[string][]client.Message{}, readDone: make(chan struct{})}
	go m.read()
	t.Cleanup(func() { _ = conn.Close(); <-m.readDone })
	return m
}

func (m *sdkMember) read() {
	defer close(m.readDone)
	for ev := range m.conn.Events() {
		m.mu.Lock()
		switch ev := ev.(type) {
		case client.MessageEvent:
			m.msgs[ev.Message.Room] = append(m.msgs[ev.Message.Room], ev.Message)
		case client.ResumeGapEvent:
			m.gaps++
		case client.RoomLostEvent:
			m.lost = append(m.lost, ev.Room)
		case client.DisconnectedEvent:
			m.discs++
			m.lastDisc = ev.Err
			if ev.Final {
				m.final = ev.Err
			}
		}
		m.mu.Unlock()
	}
}

// messages returns the messages m was handed in room.
func (m *sdkMember) messages(room string) []client.Message {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]client.Message(nil), m.msgs[room]...)
}

// waitTexts waits until m was handed a message with every text of want in
// room, failing after d.
func (m *sdkMember) waitTexts(t testing.TB, room string, want []string, d time.Duration) {
	t.Helper()
	deadline := time.Now().Add(d)
	for {
		have := map[string]bool{}
		for _, msg := range m.messages(room) {
			have[msg.Text] = true
		}
		var missing []string
		for _, w := range want {
			if !have[w] {
				missing = append(missing, w)
			}
		}
		if len(missing) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: %d of %d messages not handed over within %s, e.g. %q", m.user, len(missing), len(want), d, missing[0])
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// textCounts counts the messages of msgs by text.
func textCounts(msgs []client.Message) map[string]int {
	n := map[string]int{}
	for _, m := range msgs {
		n[m.Text]++
	}
	return n
}

// rssKB returns the resident set size of process pid, in KiB, from
// /proc/pid/status.
func rssKB(pid int) (int, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			return strconv.Atoi(strings.TrimSuffix(strings.TrimSpace(rest), " kB"))
		}
	}
	return 0, fmt.Errorf("no VmRSS in /proc/%d/status", pid)
}
