// Package curl holds walkthrough.sh, a REST game client in curl, and the
// test that runs it against a real chatd node so that it cannot rot.
package curl

import (
	"context"
	"os"
	"os/exec"
	"regexp"
	"strings"
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

// needTools skips (fails under CHATD_TEST_STRICT=1) without sh or curl.
func needTools(t *testing.T) {
	t.Helper()
	for _, tool := range []string{"sh", "curl", "sed"} {
		if _, err := exec.LookPath(tool); err != nil {
			if os.Getenv("CHATD_TEST_STRICT") == "1" {
				t.Fatalf("%s is not installed (CHATD_TEST_STRICT=1)", tool)
			}
			t.Skipf("%s is not installed", tool)
		}
	}
}

// run runs walkthrough.sh with env and returns its output (stdout and
// stderr) and error.
func run(t *testing.T, env ...string) (string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "sh", "walkthrough.sh")
	cmd.Env = append(os.Environ(), env...)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// steps splits the script's output into its steps: title → the lines
// under it (request, answer, request, answer…).
func steps(out string) map[string][]string {
	m := map[string][]string{}
	var cur string
	for _, line := range strings.Split(out, "\n") {
		if t, ok := strings.CutPrefix(line, "== "); ok {
			cur = t
			continue
		}
		if cur != "" && line != "" {
			m[cur] = append(m[cur], line)
		}
	}
	return m
}

// step returns the lines of the step whose title starts with prefix.
func step(t *testing.T, m map[string][]string, prefix string) []string {
	t.Helper()
	for title, lines := range m {
		if strings.HasPrefix(title, prefix) {
			return lines
		}
	}
	t.Fatalf("no step %q in the output", prefix)
	return nil
}

// The walkthrough runs against a real node on a private redis-server:
// each step prints its request and the documented answer, and the server
// holds what the script did (its message, its score, its potion; its seat
// and its name free again after the leave and the sign-out). Without the admin token it skips the
// purchase and says why.
func TestWalkthrough(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a chatd process")
	}
	needTools(t)
	cl := chatdtest.Start(t, chatdtest.Options{})
	url := cl.Nodes[0].URL
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	out, err := run(t, "CHATD_URL="+url, "CHATD_USER=walker", "CHATD_LOBBY=plaza", "CHATD_BOARD=speedrun",
		"CHATD_ADMIN_TOKEN="+cl.AdminToken)
	require.NoError(t, err, "walkthrough.sh failed:\n%s", out)
	t.Logf("walkthrough.sh output:\n%s", out)
	m := steps(out)

	want := []struct {
		step  string
		lines []string // regexps, one per line of the step
	}{
		{"1. sign in", []string{`^POST /api/v1/session \{"user":"walker"\}$`, `^200 \{"token":"[^"]+","user":"walker"\}$`}},
		{"2. join lobby plaza", []string{`^POST /api/v1/lobbies/plaza/join$`, `^200 \{"room":\{"id":"plaza-1","lobby":"plaza",.*"members":\["walker"\]\}\}$`}},
		{"3. say something in plaza-1", []string{`^POST /api/v1/rooms/plaza-1/messages \{"text":"hello from curl"\}$`,
			`^200 \{"message":\{"id":"[0-9]{13}-[0-9]{6}","room":"plaza-1","from":"walker","text":"hello from curl",`}},
		{"4. poll", []string{`^GET /api/v1/poll\?wait=0$`, `^200 \{"dirty":\[.*"messages".*\],"data":\{.*"plaza-1":\[\{.*"text":"hello from curl"`}},
		{"5. post a score", []string{`^POST /api/v1/leaderboards/speedrun/scores \{"player":"walker","score":1234\}$`, `^200 \{"entry":\{"player":"walker","score":1234,"rank":0\}\}$`}},
		{"6. read the top", []string{`^GET /api/v1/leaderboards/speedrun/top\?limit=10$`, `^200 \{"entries":\[\{"player":"walker","score":1234,"rank":0\}\]\}$`}},
		{"7. admin: stock", []string{`^POST /api/v1/shop/items \{"item":"potion","stock":100,"price":10\}$`, `^200 \{"ok":true\}$`,
			`^POST /api/v1/wallet/grant \{"user":"walker","amount":50\}$`, `^200 \{"balance":50\}$`}},
		{"8. buy a potion", []string{`^POST /api/v1/shop/buy \{"item":"potion","qty":1\} -H Idempotency-Key: walkthrough-[0-9]+-[0-9]+$`, `^200 \{"balance":40,"items":\{"potion":1\}\}$`}},
		{"9. the same purchase again", []string{`^POST /api/v1/shop/buy \{"item":"potion","qty":1\} -H Idempotency-Key: walkthrough-[0-9]+-[0-9]+$`, `^200 \{"balance":40,"items":\{"potion":1\}\}$`}},
		{"10. the wallet", []string{`^GET /api/v1/wallet$`, `^200 \{"balance":40,"items":\{"potion":1\}\}$`}},
		{"11. leave plaza-1", []string{`^POST /api/v1/rooms/plaza-1/leave$`, `^200 \{"ok":true\}$`}},
		{"12. sign out", []string{`^DELETE /api/v1/session$`, `^200 \{"ok":true\}$`}},
	}
	assert.Len(t, m, len(want), "steps")
	for _, w := range want {
		lines := step(t, m, w.step)
		if assert.Len(t, lines, len(w.lines), "step %q: %q", w.step, lines) {
			for i, re := range w.lines {
				assert.Regexp(t, regexp.MustCompile(re), lines[i], "step %q, line %d", w.step, i+1)
			}
		}
	}

	// What the server holds now.
	adm, err := client.New(client.Config{BaseURL: url, Token: cl.AdminToken})
	require.NoError(t, err)
	msgs, err := adm.History(ctx, "plaza-1", client.HistoryOptions{})
	require.NoError(t, err)
	require.Len(t, msgs, 1)
	assert.Equal(t, "walker", msgs[0].From)
	assert.Equal(t, "hello from curl", msgs[0].Text)
	top, err := adm.Top(ctx, "speedrun", 10)
	require.NoError(t, err)
	require.Len(t, top, 1)
	assert.Equal(t, "walker", top[0].Player)
	assert.Equal(t, 1234.0, top[0].Score)
	room, err := adm.Room(ctx, "plaza-1")
	require.NoError(t, err)
	assert.Empty(t, room.Members, "the script left the room")
	items, err := adm.Items(ctx)
	require.NoError(t, err)
	require.Len(t, items, 1)
	assert.Equal(t, int64(99), items[0].Stock, "one potion sold, not two")
	again, err := client.New(client.Config{BaseURL: url})
	require.NoError(t, err)
	require.NoError(t, again.SignIn(ctx, "walker"), "the sign-out freed the name")
	require.NoError(t, again.SignOut(ctx))

	t.Run("without the admin token the purchase is skipped", func(t *testing.T) {
		out, err := run(t, "CHATD_URL="+url, "CHATD_USER=walker", "CHATD_ADMIN_TOKEN=")
		require.NoError(t, err, "walkthrough.sh failed:\n%s", out)
		m := steps(out)
		lines := step(t, m, "7. buy: skipped (set CHATD_ADMIN_TOKEN")
		require.Len(t, lines, 2)
		assert.Regexp(t, `^200 \{"items":\[\{"item":"potion","stock":99,"price":10\}\]\}$`, lines[1])
		lines = step(t, m, "8. the wallet")
		require.Len(t, lines, 2)
		assert.Equal(t, `200 {"balance":40,"items":{"potion":1}}`, lines[1], "the same guest name, the same wallet")
	})

	t.Run("an error answer is printed and ends the script", func(t *testing.T) {
		out, err := run(t, "CHATD_URL="+url, "CHATD_USER=bad name")
		require.Error(t, err, "walkthrough.sh should fail:\n%s", out)
		assert.Regexp(t, `(?m)^400 \{"error":\{"code":"bad_name",`, out)
		assert.Contains(t, out, "walkthrough: POST /session answered 400")
		assert.NotContains(t, out, "== 2.", "nothing after the failed step")
	})
}
