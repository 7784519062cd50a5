package server

import (
	"context"
	"time"

	"github.com/classifierd/classifierd/internal/rapidreset"
)

// Each identity may be refused AdmissionRefusalsPerSecond calls a
// second, after a burst of AdmissionRefusalBurst; its refusals past that
// rate are counted (classifierd_admission_refused_past_rate_total) and
// marked (rapidreset.RefusedPastRate), which on HTTP/1.1 has the
// refusal's answer close its connection (Connection: close), dropping
// what the client had pipelined behind it: the sixteenth hostile pass's
// pipelined small Routes, mostly refused 429, took another identity's
// p99 from 10 to 232 ms. That costs an honest client a reconnection and
// touches no other connection.
//
// Nothing more: such refusals are not early resets (the seventeenth
// pass made them so, and the early-reset rule then penalized the whole
// peer). A hub of hundreds of callers behind one identity, each backing
// off as told, is refused far more than 20 times a second when the
// daemon is overloaded, and make loadtest's one local identity had its
// connections closed and its new ones held to 2 a second: Unavailable
// 8,042 of its calls at 1,000 clients, 17,058 at 2,000, and short2000
// (issue 25) 1,754. Refusals are made cheap instead: on gRPC the tap
// refuses model calls and cheap calls (AdmitCPU's) alike on the
// connection's reader, before the call's goroutine or message
// (admission_tap.go), and on --http-listen the guard refuses before
// vanguard transcodes the request (PrecheckHTTP).
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
