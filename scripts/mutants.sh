#!/usr/bin/env bash
# Mutation check of the tests that guard a claim: each mutant below breaks the
# code in a small, deliberate way, in a temporary copy of the work tree, and
# the named tests must then FAIL. A mutant whose tests still pass means the
# tests cannot see that bug.
#
#   scripts/mutants.sh                    # every mutant
#   scripts/mutants.sh names-accept-utf8  # only the named ones
#   scripts/mutants.sh -l                 # list them
#   CONTROL=0 scripts/mutants.sh          # skip the run on the unmutated copy
#
# Each test is first run on the unmutated copy (the control: it must pass),
# then with the mutant applied (it must fail, and not for want of compiling).
# Tests run strict (CHATD_TEST_STRICT=1): a test that would skip for want of
# redis-server fails, and the mutant is reported as not checked. The work
# tree itself is never touched: the copy is made from `git ls-files` (as the
# files are on disk now) under /tmp and removed at the end.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)

list=0
if [ "${1:-}" = "-l" ]; then list=1; shift; fi
want=("$@")
control=${CONTROL:-1}
export CHATD_TEST_STRICT=1

copy=$(mktemp -d /tmp/chatd-mutants.XXXXXX)
trap 'rm -rf "$copy"' EXIT
git ls-files -z | tar --null -T - --ignore-failed-read -cf - 2>/dev/null | tar -xf - -C "$copy"

killed=0 survived=0 broken=0
declare -A controlled=()

# runtests PKG RUN LOG: go test of the tests matching RUN in PKG, in the copy.
runtests() {
	(cd "$copy" && go test -count=1 -timeout 5m -run "$2" "./$1/") >"$3" 2>&1
}

# mutant NAME PKG RUN < PATCH: apply the unified diff PATCH (paths a/… b/…)
# to the copy, run the tests matching RUN in PKG, expect them to fail, and
# take the patch back out.
mutant() {
	local name=$1 pkg=$2 run=$3 patch log
	patch=$(cat)
	if [ $list = 1 ]; then printf '%-34s %-10s %s\n' "$name" "$pkg" "$run"; return; fi
	if [ ${#want[@]} -gt 0 ] && ! printf '%s\n' "${want[@]}" | grep -qxF "$name"; then return; fi
	log=$copy/.mutant-$name.log
	if [ "$control" = 1 ] && [ -z "${controlled[$pkg $run]:-}" ]; then
		if ! runtests "$pkg" "$run" "$log"; then
			echo "ERROR    $name: ./$pkg -run '$run' fails WITHOUT the mutant:"; tail -20 "$log"
			broken=$((broken + 1)); return
		fi
		controlled[$pkg $run]=1
	fi
	if ! printf '%s\n' "$patch" | patch -s -p1 -d "$copy" --no-backup-if-mismatch; then
		echo "ERROR    $name: the patch no longer applies (the code moved: update the mutant)"
		broken=$((broken + 1)); return
	fi
	if runtests "$pkg" "$run" "$log"; then
		echo "SURVIVED $name: ./$pkg -run '$run' passes with the mutant"
		survived=$((survived + 1))
	elif grep -q -e '\[build failed\]' -e '\[setup failed\]' "$log"; then
		echo "ERROR    $name: the mutant does not compile"; grep -v '^ok' "$log" | head -10
		broken=$((broken + 1))
	elif grep -q -e 'CHATD_TEST_STRICT=1' "$log"; then
		echo "ERROR    $name: not checked (no redis-server?)"; grep 'CHATD_TEST_STRICT' "$log" | head -3
		broken=$((broken + 1))
	else
		echo "killed   $name: $(grep -m1 -e '^    --- FAIL' -e '^--- FAIL' "$log" | sed 's/^ *//')"
		killed=$((killed + 1))
	fi
	printf '%s\n' "$patch" | patch -s -R -p1 -d "$copy" --no-backup-if-mismatch
}

# ---- names: FuzzNames seeds and TestEveryByte against the documented rules

mutant names-accept-utf8 names 'TestEveryByte|FuzzNames' <<'PATCH'
--- a/names/names.go
+++ b/names/names.go
@@ -73,5 +73,5 @@
 		c := s[i]
 		switch {
-		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9', c == '_', c == '-':
+		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9', c == '_', c == '-', c >= 0x80:
 		case c == '.' && dot:
 		default:
PATCH

mutant names-accept-slash names 'TestEveryByte|FuzzNames' <<'PATCH'
--- a/names/names.go
+++ b/names/names.go
@@ -73,5 +73,5 @@
 		c := s[i]
 		switch {
-		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9', c == '_', c == '-':
+		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9', c == '_', c == '-', c == '/':
 		case c == '.' && dot:
 		default:
PATCH

mutant names-user-accepts-dot names 'TestEveryByte|FuzzNames' <<'PATCH'
--- a/names/names.go
+++ b/names/names.go
@@ -23,5 +23,5 @@
 
 // User checks a user name: 1–32 of [A-Za-z0-9_-].
-func User(s string) error { return check("user", s, MaxUser, false) }
+func User(s string) error { return check("user", s, MaxUser, true) }
 
 // Lobby checks a lobby name: 1–64 of [A-Za-z0-9_.-].
PATCH

mutant names-room-13-digits names 'TestEveryByte|FuzzNames' <<'PATCH'
--- a/names/names.go
+++ b/names/names.go
@@ -54,5 +54,5 @@
 		i--
 	}
-	if i <= 0 || i == len(s)-1 || s[i] != '-' || s[i+1] == '0' || len(s)-i-1 > 12 {
+	if i <= 0 || i == len(s)-1 || s[i] != '-' || s[i+1] == '0' || len(s)-i-1 > 13 {
 		return fmt.Errorf("%w: room %q must be a lobby name, '-' and a room number", ErrBadName, clip(s))
 	}
PATCH

mutant names-range-A-to-underscore names 'TestEveryByte|FuzzNames' <<'PATCH'
--- a/names/names.go
+++ b/names/names.go
@@ -73,5 +73,5 @@
 		c := s[i]
 		switch {
-		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9', c == '_', c == '-':
+		case c >= 'a' && c <= 'z', c >= 'A' && c <= '_', c >= '0' && c <= '9', c == '_', c == '-':
 		case c == '.' && dot:
 		default:
PATCH

# ---- lock: the watchdog keeps a lock past its ttl

mutant lock-watchdog-too-slow lock '^TestWatchdog$' <<'PATCH'
--- a/lock/lock.go
+++ b/lock/lock.go
@@ -154,5 +154,5 @@
 func (l *Lock) watchdog(ctx context.Context, lastOK time.Time) {
 	defer close(l.dogDone)
-	every := max(l.ttl/3, time.Millisecond)
+	every := max(l.ttl*3, time.Millisecond)
 	tick := time.NewTicker(every)
 	defer tick.Stop()
PATCH

# ---- ratelimit: a bucket key lives until the bucket would be full, plus slack

mutant ratelimit-ttl-slack-only ratelimit '^TestAllow$/bucket_key' <<'PATCH'
--- a/ratelimit/lua/bucket_take.lua
+++ b/ratelimit/lua/bucket_take.lua
@@ -43,4 +43,4 @@
 redis.call('HSET', KEYS[1], 'tokens', string.format('%.17g', tokens), 'ts', string.format('%d', ts))
 -- Once full again the bucket is the same as no bucket: let it go then.
-redis.call('PEXPIRE', KEYS[1], math.ceil((burst - tokens) * 1000 / rate) + slack)
+redis.call('PEXPIRE', KEYS[1], slack)
 return {allowed, retry}
PATCH

mutant ratelimit-ttl-whole-burst ratelimit '^TestAllow$/bucket_key' <<'PATCH'
--- a/ratelimit/lua/bucket_take.lua
+++ b/ratelimit/lua/bucket_take.lua
@@ -43,4 +43,4 @@
 redis.call('HSET', KEYS[1], 'tokens', string.format('%.17g', tokens), 'ts', string.format('%d', ts))
 -- Once full again the bucket is the same as no bucket: let it go then.
-redis.call('PEXPIRE', KEYS[1], math.ceil((burst - tokens) * 1000 / rate) + slack)
+redis.call('PEXPIRE', KEYS[1], math.ceil(burst * 1000 / rate) + slack)
 return {allowed, retry}
PATCH

# ---- dirty: every session key carries the session TTL

mutant dirty-cursor-never-expires dirty '^TestSessionExpiry$' <<'PATCH'
--- a/dirty/cursor.go
+++ b/dirty/cursor.go
@@ -46,5 +46,4 @@
 	_, err := t.rdb.TxPipelined(ctx, func(pipe redis.Pipeliner) error {
 		pipe.HSet(ctx, key, cur)
-		pipe.PExpire(ctx, key, t.ttl)
 		return nil
 	})
PATCH

mutant dirty-user-sessions-never-expire dirty '^TestSessionExpiry$' <<'PATCH'
--- a/dirty/tracker.go
+++ b/dirty/tracker.go
@@ -130,5 +130,4 @@
 		pipe.ZRemRangeByScore(ctx, us, "-inf", strconv.FormatInt(now.UnixMilli(), 10))
 		pipe.ZAdd(ctx, us, redis.Z{Score: exp, Member: session})
-		pipe.PExpire(ctx, us, t.ttl)
 		pipe.ZAdd(ctx, t.k.liveSessions(), redis.Z{Score: exp, Member: session})
 	}, openScript)
PATCH

# ---- dirty: a clean poll is one command (every command the client sends)

mutant dirty-open-never-throttled dirty '^TestCleanPollIsOneCommand$' <<'PATCH'
--- a/dirty/tracker.go
+++ b/dirty/tracker.go
@@ -119,5 +119,5 @@
 	}
 	now := t.now()
-	if t.renewed.fresh(now, session, user) {
+	if false && t.renewed.fresh(now, session, user) {
 		return false, nil
 	}
PATCH

mutant dirty-take-extra-exists dirty '^TestCleanPollIsOneCommand$' <<'PATCH'
--- a/dirty/tracker.go
+++ b/dirty/tracker.go
@@ -218,4 +218,5 @@
 		return 0, fmt.Errorf("dirty: take: %w", err)
 	}
+	t.rdb.Exists(ctx, t.k.owner(session))
 	m, err := t.take(ctx, session, "", 0)
 	if err != nil {
PATCH

# ---- dirty: a take's retry (go-redis, after a late reply) answers what the first copy took

mutant dirty-take-no-record dirty '^TestRetriedTakeLosesNoMark$' <<'PATCH'
--- a/dirty/lua/session_wait.lua
+++ b/dirty/lua/session_wait.lua
@@ -20,10 +20,6 @@
 -- ARGV[3] record TTL (ms)
 -- returns the bitmap (now deleted) when dirty, or the one this call took
 -- before; false when clean (registered when ARGV[1] is not "")
-local taken = redis.call('GET', KEYS[3])
-if taken then
-  return taken
-end
 local m = redis.call('GETDEL', KEYS[1])
 if m then
   redis.call('SET', KEYS[3], m, 'PX', ARGV[3])
PATCH

# ---- web: a poll's cost is every command the node's client sends for it

mutant poll-extra-get web '^TestCleanPollIsOneRedisCommand$' <<'PATCH'
--- a/realtime/poll.go
+++ b/realtime/poll.go
@@ -27,6 +27,7 @@
 	if _, err := n.dirty.Open(ctx, session, user); err != nil {
 		return PollResult{}, err
 	}
+	n.rdb.Get(ctx, "mutant-unrelated-key")
 	if n.renewed.due(session, n.cfg.Now(), n.lease()/3) {
 		n.renewREST(ctx, user, session)
 	}
PATCH

# ---- web: a burst of board posts marks the followers coalesced, per node

mutant marks-no-coalescing web '^TestBoardBurstMarksFollowersCoalescedAndLosesNone$' <<'PATCH'
--- a/realtime/marks.go
+++ b/realtime/marks.go
@@ -20,6 +20,8 @@
 
 // do runs mark(bits) for key now, unless one runs: then bits wait for it.
 func (co *coalescer) do(key string, bits dirty.Mask, mark func(context.Context, dirty.Mask)) {
+	co.n.goRun(func(ctx context.Context) { mark(ctx, bits) })
+	return
 	co.mu.Lock()
 	if co.pending == nil {
 		co.pending = map[string]*dirty.Mask{}
PATCH

# ---- web: a long poll parks (registers in Redis) and is woken by the mark

mutant longpoll-loops-takes web '^TestPollShopBoardsAndSeenOnRedisCluster$' <<'PATCH'
--- a/realtime/poll.go
+++ b/realtime/poll.go
@@ -41,7 +41,9 @@
 			case <-wctx.Done():
 			}
 		}()
-		mask, err = n.dirty.Wait(wctx, session, wait)
+		for end := time.Now().Add(wait); err == nil && mask == 0 && time.Now().Before(end); time.Sleep(50 * time.Millisecond) {
+			mask, err = n.dirty.Take(wctx, session)
+		}
 		cancel()
 		if err != nil && wctx.Err() != nil && ctx.Err() == nil {
 			mask, err = n.dirty.Take(ctx, session)
PATCH

# ---- deploy: a say refused with a code other than not_seated or rate_limited fails the chat

mutant say-refused-busy deploy '^TestE2EChatThroughBalancer$' <<'PATCH'
--- a/realtime/say.go
+++ b/realtime/say.go
@@ -39,6 +39,9 @@
 }
 
 func (n *Node) send(ctx context.Context, user, room, text string) (rooms.Message, error) {
+	if time.Now().UnixNano()/1000%4 == 0 {
+		return rooms.Message{}, rooms.ErrBusy
+	}
 	res, err := n.rooms.Send(ctx, room, user, text, n.sendOptions())
 	if err != nil {
 		return rooms.Message{}, err
PATCH

# ---- web: no acked message is lost across a pub/sub kill and a Redis restart

mutant hub-no-gap-fill web '^TestNoAckedMessageLostAcrossPubSubKillAndRedisRestart$' <<'PATCH'
--- a/realtime/hub.go
+++ b/realtime/hub.go
@@ -327,7 +327,7 @@
 	if gone || !r.feed.Hold() {
 		return // a fill is running; it reads to the end of the stream
 	}
-	r.hub.n.goRun(r.gapFill)
+	r.feed.GoLive()
 }
 
 // gapFill reads the room's stream after the last delivered id, retrying
PATCH

# ---- deploy: a REST long poll parked behind the balancer is woken by a say

mutant longpoll-loops-takes-e2e deploy '^TestE2EChatThroughBalancer$' <<'PATCH'
--- a/realtime/poll.go
+++ b/realtime/poll.go
@@ -41,7 +41,9 @@
 			case <-wctx.Done():
 			}
 		}()
-		mask, err = n.dirty.Wait(wctx, session, wait)
+		for end := time.Now().Add(wait); err == nil && mask == 0 && time.Now().Before(end); time.Sleep(50 * time.Millisecond) {
+			mask, err = n.dirty.Take(wctx, session)
+		}
 		cancel()
 		if err != nil && wctx.Err() != nil && ctx.Err() == nil {
 			mask, err = n.dirty.Take(ctx, session)
PATCH

# ---- deploy: closing one of a user's two connections leaves the other's seat

mutant disconnect-leaves-seat deploy '^TestE2ETwoConnectionsOnTwoNodes$' <<'PATCH'
--- a/realtime/session.go
+++ b/realtime/session.go
@@ -52,7 +52,8 @@
 }
 
 func (n *Node) detach(ctx context.Context, room string, c *Client) {
-	freed, err := n.rooms.Detach(ctx, room, c.user, c.id)
+	err := n.rooms.Leave(ctx, room, c.user)
+	freed := err == nil
 	if err != nil && !errors.Is(err, rooms.ErrNotSeated) && !errors.Is(err, rooms.ErrUnknownRoom) {
 		n.log.Debug("detach", "room", room, "user", c.user, "err", err)
 		return
PATCH

# ----

[ $list = 1 ] && exit 0
echo "mutants: $killed killed, $survived survived, $broken not checked"
[ $survived -eq 0 ] && [ $broken -eq 0 ]
