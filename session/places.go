package session

import "errors"

// LimitReached names the limit a refused CreateFor or MCP session
// (internal/mcpplaces) reached, as the
// sessions_refused_total metrics label it: "per_client" (ErrOwnerLimit),
// "total" (ErrLimit), or "" for any other error.
func LimitReached(err error) string {
	switch {
	case errors.Is(err, ErrOwnerLimit):
		return "per_client"
	case errors.Is(err, ErrLimit):
		return "total"
	}
	return ""
}
