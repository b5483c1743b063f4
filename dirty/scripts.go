package dirty

import (
	"context"
	_ "embed"
	"errors"

	"github.com/redis/go-redis/v9"

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

// pipelined runs fn in a pipeline; when a script of scripts was missing from
// the server's cache (a restart, SCRIPT FLUSH, a new cluster master) it loads
// them and runs the pipeline once more. fn must be idempotent.
func pipelined(ctx context.Context, rdb redis.UniversalClient, fn func(redis.Pipeliner), scripts ...*redis.Script) ([]redis.Cmder, error) {
	run := func() ([]redis.Cmder, error) {
		return rdb.Pipelined(ctx, func(pipe redis.Pipeliner) error { fn(pipe); return nil })
	}
	cmds, err := run()
	if !isNoScript(err) {
		return cmds, err
	}
	for _, s := range scripts {
		if err := s.Load(ctx, rdb).Err(); err != nil {
			return nil, err
		}
	}
	return run()
}

func isNoScript(err error) bool {
	return err != nil && (errors.Is(err, redis.ErrNoScript) || redis.HasErrorPrefix(err, "NOSCRIPT"))
}
