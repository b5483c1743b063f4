#!/bin/sh
# A REST game client in curl: sign in, join a lobby, say something, poll,
# post a leaderboard score, read the board, buy an item, leave the room,
# sign out, printing every request and its answer. Needs only sh, curl and
# sed (no jq).
#
#   CHATD_URL=http://localhost:8080 CHATD_ADMIN_TOKEN=admin-secret sh examples/curl/walkthrough.sh
#
# CHATD_URL          the node or balancer (default http://localhost:8080)
# CHATD_USER         the guest name to sign in as (default player1)
# CHATD_LOBBY        the lobby to join (default general)
# CHATD_BOARD        the leaderboard (default arena)
# CHATD_ADMIN_TOKEN  the node's --admin-token: with it the script stocks a
#                    potion and grants the player 50 coins before buying
#                    (admin calls); without it the purchase is skipped.
#
# It exits non-zero at the first error answer, after printing it. The
# contract is docs/PROTOCOL.md.
set -eu

BASE=${CHATD_URL:-http://localhost:8080}
API=${BASE%/}/api/v1
NAME=${CHATD_USER:-player1}
LOBBY=${CHATD_LOBBY:-general}
BOARD=${CHATD_BOARD:-arena}
ADMIN=${CHATD_ADMIN_TOKEN:-}
TOKEN=

OUT=$(mktemp)
trap 'rm -f "$OUT"' EXIT

step=0
say_step() { step=$((step + 1)); printf '\n== %d. %s\n' "$step" "$1"; }

# call METHOD PATH [BODY] [EXTRA CURL ARGUMENTS…]: sends the request with
# the session token (or, for admin calls, AUTH=admin), prints it and the
# answer, and leaves the answer in $ANSWER. An HTTP status of 400 or more
# ends the script.
call() {
  method=$1 path=$2 body=${3:-}
  shift 2
  if [ $# -gt 0 ]; then shift; fi
  bearer=$TOKEN
  [ "${AUTH:-}" = admin ] && bearer=$ADMIN
  printf '%s %s%s%s\n' "$method" "/api/v1$path" "${body:+ $body}" "${*:+ $*}"
  if [ -n "$body" ]; then
    code=$(curl -sS -o "$OUT" -w '%{http_code}' -X "$method" -H 'Content-Type: application/json' \
      ${bearer:+-H "Authorization: Bearer $bearer"} "$@" --data "$body" "$API$path")
  else
    code=$(curl -sS -o "$OUT" -w '%{http_code}' -X "$method" \
      ${bearer:+-H "Authorization: Bearer $bearer"} "$@" "$API$path")
  fi
  ANSWER=$(cat "$OUT")
  printf '%s %s\n' "$code" "$ANSWER"
  if [ "$code" -ge 400 ]; then
    printf 'walkthrough: %s %s answered %s\n' "$method" "$path" "$code" >&2
    exit 1
  fi
}

# field NAME: the (last) string value of "NAME" in $ANSWER (enough for the
# flat answers read here; use jq for anything more).
field() {
  v=$(printf '%s' "$ANSWER" | sed -n "s/.*\"$1\":\"\([^\"]*\)\".*/\1/p")
  if [ -z "$v" ]; then
    printf 'walkthrough: no "%s" in the answer\n' "$1" >&2
    exit 1
  fi
  printf '%s' "$v"
}

say_step "sign in as $NAME (a guest name, held while the session is active)"
call POST /session "{\"user\":\"$NAME\"}"
TOKEN=$(field token)

say_step "join lobby $LOBBY: a seat in its first room with a free seat"
call POST "/lobbies/$LOBBY/join"
ROOM=$(field id)

say_step "say something in $ROOM"
call POST "/rooms/$ROOM/messages" '{"text":"hello from curl"}'

say_step "poll: the first poll of a session returns every section"
call GET "/poll?wait=0"

say_step "post a score to leaderboard $BOARD"
call POST "/leaderboards/$BOARD/scores" "{\"player\":\"$NAME\",\"score\":1234}"

say_step "read the top of $BOARD"
call GET "/leaderboards/$BOARD/top?limit=10"

if [ -n "$ADMIN" ]; then
  say_step "admin: stock 100 potions at 10 coins and grant $NAME 50 coins"
  AUTH=admin call POST /shop/items '{"item":"potion","stock":100,"price":10}'
  AUTH=admin call POST /wallet/grant "{\"user\":\"$NAME\",\"amount\":50}"

  say_step "buy a potion, with an Idempotency-Key"
  KEY="walkthrough-$$-$(date +%s)"
  call POST /shop/buy '{"item":"potion","qty":1}' -H "Idempotency-Key: $KEY"

  say_step "the same purchase again with the same key: the same answer, nothing bought twice"
  call POST /shop/buy '{"item":"potion","qty":1}' -H "Idempotency-Key: $KEY"
else
  say_step "buy: skipped (set CHATD_ADMIN_TOKEN to stock an item and grant coins first)"
  call GET /shop/items
fi

say_step "the wallet"
call GET /wallet

say_step "leave $ROOM: the seat is free at once (else its lease runs out)"
call POST "/rooms/$ROOM/leave"

say_step "sign out: the name is free again"
call DELETE /session
