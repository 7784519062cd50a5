package httpguard

// What the gRPC listener needs of the one Budget every listener shares
// (server.RecvBudget): gRPC has read a connection's bytes before they
// can be counted, so they are counted unconditionally and the caller is
// told when it must give them back.

// Charge counts n bytes already read by who (a gRPC connection) and
// reports whether who must give back what it holds: the budget is past
// what is not kept for small callers (its total less the reserve) and
// who holds more than a fair share of that (divided among those holding
// bytes), or who holds more than its per-client share. Those under their
// fair share are never told to, so a hog cannot starve a small caller;
// and gRPC's holders are cut before they fill the reserve, which the
// HTTP listeners' small bodies take (Budget). Cut only past the total,
// four identities' partial gRPC messages, each connection under its
// fair share, kept the budget full, and another identity's small HTTP
// bodies were refused 429 until the receive timeout (the thirty-fourth
// hostile pass's probes, re-run).
func (b *Budget) Charge(who string, n int64) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.used += n
	b.by[who] += n
	held := b.by[who]
	if held > b.perClient {
		return true
	}
	limit := b.total - b.reserve
	return b.used > limit && held > limit/int64(len(b.by))
}

// Release gives back n bytes of who's (Charge).
func (b *Budget) Release(who string, n int64) {
	if n > 0 {
		b.give(who, n)
	}
}

// Used is the number of bytes held, all listeners together.
func (b *Budget) Used() int64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.used
}
