package realtime

import "github.com/chatd/chatd/settings"

// The live settings the core reads (docs/PROTOCOL.md, "Live settings").
const (
	settingMOTD             = settings.MOTD
	settingMaxLength        = settings.MessageMaxLength
	settingRate             = settings.RateMessagesPerSecond
	settingLease            = settings.SeatLeaseSeconds
	settingNewBoardsPerIP   = settings.NewBoardsPerIPPerMin
	settingScorePostsPerMin = settings.ScorePostsPerUserPerMin
	boardCapsOn             = settings.NewBoardsPerUserPerMin
)
