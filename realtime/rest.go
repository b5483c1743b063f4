package realtime

import (
	"sync"
	"time"
)

// restState is what this node knows of the REST sessions that polled it:
// their rooms (so its presence claim for a user covers them) and when their
// seats were last renewed (so a clean poll stays one Redis command). Chat
// and Polls share it.
type restState struct {
	sessions restSessions
	renewed  renewals
}

// restSessions remembers the REST sessions that polled this node within a
// lease, with their rooms, so that this node's presence claim for a user
// covers them too (a closing WebSocket of the same user does not make
// her look offline).
type restSessions struct {
	mu sync.Mutex
	m  map[string]map[string]restSeen // user → session → rooms
}

type restSeen struct {
	rooms []string
	at    time.Time
	guest bool
}

func (r *restSessions) put(user, session string, rs []string, at time.Time, guest bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.m == nil {
		r.m = map[string]map[string]restSeen{}
	}
	if at.IsZero() {
		return
	}
	m := r.m[user]
	if m == nil {
		m = map[string]restSeen{}
		r.m[user] = m
	}
	m[session] = restSeen{rs, at, guest}
}

// of returns the rooms of user's live REST sessions here, and whether it
// has any.
func (r *restSessions) of(user string, now time.Time, lease time.Duration) ([]string, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []string
	live := false
	for sid, s := range r.m[user] {
		if now.Sub(s.at) > lease {
			delete(r.m[user], sid)
			continue
		}
		live = true
		out = append(out, s.rooms...)
	}
	if len(r.m[user]) == 0 {
		delete(r.m, user)
	}
	return out, live
}

// guest reports whether one of user's REST sessions here is a guest's.
func (r *restSessions) guest(user string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, s := range r.m[user] {
		if s.guest {
			return true
		}
	}
	return false
}

// all returns the rooms of every user with a live REST session here,
// forgetting the lapsed ones.
func (r *restSessions) all(now time.Time, lease time.Duration) map[string][]string {
	r.mu.Lock()
	users := make([]string, 0, len(r.m))
	for u := range r.m {
		users = append(users, u)
	}
	r.mu.Unlock()
	out := map[string][]string{}
	for _, u := range users {
		if rs, ok := r.of(u, now, lease); ok {
			out[u] = rs
		}
	}
	return out
}

// renewals throttles the seat and presence renewals polls trigger: a
// session's seats are renewed by this node at most once per third of the
// lease, so a clean poll stays one Redis command. It keeps when each session
// was last renewed, not when the next renewal is due, so that a shorter
// lease (seat.lease_seconds lowered) applies to the very next poll.
type renewals struct {
	mu   sync.Mutex
	last map[string]time.Time
}

func (r *renewals) forget(sid string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.last, sid)
}

func (r *renewals) due(sid string, now time.Time, every time.Duration) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.last == nil {
		r.last = map[string]time.Time{}
	}
	if last, ok := r.last[sid]; ok && !now.Before(last) && now.Sub(last) < every {
		return false
	}
	if len(r.last) > 100_000 {
		// an entry at least `every` old is due anyway: dropping it changes nothing
		for k, t := range r.last {
			if now.Sub(t) >= every {
				delete(r.last, k)
			}
		}
	}
	r.last[sid] = now
	return true
}
