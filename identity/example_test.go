package identity_test

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/chatd/chatd/identity"
	"github.com/chatd/chatd/internal/embedded"
)

// exampleRDB is the Redis the example uses: CHATD_TEST_REDIS when set, else
// an embedded server (chatd's zero-config default). The tests proper run on
// real servers through redistest.
var exampleRDB redis.UniversalClient

func TestMain(m *testing.M) {
	addr := os.Getenv("CHATD_TEST_REDIS")
	closeServer := func() {}
	if addr == "" {
		e, err := embedded.Start()
		if err != nil {
			fmt.Fprintln(os.Stderr, "examples:", err)
			os.Exit(1)
		}
		addr, closeServer = e.Addr(), e.Close
	}
	rdb := redis.NewClient(&redis.Options{Addr: addr})
	exampleRDB = rdb
	code := m.Run()
	_ = rdb.Close()
	closeServer()
	os.Exit(code)
}

func ExampleRegistry_Claim() {
	ctx := context.Background()
	names := identity.New(exampleRDB, identity.Config{
		Prefix: "example." + rand.Text(),
		TTL:    func() time.Duration { return 30 * time.Minute },
	})

	// POST /session {"user":"alice"} on one node: the first session wins.
	fmt.Println("first session:", names.Claim(ctx, "alice", "sess-1"))
	// The same name from another browser, on any node, while it is held.
	err := names.Claim(ctx, "alice", "sess-2")
	fmt.Println("second session taken:", errors.Is(err, identity.ErrNameTaken))

	// Every request of the holder renews the claim (at most every TTL/4).
	fmt.Println("touch:", names.Touch(ctx, "alice", "sess-1"))
	holder, until, _ := names.Holder(ctx, "alice")
	fmt.Println("holder:", holder, "for about", until.Sub(time.Now()).Round(time.Minute))

	// Only the holder can sign out; then the name is free again.
	err = names.Release(ctx, "alice", "sess-2")
	fmt.Println("release by another:", errors.Is(err, identity.ErrNotHolder))
	fmt.Println("release by holder:", names.Release(ctx, "alice", "sess-1"))
	fmt.Println("second session now:", names.Claim(ctx, "alice", "sess-2"))
	// Output:
	// first session: <nil>
	// second session taken: true
	// touch: <nil>
	// holder: sess-1 for about 30m0s
	// release by another: true
	// release by holder: <nil>
	// second session now: <nil>
}
