package dirty

import (
	_ "embed"

	"github.com/chatd/chatd/internal/redisx"
)

var (
	//go:embed lua/session_open.lua
	openSrc    string
	openScript = redisx.NewScript("dirty.session_open", openSrc)

	//go:embed lua/session_mark.lua
	markSrc    string
	markScript = redisx.NewScript("dirty.session_mark", markSrc)

	//go:embed lua/index_add.lua
	indexSrc    string
	indexScript = redisx.NewScript("dirty.index_add", indexSrc)

	//go:embed lua/followers_add.lua
	followersSrc    string
	followersScript = redisx.NewScript("dirty.followers_add", followersSrc)

	//go:embed lua/session_wait.lua
	waitSrc    string
	waitScript = redisx.NewScript("dirty.session_wait", waitSrc)
)
