// Package reliability draws reliability diagrams (confidence bins against
// accuracy) as PNG images for the evaluation tools.
package reliability

import (
	"fmt"
	"image"
	"image/color"
	"image/draw"
	"image/png"
	"os"

	"golang.org/x/image/font"
	"golang.org/x/image/font/basicfont"
	"golang.org/x/image/math/fixed"

	"github.com/classifierd/classifierd/calibrate"
)

// WritePNG draws a reliability diagram: per confidence bin, the
// accuracy (bar) against the diagonal of perfect calibration, with the gap
// shaded and the bin counts written under the bars.
func WritePNG(path, title string, bins []calibrate.Bin) error {
	const w, h, m = 640, 640, 60
	img := image.NewRGBA(image.Rect(0, 0, w, h))
	draw.Draw(img, img.Bounds(), image.NewUniform(color.White), image.Point{}, draw.Src)
	plotW, plotH := w-2*m, h-2*m
	x := func(v float64) int { return m + int(v*float64(plotW)) }
	y := func(v float64) int { return h - m - int(v*float64(plotH)) }
	fill := func(x0, y0, x1, y1 int, c color.Color) {
		if y0 > y1 {
			y0, y1 = y1, y0
		}
		draw.Draw(img, image.Rect(x0, y0, x1, y1), image.NewUniform(c), image.Point{}, draw.Over)
	}
	blue := color.RGBA{60, 110, 200, 255}
	red := color.RGBA{230, 90, 80, 140}
	grey := color.RGBA{120, 120, 120, 255}
	for _, b := range bins {
		if b.Count == 0 {
			continue
		}
		fill(x(b.Lo)+1, y(0), x(b.Hi)-1, y(b.Accuracy), blue)
		fill(x(b.Lo)+1, y(b.Accuracy), x(b.Hi)-1, y(b.MeanConf), red)
		label(img, x(b.Lo)+2, h-m+14, fmt.Sprint(b.Count), grey)
	}
	for i := 0; i <= plotW; i++ { // diagonal
		v := float64(i) / float64(plotW)
		img.Set(x(v), y(v), color.Black)
		img.Set(x(v), y(v)-1, color.Black)
	}
	fill(m, h-m, w-m, h-m+1, color.Black)
	fill(m-1, m, m, h-m, color.Black)
	for _, t := range []float64{0, 0.25, 0.5, 0.75, 1} {
		label(img, x(t)-8, h-m+30, fmt.Sprintf("%.2f", t), color.Black)
		label(img, m-38, y(t)+4, fmt.Sprintf("%.2f", t), color.Black)
	}
	label(img, m, m-30, "Reliability: "+title, color.Black)
	label(img, m, m-14, "bars: accuracy per confidence bin; red: gap to confidence; line: perfect calibration", grey)
	label(img, w/2-40, h-12, "confidence", color.Black)
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

func label(img draw.Image, x, y int, s string, c color.Color) {
	d := &font.Drawer{Dst: img, Src: image.NewUniform(c), Face: basicfont.Face7x13, Dot: fixed.P(x, y)}
	d.DrawString(s)
}
