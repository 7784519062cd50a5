package server

import (
	"context"
	"time"

	"github.com/classifierd/classifierd/internal/rapidreset"
)

// Each identity may be refused AdmissionRefusalsPerSecond calls a
// second, after a burst of AdmissionRefusalBurst; its refusals past that
// rate are refusals past its rate (rapidreset.RefusedPastRate): each
// counts as an early reset, so the early-reset rule closes a gRPC or
// HTTP/2 connection that makes mostly such calls, and on HTTP/1.1 the
// refusal's answer closes its connection (Connection: close), dropping
// what the client had pipelined behind it. A refusal costs the daemon
// the request's reading, TLS, authentication and decoding, more than it
// costs the client to send: in the sixteenth hostile pass one identity's
// pipelined small Routes, mostly refused 429, took another identity's
// p99 from 10 to 232 ms. A client that backs off as told (Retry-After,
// RetryInfo), or makes a few calls a second (an SDK, a Prometheus-style
// scraper), is never refused at that rate.
const (
	AdmissionRefusalsPerSecond = 20
	AdmissionRefusalBurst      = 64
	// maxRefusalBuckets bounds the identities whose refusals are
	// counted; past it they all start afresh (each with its burst).
	maxRefusalBuckets = 4096
)

// refusedLocked counts a refusal of the identity key at now and reports
// whether it is past the identity's rate.
func (a *Admission) refusedLocked(key string, now time.Time) bool {
	return !a.refusals.get(key).AllowN(now, 1)
}

// pastRate marks the request of ctx as refused past its caller's rate
// when past (rapidreset.RefusedPastRate), and counts it.
func (a *Admission) pastRate(ctx context.Context, past bool) {
	if past {
		a.pastRateRefusals.Add(1)
		rapidreset.RefusedPastRate(ctx)
	}
}

// RefusalsPastRate is how many refusals were past their caller's rate
// (AdmissionRefusalsPerSecond).
func (a *Admission) RefusalsPastRate() int64 {
	if a == nil {
		return 0
	}
	return a.pastRateRefusals.Load()
}
