package shop

import (
	"context"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"github.com/chatd/chatd/internal/redistest"
)

// buyFunc is either purchase path.
type buyFunc func(s *Shop, ctx context.Context, user, item string, qty int64, idemKey string) (Wallet, error)

// paths are both purchase paths, so every behaviour is checked on each.
var paths = []struct {
	name string
	buy  buyFunc
}{
	{"watch", (*Shop).Buy},
	{"lua", (*Shop).BuyLua},
}

// nodes returns n Shops over r, each with its own client, as n chatd nodes
// would have.
func nodes(t *testing.T, r *redistest.Redis, n int, cfg Config) []*Shop {
	t.Helper()
	cfg.Prefix = r.Prefix
	if cfg.Registerer == nil {
		cfg.Registerer = prometheus.NewRegistry()
	}
	out := make([]*Shop, n)
	for i := range out {
		out[i] = New(r.NewClient(t), cfg)
	}
	return out
}

// grant gives user amount coins or fails the test.
func grant(t *testing.T, s *Shop, user string, amount int64) {
	t.Helper()
	_, err := s.Grant(context.Background(), user, amount)
	require.NoError(t, err)
}
