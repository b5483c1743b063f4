// Command gobot is a chat bot built on chatd's Go SDK (package client):
// it signs in as a guest, joins a lobby over the realtime connection and
// answers commands in its room — "!ping" with "pong", "!roll" with a
// number from 1 to 6 ("!roll 20": 1 to 20), "!help" with the list.
//
//	go run ./examples/gobot -url http://localhost:8080 -lobby general
//
// Give -url several times, comma-separated, to spread over nodes without
// a balancer: the SDK moves to the next one when its node goes away, and
// resumes the room without a gap. Ctrl-C signs the bot out, so its name
// is free again at once.
package main

import (
	"cmp"
	"context"
	"flag"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"os/signal"
	"strings"
	"syscall"
)

func main() {
	url := flag.String("url", cmp.Or(os.Getenv("CHATD_URL"), "http://localhost:8080"), "chatd node(s) or balancer, comma-separated (env CHATD_URL)")
	name := flag.String("name", "bot", "the bot's guest name")
	lobby := flag.String("lobby", "general", "the lobby to join")
	flag.Parse()

	log := slog.New(slog.NewTextHandler(os.Stderr, nil))
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	err := runBot(ctx, botConfig{
		URLs:  strings.Split(*url, ","),
		Name:  *name,
		Lobby: *lobby,
		Roll:  func(n int) int { return 1 + rand.IntN(n) },
		Log:   log,
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, "gobot:", err)
		os.Exit(1)
	}
}
