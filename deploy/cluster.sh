#!/usr/bin/env bash
# cluster.sh — docker-compose.yml's topology (repository root) without Docker, on
# loopback: one redis-server, three chatd nodes and nginx (the same
# deploy/nginx.conf, rendered for loopback ports), from Debian packages
# (apt-get install redis-server nginx) and `go build ./cmd/chatd`.
#
#	deploy/cluster.sh up          build chatd, start everything, wait until ready
#	deploy/cluster.sh status      one line per process; exit 0 only if all run
#	                              and each answers on its own port as itself
#	deploy/cluster.sh down        stop everything by pid (TERM, then KILL)
#	deploy/cluster.sh nginx-conf  print the rendered nginx config
#
# Then open http://127.0.0.1:8080. Everything lives in the run directory
# (pids, logs, Redis data, nginx temp files); nothing is installed.
#
# `up` refuses to start while one of its ports is taken by anything but its
# own processes (a `go run ./cmd/chatd` on :8080, say), naming the port, and
# declares the cluster up only when redis answers as the redis-server it
# started (its process_id), each node's /healthz on its own port names that
# node, and the balancer port answers /healthz from one of the three nodes
# while nginx runs with no [emerg] in its logs.
#
# Environment (defaults in brackets):
#	CHATD_RUN_DIR      run directory [deploy/.run]
#	CHATD_LB_PORT      nginx port [8080]
#	CHATD_NODE_PORTS   the three node ports [8081 8082 8083]
#	CHATD_REDIS_PORT   redis-server port [6390]
#	CHATD_SECRET       token secret shared by the nodes [random, kept in the run dir]
#	CHATD_ADMIN_TOKEN  admin bearer token [random, kept in the run dir]
#	CHATD_BIN          a chatd binary to use instead of building one
#	CHATD_NGINX        the nginx binary [nginx on PATH, else /usr/sbin/nginx]
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(dirname "$here")
run=${CHATD_RUN_DIR:-$here/.run}
lb_port=${CHATD_LB_PORT:-8080}
read -r -a node_ports <<<"${CHATD_NODE_PORTS:-8081 8082 8083}"
redis_port=${CHATD_REDIS_PORT:-6390}

starting=
die() {
  echo "cluster.sh: $*" >&2
  [ -z "$starting" ] || echo "cluster.sh: '$0 down' stops what did start" >&2
  exit 1
}

[ "${#node_ports[@]}" -eq 3 ] || die "CHATD_NODE_PORTS must name three ports, got '${node_ports[*]}'"

nginx_bin() {
  if [ -n "${CHATD_NGINX:-}" ]; then echo "$CHATD_NGINX"; return; fi
  command -v nginx 2>/dev/null || { [ -x /usr/sbin/nginx ] && echo /usr/sbin/nginx; } || die "nginx not found: apt-get install nginx"
}

# render_nginx prints deploy/nginx.conf for loopback: node N's upstream
# becomes 127.0.0.1:<port N>, nginx listens on 127.0.0.1:<lb port>, and its
# temp files go to the run directory.
render_nginx() {
  local tmp
  tmp=$(printf '%s' "$run/nginx/tmp" | sed -e 's/[\\&|"]/\\&/g')
  sed -e "s|server chatd1:8080|server 127.0.0.1:${node_ports[0]}|" \
      -e "s|server chatd2:8080|server 127.0.0.1:${node_ports[1]}|" \
      -e "s|server chatd3:8080|server 127.0.0.1:${node_ports[2]}|" \
      -e "s|^\([[:space:]]*\)listen 8080;|\1listen 127.0.0.1:${lb_port};|" \
      -e "s|^http {\$|http {\n    client_body_temp_path \"$tmp/body\";\n    proxy_temp_path \"$tmp/proxy\";\n    fastcgi_temp_path \"$tmp/fastcgi\";\n    uwsgi_temp_path \"$tmp/uwsgi\";\n    scgi_temp_path \"$tmp/scgi\";|" \
      "$here/nginx.conf"
}

# secret NAME prints the run directory's value for NAME, making a random one
# the first time, unless the environment sets it.
secret() {
  local name=$1 value=${!1:-}
  if [ -n "$value" ]; then echo "$value"; return; fi
  if [ ! -s "$run/$name" ]; then
    (umask 077; head -c 24 /dev/urandom | od -An -tx1 | tr -d ' \n' >"$run/$name")
  fi
  cat "$run/$name"
}

# running PID: the process runs (a zombie has exited, only not yet been
# reaped by its parent).
running() {
  local state
  kill -0 "$1" 2>/dev/null || return 1
  state=$(sed -e 's/.*) //' "/proc/$1/stat" 2>/dev/null | cut -d' ' -f1)
  [ -n "$state" ] && [ "$state" != Z ]
}

# alive PIDFILE: the process in PIDFILE runs.
alive() { [ -s "$1" ] && running "$(cat "$1")"; }

# ask PORT REQUEST: send REQUEST to 127.0.0.1:PORT and print the first line
# of the answer (bash's /dev/tcp, so neither curl nor redis-cli is needed).
ask() {
  local line=
  { exec 3<>"/dev/tcp/127.0.0.1/$1"; } 2>/dev/null || return 1
  printf '%b' "$2" >&3
  IFS= read -r -t 2 line <&3 2>/dev/null || true
  exec 3<&- 3>&-
  printf '%s\n' "${line%$'\r'}"
}

# fetch PORT REQUEST: send REQUEST to 127.0.0.1:PORT and print the whole
# answer, read until the server closes the connection (at most 2 s).
fetch() {
  local resp=
  { exec 3<>"/dev/tcp/127.0.0.1/$1"; } 2>/dev/null || return 1
  printf '%b' "$2" >&3
  IFS= read -r -d '' -t 2 resp <&3 2>/dev/null || true
  exec 3<&- 3>&-
  printf '%s' "$resp"
}

# get PORT PATH: the whole answer to GET PATH on 127.0.0.1:PORT.
get() { fetch "$1" "GET $2 HTTP/1.0\r\nHost: 127.0.0.1:$1\r\nConnection: close\r\n\r\n"; }

# node_of ANSWER: the "node" of a /healthz answer that is a 200, or nothing.
node_of() {
  [[ $1 == "HTTP/1."?" 200 "* ]] || return 0
  sed -n 's/.*"node":"\([^"]*\)".*/\1/p' <<<"$1" | head -n 1
}

# node_answers PORT NAME: 127.0.0.1:PORT answers GET /healthz as chatd node NAME.
node_answers() { [ "$(node_of "$(get "$1" /healthz)")" = "$2" ]; }

# balancer_answers: the balancer port answers GET /healthz from one of the
# three nodes (not from whatever else might hold the port).
balancer_answers() {
  local node
  node=$(node_of "$(get "$lb_port" /healthz)")
  [[ $node == chatd[123] ]]
}

# nginx_answers: the balancer port is answered by nginx itself: a request
# whose Host holds a '/' gets nginx's own 400 (never passed upstream, so
# this holds while the nodes are down or stopped; it logs no error).
# On failure why_not says what the last try got.
nginx_answers() {
  local resp try
  # on a busy machine a connect or a read may fail (seen: a refused connect
  # while nginx runs, three times in a row in CI): ask for up to 3 seconds
  for try in 1 2 3 4 5 6 7 8 9 10; do
    if ! resp=$(fetch "$lb_port" "GET / HTTP/1.0\r\nHost: a/b\r\nConnection: close\r\n\r\n"); then
      why_not="connect refused"
    elif [[ $resp == "HTTP/1."?" 400 "* ]] && grep -qi '^server: nginx' <<<"${resp//$'\r'/}"; then
      return 0
    elif [ -z "$resp" ]; then
      why_not="no answer within 2 s"
    else
      why_not="answered '$(head -n 1 <<<"${resp//$'\r'/}")'"
    fi
    sleep 0.3
  done
  why_not="$why_not, 10 tries"
  return 1
}

# redis_answers: the redis port answers PING, and INFO names the pid in
# redis.pid as its process_id (not some other redis-server on the port).
redis_answers() {
  local resp pid
  [[ $(ask "$redis_port" 'PING\r\n') == +PONG ]] || return 1
  pid=$(cat "$run/redis.pid" 2>/dev/null) || return 1
  resp=$(fetch "$redis_port" 'INFO server\r\nQUIT\r\n') || return 1
  tr -d '\r' <<<"$resp" | grep -qx "process_id:$pid"
}

# ready PORT: GET /readyz on 127.0.0.1:PORT answers 200 (Redis answers the node).
ready() { [[ $(get "$1" /readyz) == "HTTP/1."?" 200 "* ]]; }

# answers NAME: NAME's port answers as NAME (see status).
answers() {
  case $1 in
    redis) redis_answers ;;
    chatd?) node_answers "$(port_of "$1")" "$1" ;;
    nginx) nginx_answers ;;
  esac
}

# port_of NAME: the port NAME listens on.
port_of() {
  case $1 in
    redis) echo "$redis_port" ;;
    chatd?) echo "${node_ports[${1#chatd} - 1]}" ;;
    nginx) echo "$lb_port" ;;
  esac
}

# emerg: the first [emerg] line of nginx's logs (its stderr, where the
# config sends the error log, and the -e startup log), if any.
emerg() { grep -h '\[emerg\]' "$run/nginx.log" "$run/nginx/error.log" 2>/dev/null | head -n 1; }

# port_taken PORT: something accepts connections on 127.0.0.1:PORT.
port_taken() {
  { exec 4<>"/dev/tcp/127.0.0.1/$1"; } 2>/dev/null || return 1
  exec 4<&- 4>&-
}

# check_ports refuses to start while a port is taken by anything but this
# run directory's own live process for it (which `up` then leaves running).
check_ports() {
  local taken=() seen=" " name port
  for name in redis chatd1 chatd2 chatd3 nginx; do
    port=$(port_of "$name")
    [[ $port =~ ^[0-9]+$ ]] && [ "$port" -ge 1 ] && [ "$port" -le 65535 ] || die "the port of $name is '$port', not a port number"
    [[ $seen != *" $port "* ]] || die "port $port is given twice (redis, the nodes and nginx need five different ports)"
    seen+="$port "
    alive "$run/$name.pid" && continue
    port_taken "$port" && taken+=("$port ($name)")
  done
  if [ "${#taken[@]}" -gt 0 ]; then
    die "port already taken on 127.0.0.1, so nothing was started: ${taken[*]}; stop what listens there (ss -ltnp) or choose other ports (CHATD_LB_PORT, CHATD_NODE_PORTS, CHATD_REDIS_PORT)"
  fi
}

# start NAME CMD... runs CMD in the background in its own session, logging
# to NAME.log, its pid in NAME.pid.
start() {
  local name=$1; shift
  if alive "$run/$name.pid"; then echo "$name already running (pid $(cat "$run/$name.pid"))"; return; fi
  setsid "$@" >"$run/$name.log" 2>&1 </dev/null &
  echo $! >"$run/$name.pid"
}

# wait_for NAME WHAT CHECK... waits up to 15 s for CHECK to succeed while
# NAME's process runs; WHAT says what was awaited, for the error.
wait_for() {
  local name=$1 what=$2 i; shift 2
  for i in $(seq 150); do
    "$@" && return 0
    alive "$run/$name.pid" || die "$name exited; see $run/$name.log: $(tail -n 3 "$run/$name.log" 2>/dev/null)"
    sleep 0.1
  done
  die "$name did not $what within 15s; see $run/$name.log"
}

# nginx_ready: nginx runs, has logged no [emerg] (a failed bind is logged at
# once, while nginx retries for a few seconds), and the balancer port
# answers /healthz from a node. An [emerg] ends the wait with its line.
nginx_ready() {
  local line
  line=$(emerg)
  [ -z "$line" ] || die "nginx failed: $line (see $run/nginx.log)"
  balancer_answers && alive "$run/nginx.pid"
}

up() {
  command -v redis-server >/dev/null || die "redis-server not found: apt-get install redis-server"
  local nginx; nginx=$(nginx_bin)
  mkdir -p "$run/redis" "$run/nginx/tmp"
  check_ports
  starting=1
  local bin=${CHATD_BIN:-}
  if [ -z "$bin" ]; then
    bin=$run/chatd
    echo "building chatd"
    (cd "$root" && CGO_ENABLED=0 go build -o "$bin" ./cmd/chatd)
  fi
  local secret_v admin_v
  secret_v=$(secret CHATD_SECRET)
  admin_v=$(secret CHATD_ADMIN_TOKEN)

  start redis redis-server --bind 127.0.0.1 --port "$redis_port" --dir "$run/redis" \
    --appendonly yes --save "" --daemonize no
  wait_for redis "answer PING on 127.0.0.1:$redis_port as itself (INFO process_id)" redis_answers
  local i

  for i in 1 2 3; do
    # Secrets through the environment, not flags, so ps does not show them.
    start "chatd$i" env CHATD_SECRET="$secret_v" CHATD_ADMIN_TOKEN="$admin_v" \
      "$bin" --addr "127.0.0.1:${node_ports[i-1]}" \
      --redis "redis://127.0.0.1:$redis_port/0" --node-id "chatd$i" --prefix "${CHATD_PREFIX:-chatd}"
  done
  for i in 1 2 3; do
    wait_for "chatd$i" "answer GET /healthz as chatd$i on 127.0.0.1:${node_ports[i-1]}" node_answers "${node_ports[i-1]}" "chatd$i"
    wait_for "chatd$i" "answer GET /readyz on 127.0.0.1:${node_ports[i-1]}" ready "${node_ports[i-1]}"
  done

  render_nginx >"$run/nginx/nginx.conf"
  alive "$run/nginx.pid" || : >"$run/nginx/error.log"
  "$nginx" -t -q -p "$run/nginx/" -e "$run/nginx/error.log" -c "$run/nginx/nginx.conf" \
    -g "pid \"$run/nginx/nginx.pid\";" || die "nginx -t failed on $run/nginx/nginx.conf"
  start nginx "$nginx" -p "$run/nginx/" -e "$run/nginx/error.log" -c "$run/nginx/nginx.conf" \
    -g "daemon off; pid \"$run/nginx/nginx.pid\";"
  wait_for nginx "answer GET /healthz on 127.0.0.1:$lb_port from chatd1, chatd2 or chatd3" nginx_ready

  echo "chatd is up: http://127.0.0.1:$lb_port (3 nodes, redis 127.0.0.1:$redis_port)"
  echo "admin token: $admin_v (also in $run/CHATD_ADMIN_TOKEN)"
}

# stop NAME sends TERM to the pid in NAME.pid, waits up to 15 s, then KILLs.
stop() {
  local name=$1 pidfile=$run/$1.pid pid i
  [ -s "$pidfile" ] || return 0
  pid=$(cat "$pidfile")
  if running "$pid"; then
    kill -TERM "$pid" 2>/dev/null || true
    for i in $(seq 150); do running "$pid" || break; sleep 0.1; done
    if running "$pid"; then
      echo "$name (pid $pid) ignored TERM for 15s; killing"
      kill -KILL "$pid" 2>/dev/null || true
    fi
    echo "stopped $name (pid $pid)"
  fi
  rm -f "$pidfile"
}

down() {
  # The balancer first, so no client is sent to a stopping node; Redis last,
  # so the nodes can release their seats while they drain.
  stop nginx
  stop chatd1 & stop chatd2 & stop chatd3 & wait
  stop redis
}

# status prints one line per process: "NAME running (pid N) on PORT" when
# the process runs and answers on its own port as itself, "NAME not
# answering …" when it runs but does not, "NAME stopped" otherwise. It
# exits 0 only if all five are running.
status() {
  local ok=0 name port why_not
  for name in redis chatd1 chatd2 chatd3 nginx; do
    port=$(port_of "$name") why_not=
    if ! alive "$run/$name.pid"; then
      echo "$name stopped"
      ok=1
    elif answers "$name"; then
      echo "$name running (pid $(cat "$run/$name.pid")) on 127.0.0.1:$port"
    else
      echo "$name not answering on 127.0.0.1:$port as itself (pid $(cat "$run/$name.pid") runs${why_not:+; last try: $why_not}; see $run/$name.log)"
      ok=1
    fi
  done
  return $ok
}

case "${1:-}" in
  up) up ;;
  down) down ;;
  status) status ;;
  nginx-conf) render_nginx ;;
  *) echo "usage: $0 up|down|status|nginx-conf" >&2; exit 2 ;;
esac
