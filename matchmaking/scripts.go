package matchmaking

import (
	_ "embed" // Lua sources

	"github.com/redis/go-redis/v9"

	"github.com/chatd/chatd/lock"
)

var (
	//go:embed lua/ticket_submit.lua
	ticketSubmitSrc string
	//go:embed lua/ticket_cancel.lua
	ticketCancelSrc string
	//go:embed lua/queue_pick.lua
	queuePickSrc string
	//go:embed lua/match_form.lua
	matchFormSrc string
	//go:embed lua/party_accept.lua
	partyAcceptSrc string
	//go:embed lua/party_expire.lua
	partyExpireSrc string
)

var (
	ticketSubmitScript = redis.NewScript(ticketSubmitSrc)
	ticketCancelScript = redis.NewScript(ticketCancelSrc)
	queuePickScript    = redis.NewScript(queuePickSrc)
	partyAcceptScript  = redis.NewScript(partyAcceptSrc)
	partyExpireScript  = redis.NewScript(partyExpireSrc)
	// matchFormScript checks the queue lock's fence in the same script as
	// its writes: lock.FenceCheckLua defines fence_is_current.
	matchFormScript = redis.NewScript(lock.FenceCheckLua + matchFormSrc)
)
