package httpguard

import (
	"io"
	"net/http"
	"sync"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/classifierd/classifierd/server"
)

// Defaults of --max-body-bytes-in-flight and its per-client share: a
// request body costs about ten times its size while its call runs
// (vanguard's copy, the decoded messages), so 32 MiB of bodies is some
// 350 MB at the peak instead of the 1.3 GB 32 Routes of 3.8 MB cost.
const (
	DefaultBodyBudget          = 32 << 20
	DefaultBodyBudgetPerClient = 16 << 20
)

// Budget bounds the request bytes the HTTP/JSON listener holds at once,
// in all and per caller (identity, or peer host when anonymous): a body is
// counted as it is read and until its request is answered, and the read
// stops with RESOURCE_EXHAUSTED at the chunk that would go past either
// bound. Without it each request is bounded (--max-recv-bytes) but their
// sum is not.
//
// The last quarter of total is a reserve for small callers: while others
// hold bodies, a caller may take bytes past three quarters of total only
// while it holds at most a sixteenth of total (2 MiB of the default 32).
// Without it two identities at their 16 MiB shares, holding stalled
// bodies, filled the budget and every other caller got 429 until their
// bodies timed out (the seventh hostile pass: bob refused 40 times in
// 40); now they fill three quarters between them and the others' small
// bodies go through the reserve. Filling the reserve too takes four more
// identities, each with its body in flight.
type Budget struct {
	mu               sync.Mutex
	total, perClient int64
	// reserve is the end of total kept for callers holding at most
	// small.
	reserve, small int64
	used           int64
	by             map[string]int64
}

// NewBudget bounds bodies to total bytes in all and perClient per caller,
// keeping a quarter of total for callers that hold little (Budget).
func NewBudget(total, perClient int64) *Budget {
	return &Budget{total: total, perClient: perClient, reserve: total / 4, small: max(total/16, budgetChunk), by: map[string]int64{}}
}

// take counts n more bytes of who's, false (and nothing counted) past a
// bound: total, who's share, or the reserve while others hold bytes and
// who holds more than small.
func (b *Budget) take(who string, n int64) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	mine := b.by[who] + n
	if b.used+n > b.total || mine > b.perClient {
		return false
	}
	if b.used+n > b.total-b.reserve && mine > b.small && b.othersHold(who) {
		return false
	}
	b.used += n
	b.by[who] += n
	return true
}

// othersHold reports whether a caller other than who holds bytes; b.mu
// is held. A caller alone may use the reserve: no one is kept out.
func (b *Budget) othersHold(who string) bool {
	n := len(b.by)
	if _, ok := b.by[who]; ok {
		n--
	}
	return n > 0
}

// give returns n bytes of who's.
func (b *Budget) give(who string, n int64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.used -= n
	if b.by[who] -= n; b.by[who] <= 0 {
		delete(b.by, who)
	}
}

// errBodyBudget is a body refused because the bodies in flight fill the
// budget: the client should retry later (429).
var errBodyBudget = status.Error(codes.ResourceExhausted, "too many request bytes in flight (--max-body-bytes-in-flight): retry later")

// budgetChunk is the most read before the budget is asked for it.
const budgetChunk = 32 << 10

// budgetReader reads r counting what it reads in b; taken is the total to
// give back once the request is answered.
type budgetReader struct {
	r     io.Reader
	b     *Budget
	who   string
	taken int64
}

func (br *budgetReader) Read(p []byte) (int, error) {
	if len(p) > budgetChunk {
		p = p[:budgetChunk]
	}
	if !br.b.take(br.who, int64(len(p))) {
		return 0, errBodyBudget
	}
	n, err := br.r.Read(p)
	br.b.give(br.who, int64(len(p)-n))
	br.taken += int64(n)
	return n, err
}

// errStreamBudget is a request refused because the requests and bodies
// in flight fill the budget (StreamCost): the client should retry later
// (429).
var errStreamBudget = status.Error(codes.ResourceExhausted, "too many requests in flight (--max-body-bytes-in-flight): retry later")

// bodyOwner is who a request's body is counted against: the key the
// gRPC listener counts its caller under too (server.CallerKey).
func bodyOwner(r *http.Request) string {
	return server.CallerKey(server.CallerFrom(r.Context()), r.RemoteAddr)
}

// peerOwner is r's peer host as a budget owner.
func peerOwner(r *http.Request) string { return server.PeerKey(r.RemoteAddr) }
