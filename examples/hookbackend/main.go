// Command hookbackend is an example of the application's backend behind
// chatd's hooks (docs/PROTOCOL.md, "Hooks"), with the standard library
// only: it verifies every request's signature and timestamp itself (the
// recipe a team copies into its own service), then answers
//
//	/connect  allows everyone but users named banned…; tells hello the
//	          user's tier (vip for --members, else free)
//	/join     lobbies vip-* are for --members only
//	/publish  refuses a message holding a --banned word
//	/match    hands out a (fake) game server per match, the same answer
//	          for a retried match (by its Idempotency-Key)
//	/rpc      roll: {"sides": n} → {"roll": 1..n}
//
// Run it beside chatd:
//
//	HOOK_SECRET=$(openssl rand -hex 16) hookbackend --addr 127.0.0.1:9000 &
//	chatd --hook-url http://127.0.0.1:9000 --hook-secret "$HOOK_SECRET" …
package main

import (
	"flag"
	"log"
	"net/http"
	"os"
	"strings"
	"time"
)

func main() {
	addr := flag.String("addr", "127.0.0.1:9000", "listen address")
	banned := flag.String("banned", "darn,heck", "comma-separated banned words")
	members := flag.String("members", "", "comma-separated users who may join vip-* lobbies")
	flag.Parse()
	secret := os.Getenv("HOOK_SECRET")
	if len(secret) < 16 {
		log.Fatal("set HOOK_SECRET (at least 16 characters; chatd's --hook-secret)")
	}
	b := &Backend{Secrets: strings.Split(secret, ","), Banned: split(*banned), Members: split(*members), GameServers: "games.example"}
	srv := &http.Server{Addr: *addr, Handler: b, ReadHeaderTimeout: 5 * time.Second}
	log.Printf("hookbackend on %s", *addr)
	log.Fatal(srv.ListenAndServe())
}

func split(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}
