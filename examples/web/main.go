// Command web serves index.html, a one-page chat client built on chatd's
// JavaScript SDK, next to a chatd node:
//
//	go run ./examples/web -chatd http://localhost:8080   # then open http://localhost:8090/
//
// The page imports the SDK's ES modules as they are (no build step) from
// /sdk/, served from package github.com/chatd/chatd/sdk/js, which embeds
// them. Everything else — /api/v1/… and the /ws WebSocket — goes to the
// chatd node (or balancer) through a reverse proxy, so the page talks to
// its own origin: chatd sends no CORS headers, and it accepts a WebSocket
// whose Origin names the host it was asked for, which the proxy passes on.
// (A page served from chatd's own origin could use it directly; one on
// another origin would also need --allowed-origins and a CORS proxy for
// the REST calls.)
package main

import (
	"cmp"
	_ "embed"
	"flag"
	"fmt"
	"log"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"time"

	jssdk "github.com/chatd/chatd/sdk/js"
)

//go:embed index.html
var indexHTML []byte

// newHandler serves the page at /, the SDK at /sdk/, and proxies every
// other path to the chatd node at upstream.
func newHandler(upstream *url.URL) http.Handler {
	proxy := &httputil.ReverseProxy{
		Rewrite: func(r *httputil.ProxyRequest) {
			r.SetURL(upstream)
			r.Out.Host = r.In.Host // keep the page's host: chatd checks the WebSocket's Origin against it
		},
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /{$}", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		w.Header().Set("Cache-Control", "no-cache")
		_, _ = w.Write(indexHTML)
	})
	mux.Handle("GET /sdk/", http.StripPrefix("/sdk/", http.FileServerFS(jssdk.FS())))
	mux.Handle("/", proxy)
	return mux
}

func main() {
	addr := flag.String("addr", "127.0.0.1:8090", "address to serve the page on")
	chatd := flag.String("chatd", cmp.Or(os.Getenv("CHATD_URL"), "http://localhost:8080"), "the chatd node or balancer (env CHATD_URL)")
	flag.Parse()
	up, err := url.Parse(*chatd)
	if err != nil || (up.Scheme != "http" && up.Scheme != "https") || up.Host == "" {
		fmt.Fprintf(os.Stderr, "web: -chatd must be an http(s) URL, got %q\n", *chatd)
		os.Exit(2)
	}
	srv := &http.Server{Addr: *addr, Handler: newHandler(up), ReadHeaderTimeout: 10 * time.Second}
	log.Printf("open http://%s/ (chatd at %s)", *addr, up)
	log.Fatal(srv.ListenAndServe())
}
