package ranking

import (
	_ "embed"

	"github.com/redis/go-redis/v9"
)

var (
	//go:embed lua/board_post.lua
	postSrc    string
	postScript = redis.NewScript(postSrc)

	//go:embed lua/board_ranks.lua
	ranksSrc    string
	ranksScript = redis.NewScript(ranksSrc)

	//go:embed lua/board_around.lua
	aroundSrc    string
	aroundScript = redis.NewScript(aroundSrc)
)
