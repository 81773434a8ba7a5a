package main

import (
	"fmt"
	"image/color"
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

// palette: the Okabe-Ito colours, distinguishable by colour-blind readers.
var palette = []color.Color{
	color.RGBA{0, 114, 178, 255}, color.RGBA{213, 94, 0, 255}, color.RGBA{0, 158, 115, 255},
	color.RGBA{204, 121, 167, 255}, color.RGBA{230, 159, 0, 255}, color.RGBA{86, 180, 233, 255},
	color.RGBA{0, 0, 0, 255}, color.RGBA{240, 228, 66, 255},
}

// writePlot draws two panels over rounds: cumulative mistakes with each
// learner's mistake bound (dashed), and regret with each learner's regret
// bound (dashed). The format follows the file extension: .svg or .png.
func writePlot(path string, names []string, series [][]regret.Point) error {
	mistakes := plot.New()
	mistakes.Title.Text = "Cumulative mistakes and mistake bounds"
	mistakes.X.Label.Text = "round"
	mistakes.Y.Label.Text = "mistakes"
	regrets := plot.New()
	regrets.Title.Text = "Regret and regret bounds"
	regrets.X.Label.Text = "round"
	regrets.Y.Label.Text = "regret"
	for _, p := range []*plot.Plot{mistakes, regrets} {
		p.Legend.Top = true
		p.Legend.Left = true
		p.Add(plotter.NewGrid())
	}

	for i, s := range series {
		if len(s) == 0 {
			continue
		}
		c := palette[i%len(palette)]
		var m, mb, r, rb plotter.XYs
		for _, pt := range s {
			x := float64(pt.Round)
			m = append(m, plotter.XY{X: x, Y: float64(pt.Mistakes)})
			r = append(r, plotter.XY{X: x, Y: pt.Regret})
			if pt.MistakeBound > 0 {
				mb = append(mb, plotter.XY{X: x, Y: pt.MistakeBound})
			}
			if pt.RegretBound > 0 {
				rb = append(rb, plotter.XY{X: x, Y: pt.RegretBound})
			}
		}
		if err := addLine(mistakes, names[i], m, c, false); err != nil {
			return err
		}
		if err := addLine(mistakes, names[i]+" bound", mb, c, true); err != nil {
			return err
		}
		if err := addLine(regrets, names[i], r, c, false); err != nil {
			return err
		}
		if err := addLine(regrets, names[i]+" bound", rb, c, true); err != nil {
			return err
		}
	}

	const w, h = 20 * vg.Centimeter, 24 * vg.Centimeter
	var dc vg.CanvasWriterTo
	switch strings.ToLower(filepath.Ext(path)) {
	case ".svg":
		dc = vgsvg.New(w, h)
	case ".png":
		dc = vgimg.PngCanvas{Canvas: vgimg.New(w, h)}
	default:
		return fmt.Errorf("plot %s: want a .svg or .png file name", path)
	}
	tiles := draw.Tiles{Rows: 2, Cols: 1, PadX: vg.Millimeter, PadY: 4 * vg.Millimeter, PadTop: 2 * vg.Millimeter, PadBottom: 2 * vg.Millimeter, PadLeft: 2 * vg.Millimeter, PadRight: 4 * vg.Millimeter}
	plots := [][]*plot.Plot{{mistakes}, {regrets}}
	canvases := plot.Align(plots, tiles, draw.New(dc))
	mistakes.Draw(canvases[0][0])
	regrets.Draw(canvases[1][0])
	return writeCanvas(path, dc)
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
