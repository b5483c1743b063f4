package sessions

import "context"

// RenewConns runs one tick of the connection leases' renewal, for the
// tests of package sessions_test.
func (s *Sessions) RenewConns(ctx context.Context) { s.renewConns(ctx) }
