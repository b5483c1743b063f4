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
	expires := time.Now().Add(24 * time.Hour) // the tokens' expiry

	// POST /session {"user":"Misc1"} on one node: the first holder wins.
	fmt.Println("first guest:", names.Claim(ctx, "Misc1", "hid-1"))
	// The same name in any case, from another browser, on any node.
	err := names.Claim(ctx, "MISC1", "hid-2")
	fmt.Println("second guest taken:", errors.Is(err, identity.ErrNameTaken))

	// Every request of the holder is admitted (and renews the claim).
	fmt.Println("admit:", names.Admit(ctx, "Misc1", "hid-1", expires))
	holder, until, _ := names.Holder(ctx, "misc1")
	fmt.Println("holder:", holder, "for about", time.Until(until).Round(time.Minute))

	// Signing out frees the name and revokes the holder's tokens.
	fmt.Println("sign out:", names.Release(ctx, "Misc1", "hid-1", expires))
	err = names.Admit(ctx, "Misc1", "hid-1", expires)
	fmt.Println("old token signed out:", errors.Is(err, identity.ErrSignedOut))
	fmt.Println("second guest now:", names.Claim(ctx, "MISC1", "hid-2"))
	// Output:
	// first guest: <nil>
	// second guest taken: true
	// admit: <nil>
	// holder: hid-1 for about 30m0s
	// sign out: <nil>
	// old token signed out: true
	// second guest now: <nil>
}
