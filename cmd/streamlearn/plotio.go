package main

import (
	"fmt"
	"os"

	"gonum.org/v1/plot/vg"
)

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
