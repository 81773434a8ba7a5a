package main

import (
	"fmt"
	"image/color"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
	"gonum.org/v1/plot/vg/vgsvg"

	"github.com/streamlearn/streamlearn/internal/regret"
)

var (
	curveColor = color.RGBA{0, 114, 178, 255} // Okabe-Ito blue
	boundColor = color.RGBA{213, 94, 0, 255}  // Okabe-Ito vermillion
)

// writePlot draws one row per learner: cumulative mistakes against the
// learner's mistake bound, and regret against its regret bound (bounds
// dashed, as each panel's title says, so no legend covers a curve), each
// panel on its own scale so a loose bound does not flatten the curve. A
// learner with no regret comparator gets its accuracy between
// consecutive points instead, not an empty panel. The figure is titled
// with title. The format follows the file extension: .svg or .png.
func writePlot(path, title string, names, algorithms []string, series [][]regret.Point) error {
	rows := make([][]*plot.Plot, 0, len(series))
	for i, s := range series {
		row, err := learnerRow(names[i], algorithms[i], s)
		if err != nil {
			return err
		}
		rows = append(rows, row)
	}
	if len(rows) == 0 {
		return fmt.Errorf("plot %s: no learner to draw", path)
	}

	const header = 10 * vg.Millimeter
	w, h := 24*vg.Centimeter, vg.Length(len(rows))*6*vg.Centimeter+header
	var dc vg.CanvasWriterTo
	switch strings.ToLower(filepath.Ext(path)) {
	case ".svg":
		dc = vgsvg.New(w, h)
	case ".png":
		dc = vgimg.PngCanvas{Canvas: vgimg.New(w, h)}
	default:
		return fmt.Errorf("plot %s: want a .svg or .png file name", path)
	}
	c := draw.New(dc)
	// The figure's title, on a strip above the rows.
	font := plot.DefaultFont
	font.Size = vg.Points(13)
	sty := draw.TextStyle{Color: color.Black, Font: font, Handler: plot.DefaultTextHandler, XAlign: draw.XCenter, YAlign: draw.YTop}
	c.FillText(sty, vg.Point{X: w / 2, Y: h - 3*vg.Millimeter}, title)
	c.Max.Y -= header
	tiles := draw.Tiles{
		Rows: len(rows), Cols: 2,
		PadX: 8 * vg.Millimeter, PadY: 6 * vg.Millimeter,
		PadTop: 3 * vg.Millimeter, PadBottom: 3 * vg.Millimeter,
		PadLeft: 3 * vg.Millimeter, PadRight: 5 * vg.Millimeter,
	}
	canvases := plot.Align(rows, tiles, c)
	for i, row := range rows {
		for j, p := range row {
			p.Draw(canvases[i][j])
		}
	}
	return writeCanvas(path, dc)
}

// learnerRow returns the row writePlot draws for learner name from its
// points s: its mistakes and, beside, its regret or, without a regret
// comparator, its accuracy between points.
func learnerRow(name, algorithm string, s []regret.Point) ([]*plot.Plot, error) {
	var m, mb, r, rb, acc plotter.XYs
	hasRegret := false
	for k, pt := range s {
		x := float64(pt.Round)
		m = append(m, plotter.XY{X: x, Y: float64(pt.Mistakes)})
		r = append(r, plotter.XY{X: x, Y: pt.Regret})
		if pt.Regret != 0 || pt.RegretBound > 0 {
			hasRegret = true
		}
		if pt.MistakeBound > 0 {
			mb = append(mb, plotter.XY{X: x, Y: pt.MistakeBound})
		}
		if pt.RegretBound > 0 {
			rb = append(rb, plotter.XY{X: x, Y: pt.RegretBound})
		}
		var prev regret.Point
		if k > 0 {
			prev = s[k-1]
		}
		if n := pt.Round - prev.Round; n > 0 {
			acc = append(acc, plotter.XY{X: x, Y: 1 - float64(pt.Mistakes-prev.Mistakes)/float64(n)})
		}
	}
	leftTitle := fmt.Sprintf("%s (%s): mistakes", name, algorithm)
	if len(mb) > 0 {
		leftTitle += ", bound dashed"
	}
	left := panel(leftTitle, "mistakes")
	if err := addLine(left, "mistakes", m, curveColor, false); err != nil {
		return nil, err
	}
	if err := addLine(left, "mistake bound", mb, boundColor, true); err != nil {
		return nil, err
	}
	var right *plot.Plot
	if hasRegret {
		rightTitle := name + ": regret"
		if len(rb) > 0 {
			rightTitle += ", bound dashed"
		}
		right = panel(rightTitle, "regret")
		if err := addLine(right, "regret", r, curveColor, false); err != nil {
			return nil, err
		}
		if err := addLine(right, "regret bound", rb, boundColor, true); err != nil {
			return nil, err
		}
	} else {
		right = panel(name+": accuracy between points (no regret comparator)", "accuracy")
		if err := addLine(right, "accuracy", acc, curveColor, false); err != nil {
			return nil, err
		}
		right.Y.Max = 1
	}
	for _, p := range []*plot.Plot{left, right} {
		if p.Y.Min > 0 {
			p.Y.Min = 0 // anchor counts at zero
		}
	}
	return []*plot.Plot{left, right}, nil
}

func panel(title, ylabel string) *plot.Plot {
	p := plot.New()
	p.Title.Text = title
	p.X.Label.Text = "round"
	p.Y.Label.Text = ylabel
	p.X.Tick.Marker = humanTicks{}
	p.Y.Tick.Marker = humanTicks{}
	p.Add(plotter.NewGrid())
	return p
}

// humanTicks are gonum's default ticks labeled as people write numbers:
// 5000, 12k, 1.5M, 0.25, not 5000.00.
type humanTicks struct{}

func (humanTicks) Ticks(min, max float64) []plot.Tick {
	ts := plot.DefaultTicks{}.Ticks(min, max)
	for i := range ts {
		if ts[i].Label != "" {
			ts[i].Label = humanNumber(ts[i].Value)
		}
	}
	return ts
}

// humanNumber writes v briefly: at most four significant digits below
// 10,000, and from there thousands and millions as k and M.
func humanNumber(v float64) string {
	a := math.Abs(v)
	switch {
	case a >= 1e6:
		return strconv.FormatFloat(v/1e6, 'g', 4, 64) + "M"
	case a >= 1e4:
		return strconv.FormatFloat(v/1e3, 'g', 4, 64) + "k"
	default:
		return strconv.FormatFloat(v, 'g', 4, 64)
	}
}

func addLine(p *plot.Plot, name string, xys plotter.XYs, c color.Color, dashed bool) error {
	if len(xys) == 0 {
		return nil
	}
	l, err := plotter.NewLine(xys)
	if err != nil {
		return fmt.Errorf("plot %s: %w", name, err)
	}
	l.Color = c
	l.Width = vg.Points(1.5)
	if dashed {
		l.Dashes = []vg.Length{vg.Points(5), vg.Points(3)}
	}
	p.Add(l)
	return nil
}

func writeCanvas(path string, c vg.CanvasWriterTo) error {
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("plot: %w", err)
	}
	if _, err := c.WriteTo(f); err != nil {
		f.Close()
		return fmt.Errorf("plot %s: %w", path, err)
	}
	return f.Close()
}
