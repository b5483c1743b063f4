package rooms

import (
	"context"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/chatd/chatd/internal/redisx"

	"github.com/chatd/chatd/names"
)

// Attach names what holds a seat: one WebSocket connection or one REST
// session of the seat's user that is "in the room". A seat belongs to its
// user and lives while at least one of its attachments does.
type Attach struct {
	// ID identifies the attachment among the user's: opaque to this
	// package, chosen by the caller, 1 to 64 bytes of [A-Za-z0-9_:.-]
	// (say "ws:node1:42" or "rest:<session>").
	ID string
	// REST is true for a REST session, false for a WebSocket; a room with
	// a REST attachment reports SendResult.HasREST.
	REST bool
	// Run, for a WebSocket (REST false), binds the attachment to the run
	// of the node that holds it (1 to 64 bytes of [A-Za-z0-9_.-]): it then
	// lives while that run's lease in the lobby does, which KeepRun renews
	// for all of the run's attachments at once, and ends with it. Empty:
	// the attachment has a lease of its own, renewed by Renew.
	Run string
}

// Attachment is one attachment of a user's seat in a room, as Renew takes
// them.
type Attachment struct {
	Room string // room id "{lobby}-{seq}"
	User string
	ID   string // Attach.ID
}

// maxAttachID is the longest attachment id.
const maxAttachID = 64

// checkAttachID returns ErrBadAttachment unless id is 1 to 64 bytes of
// [A-Za-z0-9_:.-].
func checkAttachID(id string) error {
	if id == "" || len(id) > maxAttachID {
		return fmt.Errorf("%w: %.80q", ErrBadAttachment, id)
	}
	for i := 0; i < len(id); i++ {
		c := id[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '_' || c == ':' || c == '.' || c == '-') {
			return fmt.Errorf("%w: %.80q", ErrBadAttachment, id)
		}
	}
	return nil
}

func (a Attach) check() error {
	if err := checkAttachID(a.ID); err != nil {
		return err
	}
	if a.Run != "" && !a.REST {
		return checkRun(a.Run)
	}
	return nil
}

// checkRun returns ErrBadAttachment unless run is 1 to 64 bytes of
// [A-Za-z0-9_.-] (no ':', '@' or ' ': the scripts use them as separators).
func checkRun(run string) error {
	if run == "" || len(run) > maxAttachID {
		return fmt.Errorf("%w: run %.80q", ErrBadAttachment, run)
	}
	for i := 0; i < len(run); i++ {
		c := run[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '_' || c == '.' || c == '-') {
			return fmt.Errorf("%w: run %.80q", ErrBadAttachment, run)
		}
	}
	return nil
}

// kind is the attachment's kind in a seat script's triples: "rest", "ws",
// or "run:<run>:<hold expiry ms>" for one bound to a run (lua/lobby_lib.lua).
func (a Attach) kind(hold time.Time) string {
	switch {
	case a.REST:
		return "rest"
	case a.Run != "":
		return "run:" + a.Run + ":" + ms(hold)
	}
	return "ws"
}

// Detach removes the attachment attID from user's seat in the room, as a
// compare-and-delete in one script, and drops the user's expired
// attachments with it. When no live attachment is left the seat is freed
// exactly as by Leave ("left" published) and freed is true; while another
// attachment holds the seat it stays, its lease now the latest of the
// remaining attachments'. Detaching an attachment that is not recorded
// there (detached already, reaped, never attached, or the user's seat is in
// another room) changes nothing and returns freed false, nil: it never
// frees a seat that something else holds. A seat whose lease was shortened
// so may be swept up to one lease after it expires (the sweeper's index
// keeps the earlier due time), but it counts as gone from its expiry on. It
// returns ErrUnknownRoom,
// ErrBadAttachment, names.ErrBadName, and Redis errors.
func (s *Seats) Detach(ctx context.Context, roomID, user, attID string) (freed bool, err error) {
	lobby, seq, err := ParseRoom(roomID)
	if err == nil {
		err = names.User(user)
	}
	if err == nil {
		err = checkAttachID(attID)
	}
	if err == nil {
		var v []int64
		v, err = s.runLobby(ctx, seatDetachScript, lobby, user, seq, attID).Int64Slice()
		switch {
		case err != nil:
		case len(v) != 2 && len(v) != 6:
			err = errUnexpectedReply
		case v[0] == -1:
			err = ErrUnknownRoom
		default:
			if v[1] == 1 {
				s.retire(ctx, lobby)
			}
			if c, ok := countOfInts(lobby, v[2:]); ok {
				s.lobbies.indexCounts(ctx, c)
			}
			return v[0] == 1, nil
		}
	}
	return false, fmt.Errorf("rooms: detach %s from %s as %s: %w", clip(attID), roomID, user, err)
}

// lobbyKeys are KEYS[1..14] of every seat script (see lua/lobby_lib.lua).
func (s *base) lobbyKeys(lobby string) []string {
	return []string{
		membersKey(s.ks, lobby), leasesKey(s.ks, lobby), attsKey(s.ks, lobby), attIDsKey(s.ks, lobby),
		restKey(s.ks, lobby), roomsKey(s.ks, lobby), openKey(s.ks, lobby), openCapKey(s.ks, lobby),
		seqKey(s.ks, lobby), recordsKey(s.ks, lobby), s.fenceKey(lobby), verKey(s.ks, lobby),
		runsKey(s.ks, lobby), runAttsKey(s.ks, lobby),
	}
}

// lobbyArgs are ARGV[1..7] of every seat script (see lua/lobby_lib.lua).
func (s *base) lobbyArgs(lobby string) []any {
	now := s.now()
	return []any{ms(now), ms(now.Add(s.leaseDur())), s.capNow(), lobby, channelPrefix(s.ks, lobby),
		s.publish, s.idleTTL.Milliseconds()}
}

// runLobby runs a seat script on lobby with extra ARGV after the common ones.
func (s *base) runLobby(ctx context.Context, script *redis.Script, lobby string, extra ...any) *redis.Cmd {
	return redisx.Run(ctx, s.rdb, script, s.lobbyKeys(lobby), append(s.lobbyArgs(lobby), extra...)...)
}

// register puts a lobby that just got its first seat into the sweeper's
// index. It runs after the seat script's reply, never in the same
// pipeline: on Redis Cluster the index may live on another shard, and the
// order against retire's ZREM is what keeps a seated lobby indexed.
func (s *Seats) register(ctx context.Context, lobby string) {
	z := redis.Z{Score: float64(s.now().UnixMilli()), Member: lobby}
	if err := s.rdb.ZAddNX(ctx, lobbiesKey(s.ks), z).Err(); err != nil {
		s.m.counterErrors.Inc() // the next Renew in this lobby registers it
	}
}

// retire drops lobbies whose seat scripts found them idle from the
// sweeper's index, so lobbies joined once and left are not swept forever.
// It cannot be atomic with the scripts (the index is outside the lobbies'
// slot), so it removes first and then looks at each lobby's users: a lobby
// that got a seat meanwhile is put back. Either that look sees the seat, or
// the seat's script ran after the ZREM and its register comes later still:
// a lobby with a seat always ends up indexed.
func (s *Seats) retire(ctx context.Context, lobbies ...string) {
	if len(lobbies) == 0 {
		return
	}
	members := make([]any, len(lobbies))
	for i, l := range lobbies {
		members[i] = l
	}
	if err := s.rdb.ZRem(ctx, lobbiesKey(s.ks), members...).Err(); err != nil {
		s.m.counterErrors.Inc() // still indexed: the next sweep retires it
		return
	}
	pipe := s.rdb.Pipeline()
	exists := make([]*redis.IntCmd, len(lobbies))
	for i, l := range lobbies {
		exists[i] = pipe.Exists(ctx, membersKey(s.ks, l))
	}
	_, _ = pipe.Exec(ctx) // errors are read per command below
	now := float64(s.now().UnixMilli())
	var back []redis.Z
	for i, l := range lobbies {
		if n, err := exists[i].Result(); err != nil || n > 0 {
			back = append(back, redis.Z{Score: now, Member: l})
		}
	}
	if len(back) > 0 {
		if err := s.rdb.ZAddNX(ctx, lobbiesKey(s.ks), back...).Err(); err != nil {
			s.m.counterErrors.Inc()
		}
	}
}
