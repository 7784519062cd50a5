package main

import (
	"context"
	"slices"

	"github.com/classifierd/classifierd/route"
)

// agreement is how much of the exact router's answers a shortlisting
// router keeps, over a set of requests: of the tools and servers the
// exact answer returns, how many the shortlisted answer returns too, and
// how many answers are the same (labels, order and confidences).
type agreement struct {
	queries, same             int
	toolsExact, toolsKept     int
	serversExact, serversKept int
}

func (a agreement) tools() float64   { return ratio(a.toolsKept, a.toolsExact) }
func (a agreement) servers() float64 { return ratio(a.serversKept, a.serversExact) }

func ratio(n, d int) float64 {
	if d == 0 {
		return 1
	}
	return float64(n) / float64(d)
}

// compare routes each request with both routers and counts what the
// shortlisted answers keep of the exact ones.
func compare(ctx context.Context, exact, shortlisted *route.Router, qs []string) (agreement, error) {
	var a agreement
	for _, q := range qs {
		e, err := exact.Route(ctx, route.RouteQuery{Query: q})
		if err != nil {
			return a, err
		}
		s, err := shortlisted.Route(ctx, route.RouteQuery{Query: q})
		if err != nil {
			return a, err
		}
		a.add(e, s)
	}
	return a, nil
}

func (a *agreement) add(e, s route.RouteResult) {
	a.queries++
	var eTools, sTools, eSrv, sSrv []int
	for _, t := range e.Tools {
		eTools = append(eTools, t.Label)
	}
	for _, t := range s.Tools {
		sTools = append(sTools, t.Label)
	}
	for _, v := range e.Servers {
		eSrv = append(eSrv, v.Label)
	}
	for _, v := range s.Servers {
		sSrv = append(sSrv, v.Label)
	}
	a.toolsExact, a.toolsKept = a.toolsExact+len(eTools), a.toolsKept+kept(eTools, sTools)
	a.serversExact, a.serversKept = a.serversExact+len(eSrv), a.serversKept+kept(eSrv, sSrv)
	same := slices.Equal(eTools, sTools) && slices.Equal(eSrv, sSrv) && e.Abstained == s.Abstained
	for i := 0; same && i < len(e.Tools); i++ {
		same = e.Tools[i].Confidence == s.Tools[i].Confidence
	}
	for i := 0; same && i < len(e.Servers); i++ {
		same = e.Servers[i].Confidence == s.Servers[i].Confidence
	}
	if same {
		a.same++
	}
}

// kept counts the labels of want that got has too.
func kept(want, got []int) int {
	n := 0
	for _, l := range want {
		if slices.Contains(got, l) {
			n++
		}
	}
	return n
}
