package main

import (
	"fmt"
	"image"
	"image/color"
	"image/draw"
	"image/png"
	"math"
	"os"
	"strings"

	"golang.org/x/image/font"
	"golang.org/x/image/font/basicfont"
	"golang.org/x/image/math/fixed"
)

// writeSaturationPNG draws the saturation curve: Route/s per step (top,
// with the bare engine's texts/s as a dashed line) and p50/p99 latency of
// the answered calls on a log scale (bottom, with the 50 ms target; the
// daemon's own p99 of them where it exports it), steps
// evenly spaced and labelled with their client counts, the share of
// refused calls under each.
func writeSaturationPNG(path, title string, steps []step, bare float64, scens []scenario) error {
	const w, ml, mr = 900, 80, 30
	done := doneWhen(scens)
	h := 700
	if len(scens) > 0 {
		h += 40 + 16*(len(scens)+len(done))
	}
	img := image.NewRGBA(image.Rect(0, 0, w, h))
	draw.Draw(img, img.Bounds(), image.NewUniform(color.White), image.Point{}, draw.Src)
	blue := color.RGBA{60, 110, 200, 255}
	green := color.RGBA{40, 150, 80, 255}
	red := color.RGBA{210, 60, 50, 255}
	grey := color.RGBA{120, 120, 120, 255}
	purple := color.RGBA{140, 70, 170, 255}
	light := color.RGBA{225, 225, 225, 255}
	plotW := w - ml - mr
	n := len(steps)
	x := func(i int) int {
		if n == 1 {
			return ml + plotW/2
		}
		return ml + 20 + i*(plotW-40)/(n-1)
	}
	label(img, ml, 22, title, color.Black)

	// Top panel: throughput.
	top, bottom := 60, 320
	maxRPS := bare * 1.1
	for _, s := range steps {
		maxRPS = math.Max(maxRPS, s.RPS*1.1)
	}
	maxRPS = niceCeil(maxRPS)
	yT := func(v float64) int { return bottom - int(v/maxRPS*float64(bottom-top)) }
	for _, t := range []float64{0, 0.25, 0.5, 0.75, 1} {
		v := t * maxRPS
		hline(img, ml, w-mr, yT(v), light, false)
		label(img, 8, yT(v)+4, fmt.Sprintf("%6.0f", v), color.Black)
	}
	hline(img, ml, w-mr, yT(bare), grey, true)
	for i := 1; i < n; i++ {
		line(img, x(i-1), yT(steps[i-1].RPS), x(i), yT(steps[i].RPS), blue)
	}
	for i, s := range steps {
		dot(img, x(i), yT(s.RPS), blue)
		label(img, x(i)-12, yT(s.RPS)-8, fmt.Sprintf("%.0f", s.RPS), blue)
	}
	label(img, ml, top-10, "Route/s answered (blue)", blue)
	label(img, ml+190, top-10, fmt.Sprintf("dashed: bare ONNX Runtime, %.0f texts/s (same texts, same run)", bare), grey)

	// Bottom panel: latency of answered calls, log scale.
	top2, bottom2 := 380, 620
	lo, hi := 0.5, 100.0
	for _, s := range steps {
		hi = math.Max(hi, math.Max(s.P99ms, s.SrvP99ms)*1.5)
		if s.P50ms > 0 {
			lo = math.Min(lo, s.P50ms/1.5)
		}
	}
	lo = math.Pow(10, math.Floor(math.Log10(lo)))
	hi = math.Pow(10, math.Ceil(math.Log10(hi)))
	yB := func(v float64) int {
		v = math.Max(v, lo)
		return bottom2 - int((math.Log10(v)-math.Log10(lo))/(math.Log10(hi)-math.Log10(lo))*float64(bottom2-top2))
	}
	for v := lo; v <= hi*1.001; v *= 10 {
		hline(img, ml, w-mr, yB(v), light, false)
		label(img, 8, yB(v)+4, fmt.Sprintf("%6g ms", v), color.Black)
	}
	hline(img, ml, w-mr, yB(50), red, true)
	label(img, w-mr-160, yB(50)-6, "target: p99 <= 50 ms", red)
	for _, series := range []struct {
		get func(step) float64
		c   color.Color
	}{{func(s step) float64 { return s.P50ms }, green}, {func(s step) float64 { return s.P99ms }, red},
		{func(s step) float64 { return s.SrvP99ms }, purple}} {
		for i := 1; i < n; i++ {
			if series.get(steps[i-1]) > 0 && series.get(steps[i]) > 0 {
				line(img, x(i-1), yB(series.get(steps[i-1])), x(i), yB(series.get(steps[i])), series.c)
			}
		}
		for i, s := range steps {
			if series.get(s) > 0 {
				dot(img, x(i), yB(series.get(s)), series.c)
			}
		}
	}
	label(img, ml, top2-10, "latency of answered calls at the client: p50 (green), p99 (red); in the daemon: p99 (purple)", color.Black)

	// Axis: client counts and refused shares.
	for i, s := range steps {
		label(img, x(i)-10, bottom2+20, fmt.Sprint(s.Clients), color.Black)
		label(img, x(i)-14, bottom2+36, fmt.Sprintf("%.0f%%", 100*s.RejectRate), grey)
	}
	label(img, ml, bottom2+58, "concurrent clients (steps evenly spaced); grey: share of calls refused with RESOURCE_EXHAUSTED", grey)

	// The scenarios of issues 25 and 27, as printed, and their targets.
	y := 720
	if len(scens) > 0 {
		label(img, 8, y, fmt.Sprintf("%-14s %7s %6s %7s %8s %8s %9s %8s %8s %8s", "scenario", "clients", "dl", "calls", "ok", "refused", "goodput/s", "p50 ms", "p99 ms", "ref p99"), color.Black)
		y += 16
	}
	for _, s := range scens {
		l := s.line()
		if i := strings.Index(l, "  load "); i >= 0 {
			l = l[:i]
		}
		label(img, 8, y, l, color.Black)
		y += 16
	}
	for _, l := range done {
		c := green
		if strings.HasSuffix(l, "MISSED") {
			c = red
		}
		label(img, 8, y, l, c)
		y += 16
	}

	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := png.Encode(f, img); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// niceCeil rounds v up to 1, 2 or 5 times a power of ten.
func niceCeil(v float64) float64 {
	if v <= 0 {
		return 1
	}
	p := math.Pow(10, math.Floor(math.Log10(v)))
	for _, m := range []float64{1, 2, 5, 10} {
		if m*p >= v {
			return m * p
		}
	}
	return 10 * p
}

func hline(img *image.RGBA, x0, x1, y int, c color.Color, dashed bool) {
	for x := x0; x <= x1; x++ {
		if !dashed || (x/6)%2 == 0 {
			img.Set(x, y, c)
		}
	}
}

// line draws a two-pixel-wide segment (Bresenham).
func line(img *image.RGBA, x0, y0, x1, y1 int, c color.Color) {
	dx, dy := abs(x1-x0), -abs(y1-y0)
	sx, sy := 1, 1
	if x0 > x1 {
		sx = -1
	}
	if y0 > y1 {
		sy = -1
	}
	e := dx + dy
	for {
		img.Set(x0, y0, c)
		img.Set(x0, y0+1, c)
		if x0 == x1 && y0 == y1 {
			return
		}
		e2 := 2 * e
		if e2 >= dy {
			e += dy
			x0 += sx
		}
		if e2 <= dx {
			e += dx
			y0 += sy
		}
	}
}

func dot(img *image.RGBA, x, y int, c color.Color) {
	draw.Draw(img, image.Rect(x-3, y-3, x+4, y+4), image.NewUniform(c), image.Point{}, draw.Over)
}

func abs(v int) int {
	if v < 0 {
		return -v
	}
	return v
}

func label(img draw.Image, x, y int, s string, c color.Color) {
	d := &font.Drawer{Dst: img, Src: image.NewUniform(c), Face: basicfont.Face7x13, Dot: fixed.P(x, y)}
	d.DrawString(s)
}
