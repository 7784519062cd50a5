package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"math"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"
)

// histogram is one Prometheus histogram read from a /metrics page: its
// cumulative bucket counts by upper bound, ascending, +Inf last.
type histogram struct {
	le  []float64
	cum []float64
}

// parseHistograms reads the _bucket series of the named histograms from
// a Prometheus text exposition. A name is a metric's (no other labels than
// le) or a metric's with its other labels up to le, as
// `name{method="/x.v1.S/M"`.
func parseHistograms(r io.Reader, names ...string) (map[string]histogram, error) {
	out := map[string]histogram{}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		for _, name := range names {
			prefix := name + `_bucket{le="`
			if base, labels, ok := strings.Cut(name, "{"); ok {
				prefix = base + "_bucket{" + labels + `,le="`
			}
			rest, ok := strings.CutPrefix(line, prefix)
			if !ok {
				continue
			}
			bound, value, ok := strings.Cut(rest, `"} `)
			if !ok {
				return nil, fmt.Errorf("metrics: bad line %q", line)
			}
			le, err1 := strconv.ParseFloat(bound, 64)
			v, err2 := strconv.ParseFloat(strings.TrimSpace(value), 64)
			if err1 != nil || err2 != nil {
				return nil, fmt.Errorf("metrics: bad line %q", line)
			}
			h := out[name]
			h.le, h.cum = append(h.le, le), append(h.cum, v)
			out[name] = h
		}
	}
	for name, h := range out {
		if !slices.IsSorted(h.le) || !math.IsInf(h.le[len(h.le)-1], 1) {
			return nil, fmt.Errorf("metrics: %s buckets out of order or without +Inf", name)
		}
	}
	return out, sc.Err()
}

// sub is h minus an earlier reading of the same histogram (the
// observations between the two), or false if their buckets differ.
func (h histogram) sub(earlier histogram) (histogram, bool) {
	if !slices.Equal(h.le, earlier.le) {
		return histogram{}, false
	}
	d := histogram{le: h.le, cum: make([]float64, len(h.cum))}
	for i := range h.cum {
		d.cum[i] = h.cum[i] - earlier.cum[i]
	}
	return d, true
}

// quantile is the q-quantile of h by linear interpolation inside the
// bucket that holds it (as Prometheus' histogram_quantile), NaN when h is
// empty; a quantile in the +Inf bucket is the last finite bound.
func (h histogram) quantile(q float64) float64 {
	if len(h.cum) == 0 || h.cum[len(h.cum)-1] <= 0 {
		return math.NaN()
	}
	rank := q * h.cum[len(h.cum)-1]
	lo, below := 0.0, 0.0
	for i, c := range h.cum {
		if c >= rank {
			if math.IsInf(h.le[i], 1) {
				return lo
			}
			if c == below {
				return h.le[i]
			}
			return lo + (h.le[i]-lo)*(rank-below)/(c-below)
		}
		lo, below = h.le[i], c
	}
	return lo
}

// scrapeHistograms reads the named histograms from a daemon's /metrics.
func scrapeHistograms(ctx context.Context, addr string, names ...string) (map[string]histogram, error) {
	var out map[string]histogram
	err := scrape(ctx, addr, func(body io.Reader) (err error) {
		out, err = parseHistograms(body, names...)
		return err
	})
	return out, err
}

// scrape GETs a daemon's /metrics, within 5 s, and hands its body to read.
func scrape(ctx context.Context, addr string, read func(io.Reader) error) error {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+"/metrics", nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("metrics: %s", resp.Status)
	}
	return read(resp.Body)
}

// scrapeValues reads the values of the named series (name and labels
// exactly as exposed, e.g. `m_total{method="/x.v1.S/M"}`) from a daemon's
// /metrics; a series not exposed is absent.
func scrapeValues(ctx context.Context, addr string, series ...string) (map[string]float64, error) {
	out := map[string]float64{}
	err := scrape(ctx, addr, func(body io.Reader) error {
		sc := bufio.NewScanner(body)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			name, value, ok := strings.Cut(sc.Text(), " ")
			if !ok || !slices.Contains(series, name) {
				continue
			}
			v, err := strconv.ParseFloat(strings.TrimSpace(value), 64)
			if err != nil {
				return fmt.Errorf("metrics: bad line %q", sc.Text())
			}
			out[name] = v
		}
		return sc.Err()
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}
