package ranking_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"

	"github.com/redis/go-redis/v9"

	"github.com/chatd/chatd/internal/embedded"
	"github.com/chatd/chatd/ranking"
)

// exampleRedis returns a client of CHATD_TEST_REDIS when set, else of an
// embedded server, and a func that closes both. Each example uses a prefix of
// its own, so examples can share a server.
func exampleRedis() (redis.UniversalClient, func()) {
	if addr := os.Getenv("CHATD_TEST_REDIS"); addr != "" {
		c := redis.NewClient(&redis.Options{Addr: addr})
		return c, func() { _ = c.Close() }
	}
	srv, err := embedded.Start()
	if err != nil {
		panic(err)
	}
	c := redis.NewClient(&redis.Options{Addr: srv.Addr()})
	return c, func() { _ = c.Close(); srv.Close() }
}

func examplePrefix(name string) string {
	return fmt.Sprintf("example.%s.%d", name, os.Getpid())
}

func ExampleService_Post() {
	rdb, done := exampleRedis()
	defer done()
	lb := ranking.New(rdb, ranking.Config{Prefix: examplePrefix("post")})
	ctx := context.Background()

	// zoe reaches 100 first, aaron second: zoe ranks higher, whatever the names.
	for _, p := range []struct {
		player string
		score  ranking.Score
		mode   ranking.Mode
	}{
		{"zoe", 100_000, ranking.Best},   // 100
		{"aaron", 100_000, ranking.Best}, // 100, reached later
		{"zoe", 90_000, ranking.Best},    // lower: nothing changes, zoe keeps her time
		{"mia", 60_500, ranking.Incr},    // a new player starts from 0: 60.5
		{"mia", 40_000, ranking.Incr},    // 100.5
	} {
		e, err := lb.Post(ctx, "arena", p.player, p.score, p.mode)
		if err != nil {
			panic(err)
		}
		fmt.Printf("%s %s %s -> rank %d\n", p.player, p.mode, e.Score, e.Rank)
	}
	// Output:
	// zoe best 100 -> rank 0
	// aaron best 100 -> rank 1
	// zoe best 100 -> rank 0
	// mia incr 60.5 -> rank 2
	// mia incr 100.5 -> rank 0
}

func ExampleService_Top() {
	rdb, done := exampleRedis()
	defer done()
	lb := ranking.New(rdb, ranking.Config{Prefix: examplePrefix("top")})
	ctx := context.Background()
	for i, player := range []string{"ann", "ben", "cat", "dan"} {
		if _, err := lb.Post(ctx, "quiz", player, ranking.Score(1000*(i%2)), ranking.Set); err != nil {
			panic(err)
		}
	}
	top, err := lb.Top(ctx, "quiz", 3)
	if err != nil {
		panic(err)
	}
	out, _ := json.Marshal(map[string]any{"entries": top})
	fmt.Println(string(out))
	// Output:
	// {"entries":[{"player":"ben","score":1,"rank":0},{"player":"dan","score":1,"rank":1},{"player":"ann","score":0,"rank":2}]}
}

func ExampleService_Around() {
	rdb, done := exampleRedis()
	defer done()
	lb := ranking.New(rdb, ranking.Config{Prefix: examplePrefix("around")})
	ctx := context.Background()
	for i := 1; i <= 9; i++ {
		if _, err := lb.Post(ctx, "race", fmt.Sprintf("p%d", i), ranking.Score(i*1000), ranking.Best); err != nil {
			panic(err)
		}
	}
	around, err := lb.Around(ctx, "race", "p8", 2) // clipped at the top
	if err != nil {
		panic(err)
	}
	for _, e := range around {
		fmt.Println(e.Rank, e.Player, e.Score)
	}
	_, err = lb.Around(ctx, "race", "nobody", 2)
	fmt.Println(errors.Is(err, ranking.ErrUnknownPlayer))
	// Output:
	// 0 p9 9
	// 1 p8 8
	// 2 p7 7
	// 3 p6 6
	// true
}

func ExampleService_Range() {
	rdb, done := exampleRedis()
	defer done()
	lb := ranking.New(rdb, ranking.Config{Prefix: examplePrefix("range")})
	ctx := context.Background()
	for i := 1; i <= 9; i++ {
		if _, err := lb.Post(ctx, "race", fmt.Sprintf("p%d", i), ranking.Score(i*1000), ranking.Best); err != nil {
			panic(err)
		}
	}
	min, _ := ranking.ParseScore("3")
	max, _ := ranking.ParseScore("5.5")
	es, err := lb.Range(ctx, "race", &min, &max, ranking.DefaultLimit) // both bounds inclusive
	if err != nil {
		panic(err)
	}
	for _, e := range es {
		fmt.Println(e.Rank, e.Player, e.Score)
	}
	// Output:
	// 4 p5 5
	// 5 p4 4
	// 6 p3 3
}

func ExampleService_Ranks() {
	rdb, done := exampleRedis()
	defer done()
	lb := ranking.New(rdb, ranking.Config{Prefix: examplePrefix("ranks")})
	ctx := context.Background()
	for _, p := range []string{"ann", "ben", "cat"} {
		if _, err := lb.Post(ctx, "quiz", p, 5000, ranking.Best); err != nil {
			panic(err)
		}
	}
	// One round trip, answers in the order asked, rank -1 for unknown.
	es, err := lb.Ranks(ctx, "quiz", []string{"cat", "zed", "ann"})
	if err != nil {
		panic(err)
	}
	for _, e := range es {
		fmt.Println(e.Player, e.Rank)
	}
	// Output:
	// cat 2
	// zed -1
	// ann 0
}

func ExampleParseScore() {
	for _, text := range []string{"12.5", "1.5e3", "999999999999999.999", "0.0001", "1e16", "NaN"} {
		s, err := ranking.ParseScore(text)
		if err != nil {
			fmt.Println(errors.Is(err, ranking.ErrBadScore), err)
			continue
		}
		fmt.Println(s, int64(s))
	}
	// Output:
	// 12.5 12500
	// 1500 1500000
	// 999999999999999.999 999999999999999999
	// true ranking: bad score: "0.0001" has more than 3 decimals
	// true ranking: bad score: "1e16" is out of range (at most ±1e15)
	// true ranking: bad score: "NaN" is not a number
}
