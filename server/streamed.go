package server

import "time"

// A call of a method that takes a stream of messages (gRPC reflection)
// is counted as receiving, in the connection's count from its oldest
// call receiving (recvConn.held), only until its first message: an idle
// stream counted so made its connection hold everything it read after,
// and an honest client's Routes on the same channel were cut after 16
// MiB (the thirty-third hostile pass). Not counted at all after it, a
// second message declaring 4 MiB and sent all but its last byte was held
// by nothing for as long as the client liked (the thirty-second: +2.2
// GB), and one sent with the first (the thirty-third: 64 KiB a
// connection, +63 MB from one address). So from its first message such
// a call is counted by its own stream: what the stream has received
// (rapidreset.Streams.Received) less what gRPC has handed on
// (InPayload), charged to the connection's share of the body budget as
// it arrives (past it, the call is cut), and a message begun must be
// handed on within --recv-timeout or the call is ended, as a first
// message must.

// watchStreamed starts counting call by its stream, once its first
// message is in.
func (c *recvConn) watchStreamed(call *recvCall) {
	if call.stream.Load() == 0 {
		return
	}
	c.mu.Lock()
	finished := call.finished
	c.mu.Unlock()
	if finished {
		return
	}
	c.smu.Lock()
	defer c.smu.Unlock()
	if c.streamed == nil {
		c.streamed = map[*recvCall]struct{}{}
	}
	c.streamed[call] = struct{}{}
	c.chargeLocked(call) // what came before it was watched
}

// unwatchStreamed: call's stream is gone; what it held is given back.
func (c *recvConn) unwatchStreamed(call *recvCall) {
	c.smu.Lock()
	defer c.smu.Unlock()
	if _, ok := c.streamed[call]; ok {
		c.unwatchLocked(call)
	}
}

// unwatchLocked stops counting call by its stream: what it holds is given
// back and its receive timer stopped.
func (c *recvConn) unwatchLocked(call *recvCall) {
	delete(c.streamed, call)
	if call.bufCharged > 0 {
		c.g.b.Release(c.who, call.bufCharged)
		call.bufCharged = 0
	}
	if call.bufTimer != nil {
		call.bufTimer.Stop()
		call.bufTimer = nil
	}
}

// buffered is what call's stream has received and gRPC not yet handed
// on.
func (c *recvConn) buffered(call *recvCall) int64 {
	return max(c.streams.Received(call.stream.Load())-call.delivered.Load(), 0)
}

// chargeStreamed charges (or gives back) what each watched call's
// stream holds, cuts a call past the connection's share, and arms the
// receive timer of a message begun. The reader's, after each read.
func (c *recvConn) chargeStreamed() {
	c.smu.Lock()
	defer c.smu.Unlock()
	for call := range c.streamed {
		c.chargeLocked(call)
	}
}

// chargeLocked charges or gives back what call's stream holds now.
func (c *recvConn) chargeLocked(call *recvCall) {
	buf := c.buffered(call)
	switch d := buf - call.bufCharged; {
	case d > 0:
		call.bufCharged = buf
		if c.g.b.Charge(c.who, d) {
			// Past its share: every streamed call of the connection is
			// cut, as every call receiving its first message is
			// (recvConn.Read), and what they hold is given back now, not
			// when their streams are gone. Cutting the one call charged,
			// and giving back at its stream's end, kept the budget full
			// under four identities' partial 4 MiB messages until the
			// receive timeout, and another identity's HTTP bodies were
			// refused 429 meanwhile.
			for other := range c.streamed {
				other.cancel(errRecvBudget)
				c.unwatchLocked(other)
			}
			return
		}
	case d < 0:
		c.g.b.Release(c.who, -d)
		call.bufCharged = buf
	}
	if buf > 0 && call.bufTimer == nil {
		c.armStreamedLocked(call)
	}
}

// armStreamedLocked starts the receive timer of call's message begun.
func (c *recvConn) armStreamedLocked(call *recvCall) {
	if c.g.recvTimeout <= 0 {
		return
	}
	mark := call.delivered.Load()
	call.bufTimer = time.AfterFunc(c.g.recvTimeout, func() { c.streamedTimedOut(call, mark) })
}

// streamedTimedOut ends call if no message of it was handed on since
// its timer started (mark) while one was begun; if one was, and another
// is begun, the timer starts again.
func (c *recvConn) streamedTimedOut(call *recvCall, mark int64) {
	c.smu.Lock()
	defer c.smu.Unlock()
	call.bufTimer = nil
	if _, ok := c.streamed[call]; !ok {
		return
	}
	if call.delivered.Load() == mark {
		call.cancel(errSlowArrival)
		return
	}
	if c.buffered(call) > 0 {
		c.armStreamedLocked(call)
	}
}
