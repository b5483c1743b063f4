package lock_test

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"go.uber.org/goleak"

	"github.com/chatd/chatd/internal/embedded"
	"github.com/chatd/chatd/lock"
)

// exampleRDB is the Redis the examples use: CHATD_TEST_REDIS when set, else
// an embedded server (miniredis with a real TTL clock, chatd's zero-config
// default). The tests proper run on real servers through redistest.
var exampleRDB redis.UniversalClient

func TestMain(m *testing.M) {
	stop := setUpExamples()
	code := m.Run()
	stop()
	if code == 0 {
		// No goroutine of the package (watchdogs, abandoned calls) may
		// outlive its test. redistest's servers live as long as the binary.
		err := goleak.Find(
			goleak.IgnoreAnyFunction("github.com/chatd/chatd/internal/redistest.(*Server).start.func1"),
			goleak.IgnoreAnyFunction("os/exec.(*Cmd).writerDescriptor.func1"),
		)
		if err != nil {
			fmt.Fprintln(os.Stderr, "goleak:", err)
			code = 1
		}
	}
	os.Exit(code)
}

func setUpExamples() (stop func()) {
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
	rdb := redis.NewClient(&redis.Options{Addr: addr, ReadTimeout: 2 * time.Second})
	exampleRDB = rdb
	return func() {
		_ = rdb.Close()
		closeServer()
	}
}

// examplePrefix returns a key prefix of the example's own, so its fences
// start at 1 on a shared server.
func examplePrefix() string { return "example." + rand.Text() }

func ExampleClient_Acquire() {
	ctx := context.Background()
	// rdb is a go-redis client with a finite ReadTimeout.
	rdb := exampleRDB
	locks := lock.New(rdb, lock.Config{Prefix: examplePrefix()})

	l, err := locks.Acquire(ctx, "lobby:general", 10*time.Second, &lock.Options{Wait: 5 * time.Second})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer l.Release(ctx)
	fmt.Println("holding", l.Name(), "with fence", l.Fence())

	// A second owner does not get it while it is held.
	_, err = locks.TryAcquire(ctx, "lobby:general", 10*time.Second)
	fmt.Println(errors.Is(err, lock.ErrNotObtained))
	// Output:
	// holding lobby:general with fence 1
	// true
}

func ExampleClient_Do() {
	ctx := context.Background()
	locks := lock.New(exampleRDB, lock.Config{Prefix: examplePrefix()})

	for i := 0; i < 2; i++ {
		err := locks.Do(ctx, "lobby:general", 10*time.Second, &lock.Options{Watchdog: true},
			func(ctx context.Context, l *lock.Lock) error {
				fmt.Println("creating a room under fence", l.Fence())
				return nil
			})
		if err != nil {
			fmt.Println(err)
		}
	}
	// Output:
	// creating a room under fence 1
	// creating a room under fence 2
}

func ExampleClient_FencedHSet() {
	ctx := context.Background()
	prefix := examplePrefix()
	locks := lock.New(exampleRDB, lock.Config{Prefix: prefix})
	// The protected key shares the lock's hash tag {lobby:general}.
	room := prefix + ":{lobby:general}:room:1"

	// A holds the lock for 50ms, then stalls (say, a long GC pause).
	a, err := locks.Acquire(ctx, "lobby:general", 50*time.Millisecond, nil)
	if err != nil {
		fmt.Println(err)
		return
	}
	// B waits until A's lock expires, takes it and writes.
	b, err := locks.Acquire(ctx, "lobby:general", 10*time.Second, &lock.Options{Wait: 5 * time.Second})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer b.Release(ctx)
	fmt.Println(locks.FencedHSet(ctx, "lobby:general", b.Fence(), room, "creator", "B"))

	// A resumes and writes: refused, B's write stands.
	err = locks.FencedHSet(ctx, "lobby:general", a.Fence(), room, "creator", "A")
	fmt.Println(errors.Is(err, lock.ErrFenceStale))
	fmt.Println(errors.Is(a.Release(ctx), lock.ErrNotHeld))
	fmt.Println(exampleRDB.HGet(ctx, room, "creator").Val())
	// Output:
	// <nil>
	// true
	// true
	// B
}

func ExampleLock_Refresh() {
	ctx := context.Background()
	locks := lock.New(exampleRDB, lock.Config{Prefix: examplePrefix()})

	l, err := locks.TryAcquire(ctx, "board:daily", time.Second)
	if err != nil {
		fmt.Println(err)
		return
	}
	if err := l.Refresh(ctx, time.Minute); err != nil {
		fmt.Println(err)
	}
	ttl, err := l.TTL(ctx)
	fmt.Println(ttl > time.Second, err)
	fmt.Println(l.Release(ctx))
	ttl, err = l.TTL(ctx) // 0 once no longer held
	fmt.Println(ttl, err)
	// Output:
	// true <nil>
	// <nil>
	// 0s <nil>
}

// A script of your own checks the fence atomically with its writes: prepend
// FenceCheckLua and pass the fence key in KEYS, the fence in ARGV.
func Example_fenceCheckLua() {
	ctx := context.Background()
	prefix := examplePrefix()
	locks := lock.New(exampleRDB, lock.Config{Prefix: prefix})
	createRoom := redis.NewScript(lock.FenceCheckLua + `
-- KEYS[1] fence key, KEYS[2] lobby room counter; ARGV[1] fence
if not fence_is_current(KEYS[1], ARGV[1]) then return -1 end
return redis.call('INCR', KEYS[2])`)

	_, fenceKey := locks.Keys("lobby:general")
	keys := []string{fenceKey, prefix + ":{lobby:general}:seq"}
	err := locks.Do(ctx, "lobby:general", 10*time.Second, nil, func(ctx context.Context, l *lock.Lock) error {
		seq, err := createRoom.Run(ctx, exampleRDB, keys, l.Fence()).Int()
		fmt.Println("room", seq)
		return err
	})
	fmt.Println(err)
	// Output:
	// room 1
	// <nil>
}
