package main

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
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

const wait = 30 * time.Second

// findChromium returns the Chromium to drive, or skips the test (fails it
// under CHATD_TEST_STRICT=1).
func findChromium(t *testing.T) string {
	t.Helper()
	for _, name := range []string{os.Getenv("CHATD_CHROMIUM"), "chromium", "chromium-browser", "/usr/bin/chromium"} {
		if name == "" {
			continue
		}
		if path, err := exec.LookPath(name); err == nil {
			return path
		} else if !errors.Is(err, exec.ErrNotFound) && !errors.Is(err, os.ErrNotExist) {
			t.Logf("chromium %s: %v", name, err)
		}
	}
	if os.Getenv("CHATD_TEST_STRICT") == "1" {
		t.Fatal("chromium is not installed (apt-get install -y chromium); CHATD_TEST_STRICT=1 forbids skipping")
	}
	t.Skip("chromium is not installed (apt-get install -y chromium)")
	return ""
}

// The page's server hands out the page, the SDK's modules and the API of
// the chatd node behind it.
func TestServesPageSDKAndAPI(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a chatd process")
	}
	cl := chatdtest.Start(t, chatdtest.Options{})
	up, err := url.Parse(cl.Nodes[0].URL)
	require.NoError(t, err)
	srv := httptest.NewServer(newHandler(up))
	t.Cleanup(srv.Close)
	for path, want := range map[string]string{
		"/":                `import {ChatdClient} from '/sdk/index.js';`,
		"/sdk/index.js":    `export {ChatdClient} from './rest.js';`,
		"/sdk/realtime.js": `export class RealtimeClient`,
		"/healthz":         `"node":"n1"`,
	} {
		resp, err := http.Get(srv.URL + path)
		require.NoError(t, err)
		body, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		require.NoError(t, err)
		assert.Equal(t, http.StatusOK, resp.StatusCode, path)
		assert.Contains(t, string(body), want, path)
		if strings.HasSuffix(path, ".js") {
			assert.Contains(t, resp.Header.Get("Content-Type"), "javascript", "%s: browsers load modules only with a JavaScript type", path)
		}
	}
}

// page is the example page in one tab, with the exceptions and console
// errors it logged.
type page struct {
	ctx  context.Context
	mu   sync.Mutex
	errs []string
}

func (p *page) problems() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.errs...)
}

// waitJS waits until expr is true in the page.
func (p *page) waitJS(t *testing.T, expr, what string) {
	t.Helper()
	deadline := time.Now().Add(wait)
	for {
		ok, err := chromedp.Run(p.ctx, chromedp.Evaluate[bool]("!!("+expr+")"))
		if err == nil && ok {
			return
		}
		if time.Now().After(deadline) {
			body, _ := chromedp.Run(p.ctx, chromedp.Evaluate[string](`document.body.innerText`))
			t.Fatalf("waited for %s (%s): %v\npage text:\n%s\nconsole: %q", what, expr, err, body, p.problems())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// openPage starts headless Chromium on url and records the page's
// exceptions and console errors.
func openPage(t *testing.T, chromium, url string) *page {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*wait)
	t.Cleanup(cancel)
	alloc, cancelAlloc := chromedp.NewExecAllocator(ctx,
		chromedp.ExecPath(chromium),
		chromedp.Headless,
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.NoFirstRun,
		chromedp.NoDefaultBrowserCheck,
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-dev-shm-usage", true),
		chromedp.Flag("disable-extensions", true),
		chromedp.UserDataDir(t.TempDir()),
	)
	t.Cleanup(cancelAlloc)
	tab, closeTab := chromedp.NewContext(alloc)
	t.Cleanup(closeTab)
	p := &page{ctx: tab}
	console := chromedp.Console(tab)
	go func() {
		for m, err := range console {
			if err != nil {
				return
			}
			if m.IsException() || m.Type == chromedp.ConsoleError {
				p.mu.Lock()
				p.errs = append(p.errs, m.String())
				p.mu.Unlock()
			}
		}
	}()
	require.NoError(t, chromedp.Do(tab, chromedp.Navigate(url)), "open %s", url)
	return p
}

// The page in headless Chromium signs in as alice and joins a lobby
// through the SDK; bob, a Go SDK client of the same node, gets what she
// sends, and she sees what he sends: a message round trip both ways,
// with no exception or console error in the page.
func TestPageChatsInChromium(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a chatd process and Chromium")
	}
	chromium := findChromium(t)
	cl := chatdtest.Start(t, chatdtest.Options{})
	up, err := url.Parse(cl.Nodes[0].URL)
	require.NoError(t, err)
	srv := httptest.NewServer(newHandler(up))
	t.Cleanup(srv.Close)
	ctx, cancel := context.WithTimeout(context.Background(), 3*wait)
	defer cancel()

	p := openPage(t, chromium, srv.URL+"/")
	require.NoError(t, chromedp.Do(p.ctx,
		chromedp.WaitVisible(`[data-testid="name"]`),
		chromedp.SendKeys(`[data-testid="name"]`, "alice"),
		chromedp.SetValue(`[data-testid="lobby"]`, "lounge"),
		chromedp.Click(`[data-testid="signin"] button`),
	))
	p.waitJS(t, `document.querySelector('[data-testid="status"]').textContent === 'alice in lounge-1 (node n1)'`, "alice's page joined lounge-1")
	p.waitJS(t, `!document.querySelector('[data-testid="composer"]').hidden`, "the composer shows")

	bob, err := client.New(client.Config{BaseURL: cl.Nodes[0].URL})
	require.NoError(t, err)
	require.NoError(t, bob.SignIn(ctx, "bob"))
	conn, err := bob.Connect(ctx, client.ConnOptions{})
	require.NoError(t, err)
	t.Cleanup(func() { _ = conn.Close() })
	room, err := conn.Join(ctx, "lounge")
	require.NoError(t, err)
	require.Equal(t, "lounge-1", room.ID)

	require.NoError(t, chromedp.Do(p.ctx,
		chromedp.SendKeys(`[data-testid="text"]`, "hello from the browser"),
		chromedp.Click(`[data-testid="composer"] button`),
	))
	p.waitJS(t, `[...document.querySelectorAll('[data-testid="message"][data-acked="true"]')].some(li => li.textContent === 'alice: hello from the browser')`,
		"the page's say is acked")
	var got client.Message
	deadline := time.After(wait)
	for got.Text == "" {
		select {
		case ev, ok := <-conn.Events():
			require.True(t, ok, "bob's connection ended: %v", conn.Err())
			if m, isMsg := ev.(client.MessageEvent); isMsg && m.Message.From == "alice" {
				got = m.Message
			}
		case <-deadline:
			t.Fatal("bob did not get alice's message")
		}
	}
	assert.Equal(t, "hello from the browser", got.Text)
	assert.Equal(t, "lounge-1", got.Room)

	_, err = conn.Say(ctx, room.ID, "hello from Go")
	require.NoError(t, err)
	p.waitJS(t, `[...document.querySelectorAll('[data-testid="message"]')].some(li => li.textContent === 'bob: hello from Go')`, "alice's page shows bob's message")
	texts, err := chromedp.Run(p.ctx, chromedp.Evaluate[[]string](`[...document.querySelectorAll('[data-testid="message"]')].map(li => li.textContent)`))
	require.NoError(t, err)
	assert.Equal(t, []string{"alice: hello from the browser", "bob: hello from Go"}, texts, "each message once, in order")
	assert.Empty(t, p.problems(), "the page logged no exception or console error")
}
