package ranking

import (
	_ "embed"

	"github.com/chatd/chatd/internal/redisx"
)

var (
	//go:embed lua/board_post.lua
	postSrc    string
	postScript = redisx.NewScript("ranking.post", postSrc)

	//go:embed lua/board_ranks.lua
	ranksSrc    string
	ranksScript = redisx.NewScript("ranking.ranks", ranksSrc)

	//go:embed lua/board_around.lua
	aroundSrc    string
	aroundScript = redisx.NewScript("ranking.around", aroundSrc)
)
