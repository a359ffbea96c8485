package viz

import (
	"image/color"

	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
)

// Style is how one series of a line plot is drawn: its colour, the dash
// pattern of its line (nil: solid) and the marker of its points.
type Style struct {
	Color  color.Color
	Dashes []vg.Length
	Shape  draw.GlyphDrawer
}

// tab10 is the ten-colour qualitative palette of matplotlib and d3
// ("category10"); series 10 to 19 get the same hues darkened, so 20
// series have 20 colours.
var tab10 = []color.RGBA{
	{0x1f, 0x77, 0xb4, 0xff}, {0xff, 0x7f, 0x0e, 0xff}, {0x2c, 0xa0, 0x2c, 0xff}, {0xd6, 0x27, 0x28, 0xff},
	{0x94, 0x67, 0xbd, 0xff}, {0x8c, 0x56, 0x4b, 0xff}, {0xe3, 0x77, 0xc2, 0xff}, {0x7f, 0x7f, 0x7f, 0xff},
	{0xbc, 0xbd, 0x22, 0xff}, {0x17, 0xbe, 0xcf, 0xff},
}

// styleDashes are the line patterns, cycled with period 4 (solid, dashed,
// dotted, dash-dot).
var styleDashes = [][]vg.Length{
	nil,
	{vg.Points(6), vg.Points(3)},
	{vg.Points(1.5), vg.Points(2.5)},
	{vg.Points(7), vg.Points(2.5), vg.Points(1.5), vg.Points(2.5)},
}

// SeriesStyle returns the style of series i >= 0 of a plot: colour AND dash
// pattern AND marker vary, so that no two series of a plot look alike even
// in greyscale. The colour alone differs for i < 20 (ten hues, then the
// same hues darker), the dash pattern cycles with period 4 and the marker
// (plotutil's 8 glyphs) with period 8, so the whole style differs for
// i < 40; i is taken modulo 40 (a negative i too).
func SeriesStyle(i int) Style {
	i = (i%40 + 40) % 40
	c := tab10[i%len(tab10)]
	if (i/len(tab10))%2 == 1 {
		c = color.RGBA{R: uint8(int(c.R) * 55 / 100), G: uint8(int(c.G) * 55 / 100), B: uint8(int(c.B) * 55 / 100), A: 0xff}
	}
	return Style{Color: c, Dashes: styleDashes[i%len(styleDashes)], Shape: plotutil.Shape(i)}
}
