package main

import (
	"fmt"
	"image/color"
	"os"
	"path/filepath"
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
// dashed), each panel on its own scale so a loose bound does not flatten
// the curve. The format follows the file extension: .svg or .png.
func writePlot(path string, names, algorithms []string, series [][]regret.Point) error {
	rows := make([][]*plot.Plot, 0, len(series))
	for i, s := range series {
		var m, mb, r, rb plotter.XYs
		hasRegret := false
		for _, pt := range s {
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
		}
		left := panel(fmt.Sprintf("%s (%s): mistakes", names[i], algorithms[i]), "mistakes")
		if err := addLine(left, "mistakes", m, curveColor, false); err != nil {
			return err
		}
		if err := addLine(left, "mistake bound", mb, boundColor, true); err != nil {
			return err
		}
		right := panel(fmt.Sprintf("%s: regret", names[i]), "regret")
		if hasRegret {
			if err := addLine(right, "regret", r, curveColor, false); err != nil {
				return err
			}
			if err := addLine(right, "regret bound", rb, boundColor, true); err != nil {
				return err
			}
		} else {
			right.Title.Text = names[i] + ": no regret comparator"
			right.HideAxes()
		}
		for _, p := range []*plot.Plot{left, right} {
			if p.Y.Min > 0 {
				p.Y.Min = 0 // anchor counts at zero
			}
		}
		rows = append(rows, []*plot.Plot{left, right})
	}
	if len(rows) == 0 {
		return fmt.Errorf("plot %s: no learner to draw", path)
	}

	w, h := 24*vg.Centimeter, vg.Length(len(rows))*6*vg.Centimeter
	var dc vg.CanvasWriterTo
	switch strings.ToLower(filepath.Ext(path)) {
	case ".svg":
		dc = vgsvg.New(w, h)
	case ".png":
		dc = vgimg.PngCanvas{Canvas: vgimg.New(w, h)}
	default:
		return fmt.Errorf("plot %s: want a .svg or .png file name", path)
	}
	tiles := draw.Tiles{
		Rows: len(rows), Cols: 2,
		PadX: 8 * vg.Millimeter, PadY: 6 * vg.Millimeter,
		PadTop: 3 * vg.Millimeter, PadBottom: 3 * vg.Millimeter,
		PadLeft: 3 * vg.Millimeter, PadRight: 5 * vg.Millimeter,
	}
	canvases := plot.Align(rows, tiles, draw.New(dc))
	for i, row := range rows {
		for j, p := range row {
			p.Draw(canvases[i][j])
		}
	}
	return writeCanvas(path, dc)
}

func panel(title, ylabel string) *plot.Plot {
	p := plot.New()
	p.Title.Text = title
	p.X.Label.Text = "round"
	p.Y.Label.Text = ylabel
	p.Legend.Top = true
	p.Legend.Left = true
	p.Add(plotter.NewGrid())
	return p
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
	p.Legend.Add(name, l)
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
