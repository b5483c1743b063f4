// Package deploy holds chatd's deployment files and the tests that keep them
// honest; it has no Go API.
//
//   - Dockerfile: a static chatd (CGO_ENABLED=0) in a small image, run as a
//     non-root user, with a HEALTHCHECK on /healthz.
//   - ../docker-compose.yml (at the repository root, so that `docker compose
//     up` runs there): Redis 7, three chatd nodes sharing CHATD_SECRET and
//     CHATD_ADMIN_TOKEN, nginx in front on port 8080, built from this
//     directory's Dockerfile and nginx.conf.
//   - nginx.conf: the balancer — least connections over the nodes,
//     WebSocket upgrade headers, a read timeout above the 25 s ping
//     interval, passive health checks, and no sticky sessions, because no
//     node keeps state another node needs.
//   - cluster.sh: the same topology on loopback without Docker
//     (up|down|status), processes stopped by their pids.
//
// deploy_test.go checks the compose file (parsed as YAML) and the nginx
// config (nginx -t on its loopback rendering) and runs cluster.sh;
// e2e_test.go runs three real chatd processes on a private redis-server
// behind a real nginx and checks, through the balancer only, that chat
// survives a node killed with -9 and a rolling restart.
package deploy
