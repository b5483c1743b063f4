package main

import (
	"context"
	"errors"
	"net"
	"strings"

	"github.com/redis/go-redis/v9"
)

// clusterFollower makes a go-redis ClusterClient follow a failover at once.
//
// go-redis reloads its slot map (CLUSTER SLOTS) on a MOVED or ASK reply, on
// READONLY, and otherwise only when the map is older than
// ClusterOptions.ClusterStateReloadInterval (60 s by default). A master that
// dies answers nothing — no MOVED ever comes — so after its replica is
// promoted the client keeps routing that master's slots to the dead address
// (connection refused, or dial timeouts when the host is gone) until the
// interval runs out: a minute of failed writes to a third of the keys after a
// failover the cluster itself finished in seconds.
//
// As a hook on every node client (ClusterClient.OnNewNode), it asks for a
// reload (ClusterClient.ReloadState: asynchronous, coalesced by go-redis to
// one CLUSTER SLOTS in flight and at most one more per 200 ms) whenever a node
// fails to dial, fails on the network, or answers CLUSTERDOWN or TRYAGAIN.
// The next command (go-redis's own retry, or the caller's) then routes by the
// promoted replica. Pub/sub connections dial through the same hook, so the
// bus's reconnect also finds the new master.
type clusterFollower struct{ cc *redis.ClusterClient }

var _ redis.Hook = clusterFollower{}

// DialHook reloads the slot map when a node cannot be dialed.
func (f clusterFollower) DialHook(next redis.DialHook) redis.DialHook {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		cn, err := next(ctx, network, addr)
		if err != nil {
			f.cc.ReloadState(ctx)
		}
		return cn, err
	}
}

// ProcessHook reloads the slot map when a command fails as if its node were
// gone.
func (f clusterFollower) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		err := next(ctx, cmd)
		if nodeGone(err) {
			f.cc.ReloadState(ctx)
		}
		return err
	}
}

// ProcessPipelineHook reloads the slot map when a pipeline (or a script run
// in one) fails as if its node were gone.
func (f clusterFollower) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		err := next(ctx, cmds)
		if nodeGone(err) {
			f.cc.ReloadState(ctx)
		}
		return err
	}
}

// nodeGone reports whether err says the node may no longer serve its slots:
// anything but a reply from the server (a network error or timeout), or a
// CLUSTERDOWN or TRYAGAIN reply. redis.Nil and a caller's cancellation say
// nothing about the node.
func nodeGone(err error) bool {
	if err == nil || errors.Is(err, redis.Nil) || errors.Is(err, context.Canceled) {
		return false
	}
	var reply redis.Error
	if errors.As(err, &reply) {
		msg := reply.Error()
		return strings.HasPrefix(msg, "CLUSTERDOWN") || strings.HasPrefix(msg, "TRYAGAIN")
	}
	return true
}

// newClusterClient returns a ClusterClient for o that follows failovers (see
// clusterFollower).
func newClusterClient(o *redis.ClusterOptions) *redis.ClusterClient {
	cc := redis.NewClusterClient(o)
	f := clusterFollower{cc}
	// Node clients are made lazily, on the first command; this runs first.
	cc.OnNewNode(func(node *redis.Client) { node.AddHook(f) })
	return cc
}
