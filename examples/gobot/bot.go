package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"time"

	"github.com/chatd/chatd/client"
)

// reply returns the bot's answer to a chat line, and false when the line
// is not a command for it. roll(n) returns a number from 1 to n.
//
//	!ping       pong
//	!roll       a number from 1 to 6
//	!roll 20    a number from 1 to 20 (2–1000 sides)
//	!help       the commands
func reply(text string, roll func(n int) int) (string, bool) {
	f := strings.Fields(text)
	if len(f) == 0 {
		return "", false
	}
	switch strings.ToLower(f[0]) {
	case "!ping":
		return "pong", true
	case "!roll":
		sides := 6
		if len(f) > 1 {
			n, err := strconv.Atoi(f[1])
			if err != nil || n < 2 || n > 1000 {
				return "usage: !roll [sides], sides from 2 to 1000", true
			}
			sides = n
		}
		return strconv.Itoa(roll(sides)), true
	case "!help":
		return "commands: !ping, !roll [sides], !help", true
	}
	return "", false
}

// botConfig is what a bot needs to run.
type botConfig struct {
	URLs  []string // chatd nodes (or one balancer)
	Name  string   // the bot's guest name
	Lobby string   // the lobby it joins
	Roll  func(n int) int
	Log   *slog.Logger
	// Ready, if set, is called with the room once the bot listens.
	Ready func(room string)
}

// runBot signs in, joins the lobby over the realtime connection and
// answers commands in its room until ctx ends; then it closes the
// connection and signs out, so that its name is free again at once. It
// returns nil when ctx ended, or why the connection ended for good (a
// kick, a ban).
func runBot(ctx context.Context, cfg botConfig) error {
	c, err := client.New(client.Config{NodeURLs: cfg.URLs, Logger: cfg.Log})
	if err != nil {
		return err
	}
	if err := c.SignIn(ctx, cfg.Name); err != nil {
		return fmt.Errorf("sign in as %s: %w", cfg.Name, err)
	}
	defer func() {
		// ctx is over by now: sign out on a short context of its own.
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		if err := c.SignOut(sctx); err != nil {
			cfg.Log.Warn("sign out", "err", err)
		}
	}()
	conn, err := c.Connect(ctx, client.ConnOptions{})
	if err != nil {
		return fmt.Errorf("connect: %w", err)
	}
	defer conn.Close()
	room, err := conn.Join(ctx, cfg.Lobby)
	if err != nil {
		return fmt.Errorf("join %s: %w", cfg.Lobby, err)
	}
	// The join replays the room's latest messages: answer only what comes
	// after the newest one now, so a restarted bot does not answer old
	// commands again.
	var seen string
	if last, err := c.History(ctx, room.ID, client.HistoryOptions{Limit: 1}); err != nil {
		return fmt.Errorf("history of %s: %w", room.ID, err)
	} else if len(last) > 0 {
		seen = last[0].ID
	}
	cfg.Log.Info("listening", "room", room.ID, "node", conn.Node())
	if cfg.Ready != nil {
		cfg.Ready(room.ID)
	}
	for {
		select {
		case <-ctx.Done():
			return nil
		case ev, ok := <-conn.Events():
			if !ok {
				if err := conn.Err(); err != nil && !errors.Is(err, client.ErrClosed) {
					return err
				}
				return nil
			}
			// Message ids sort in send order as strings: ids up to the
			// newest before the join are old. The bot's own lines are
			// skipped too.
			m, isMsg := ev.(client.MessageEvent)
			if !isMsg || m.Message.Room != room.ID || m.Message.From == c.User() || m.Message.ID <= seen {
				continue
			}
			answer, ok := reply(m.Message.Text, cfg.Roll)
			if !ok {
				continue
			}
			if _, err := conn.Say(ctx, room.ID, answer); err != nil {
				cfg.Log.Warn("say", "room", room.ID, "err", err) // rate_limited, muted, …: keep listening
			}
		}
	}
}
