package client_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"time"

	"github.com/chatd/chatd/client"
	"github.com/chatd/chatd/errcode"
)

// The common path of a chat client: sign in, open the realtime connection,
// join a lobby, say something, and handle events until the connection ends
// for good. Reconnects to the other node, and the resume of the room, are
// the Conn's business: the loop only sees them as events.
func Example() {
	ctx := context.Background()
	c, err := client.New(client.Config{NodeURLs: []string{"http://10.0.0.1:8080", "http://10.0.0.2:8080"}})
	if err != nil {
		log.Fatal(err)
	}
	if err := c.SignIn(ctx, "alice"); errors.Is(err, client.ErrNameTaken) {
		log.Fatal("somebody else is alice right now")
	} else if err != nil {
		log.Fatal(err)
	}
	conn, err := c.Connect(ctx, client.ConnOptions{})
	if err != nil {
		log.Fatal(err)
	}
	defer conn.Close()
	room, err := conn.Join(ctx, "general")
	if err != nil {
		log.Fatal(err)
	}
	if _, err := conn.Say(ctx, room.ID, "hello"); err != nil {
		log.Print(err)
	}
	for ev := range conn.Events() {
		switch ev := ev.(type) {
		case client.MessageEvent:
			fmt.Printf("%s: %s\n", ev.Message.From, ev.Message.Text)
		case client.DisconnectedEvent:
			if ev.Final {
				log.Printf("gone for good: %v", ev.Err) // ErrKicked, ErrBanned, ErrSessionEnded
			}
		case client.ResumeGapEvent:
			log.Printf("%s: messages may be missing after %s", ev.Room, ev.After)
		}
	}
}

// A game client's loop: long polls, each change handed over typed.
func ExampleClient_Poll() {
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	c, _ := client.New(client.Config{BaseURL: "http://chat.example.com", Token: "…"})
	err := c.Poll(ctx, client.PollOptions{Wait: 25 * time.Second}, func(ctx context.Context, r *client.PollResult) error {
		for room, msgs := range r.Messages {
			fmt.Println(room, len(msgs), "new messages")
		}
		if r.Wallet != nil {
			fmt.Println("balance", r.Wallet.Balance)
		}
		return nil
	})
	if errors.Is(err, client.ErrBadToken) {
		log.Print("sign in again")
	}
}

// A purchase that survives a lost answer: the key is kept with the order,
// so even a restart of the client repeats the same purchase, never a second
// one.
func ExampleClient_Buy() {
	ctx := context.Background()
	c, _ := client.New(client.Config{BaseURL: "http://chat.example.com", Token: "…"})
	w, err := c.Buy(ctx, "sword", 1, client.WithIdempotencyKey("order-7f3a"))
	switch {
	case errors.Is(err, client.ErrInsufficientFunds):
		fmt.Println("not enough coins")
	case err != nil:
		log.Print(err)
	default:
		fmt.Println("swords:", w.Items["sword"])
	}
}

// Errors carry the documented code: match them with the sentinels, with
// errcode, or read the fields.
func ExampleError() {
	var err error = &client.Error{Code: errcode.SoldOut, Status: 409, Message: "0 swords in stock, 1 asked for", Op: "POST /api/v1/shop/buy"}
	err = fmt.Errorf("buying: %w", err)
	fmt.Println(errors.Is(err, client.ErrSoldOut), errors.Is(err, client.ErrConflict))
	fmt.Println(errcode.Is(err, errcode.SoldOut))
	var e *client.Error
	if errors.As(err, &e) {
		fmt.Println(e.Status, e.Code)
	}
	fmt.Println(err)
	// Output:
	// true false
	// true
	// 409 sold_out
	// buying: chatd: POST /api/v1/shop/buy: 409: sold_out: 0 swords in stock, 1 asked for
}

// How a connection ended: a ban is ErrBanned over HTTP and as a close
// code alike.
func ExampleCloseError() {
	var err error = &client.CloseError{Reason: client.CloseBanned, Text: "spam"}
	fmt.Println(errors.Is(err, client.ErrBanned), errors.Is(err, client.ErrKicked))
	fmt.Println(client.CloseBanned.Final(), client.CloseKicked.Final(), client.CloseDraining)
	fmt.Println(err)
	// Output:
	// true false
	// true false node draining
	// chatd: websocket closed: 4003 banned: spam
}

// Full jitter: the n-th retry waits a random time up to Min·2ⁿ, capped.
func ExampleBackoff() {
	b := client.Backoff{Min: 100 * time.Millisecond, Max: time.Second}
	for n := range 6 {
		d := b.Delay(n)
		fmt.Println(n, d <= min(100*time.Millisecond<<n, time.Second))
	}
	// Output:
	// 0 true
	// 1 true
	// 2 true
	// 3 true
	// 4 true
	// 5 true
}
