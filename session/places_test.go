package session

import (
	"errors"
	"fmt"
	"testing"
)

func TestLimitReached(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want string
	}{
		{fmt.Errorf("%w (limit 2)", ErrOwnerLimit), "per_client"},
		{fmt.Errorf("%w (limit 3)", ErrLimit), "total"},
		{ErrClosed, ""},
		{errors.New("other"), ""},
	} {
		if got := LimitReached(tc.err); got != tc.want {
			t.Errorf("LimitReached(%v) = %q, want %q", tc.err, got, tc.want)
		}
	}
}
