package identity

import (
	"context"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/chatd/chatd/internal/redistest"
)

// BenchmarkConnsAdmit admits (and releases) one connection of an address
// that holds n leases of live runs, as a node does for each WebSocket from
// a carrier's NAT or a proxy: the admission's cost in Redis should not
// grow with n (conns_admit.lua's mark). A private server; ns/op is the
// round trip of one Admit and one Release, zrange/op the full reads of the
// address's leases per admission.
//
//	go test -run '^$' -bench BenchmarkConnsAdmit ./identity/
func BenchmarkConnsAdmit(b *testing.B) {
	for _, n := range []int{10, 1000, 6000} {
		b.Run(fmt.Sprintf("leases=%d", n), func(b *testing.B) {
			r := redistest.Own(b, redistest.Options{})
			ctx := context.Background()
			live := func() []string { return []string{"c-runa", "c-runb"} }
			c := NewConns(r.Client, ConnsConfig{Prefix: r.Prefix, Lease: fixed(time.Minute), Live: live})
			const addr = "203.0.113.50"
			for i := range n {
				ok, err := c.Admit(ctx, addr, "c-runa-"+strconv.Itoa(i), 0)
				require.NoError(b, err)
				require.True(b, ok)
			}
			reads := r.Server.CommandCalls(b, "zrange")
			b.ResetTimer()
			for i := 0; b.Loop(); i++ {
				id := "c-runb-" + strconv.Itoa(i)
				ok, err := c.Admit(ctx, addr, id, n+10)
				if err != nil || !ok {
					b.Fatalf("admit %s: %v %v", id, ok, err)
				}
				if err := c.Release(ctx, addr, id); err != nil {
					b.Fatal(err)
				}
			}
			b.StopTimer()
			b.ReportMetric(float64(r.Server.CommandCalls(b, "zrange")-reads)/float64(b.N), "zrange/op")
		})
	}
}
