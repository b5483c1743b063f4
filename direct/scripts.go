package direct

import (
	_ "embed" // Lua sources

	"github.com/chatd/chatd/internal/redisx"
	"github.com/chatd/chatd/ratelimit"
)

var (
	//go:embed lua/conversation_open.lua
	conversationOpenSrc string
	//go:embed lua/message_send.lua
	messageSendSrc string
	//go:embed lua/read_mark.lua
	readMarkSrc string
	//go:embed lua/message_remove.lua
	messageRemoveSrc string
	//go:embed lua/blocks_change.lua
	blocksChangeSrc string
)

var (
	conversationOpenScript = redisx.NewScript("direct.conversation_open", conversationOpenSrc)
	messageSendScript      = redisx.NewScript("direct.message_send", ratelimit.BucketLua+messageSendSrc) // the sender's token bucket
	readMarkScript         = redisx.NewScript("direct.read_mark", readMarkSrc)
	messageRemoveScript    = redisx.NewScript("direct.message_remove", redisx.CallRecordLua+messageRemoveSrc)
	blocksChangeScript     = redisx.NewScript("direct.blocks_change", blocksChangeSrc)
)
