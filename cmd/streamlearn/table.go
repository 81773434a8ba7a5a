package main

import (
	"io"
	"strings"
	"text/tabwriter"
	"unicode/utf8"
)

// writeTable writes rows of cells as a text/tabwriter.Writer(w, 0, 0, 2,
// ' ', 0) writes each row's cells joined by tabs and ended by a newline:
// a column (every cell of a row but its last) as wide as its widest cell
// over the run of consecutive rows that have it, plus two spaces. It is
// that writer's output byte for byte, without its buffering of every
// byte and cell, for the report of each of a million keys; a cell that
// holds a byte the writer reads as more than text (a tab, a newline,
// \v, \f, or its escape 0xff) sends the rows through the writer itself.
func writeTable(w io.Writer, rows [][]string) error {
	for _, row := range rows {
		for _, c := range row {
			if strings.ContainsAny(c, "\t\n\v\f\xff") {
				tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
				for _, row := range rows {
					io.WriteString(tw, strings.Join(row, "\t")+"\n")
				}
				return tw.Flush()
			}
		}
	}
	// Into the writer's own free room when it has some (a bytes.Buffer,
	// a bufio.Writer): no buffer of its own a table. The widths are of
	// the columns left of the one formatTable is at: a stack, as deep as
	// the widest row.
	var out []byte
	if b, ok := w.(interface{ AvailableBuffer() []byte }); ok {
		out = b.AvailableBuffer()
	}
	var widths [16]int
	_, err := w.Write(formatTable(out, rows, widths[:0], 0, len(rows)))
	return err
}

// formatTable appends rows[line0:line1] to out, the columns left of
// len(widths) of widths: the writer's format, column by column, a block
// of consecutive rows that have the column at a time.
func formatTable(out []byte, rows [][]string, widths []int, line0, line1 int) []byte {
	column := len(widths)
	for this := line0; this < line1; this++ {
		if column >= len(rows[this])-1 {
			continue
		}
		out = tableRows(out, rows, widths, line0, this)
		line0 = this
		width := 0
		for ; this < line1 && column < len(rows[this])-1; this++ {
			width = max(width, utf8.RuneCountInString(rows[this][column])+2)
		}
		out = formatTable(out, rows, append(widths, width), line0, this)
		line0 = this
	}
	return tableRows(out, rows, widths, line0, line1)
}

// tableRows appends rows[line0:line1], each cell left of len(widths)
// padded with spaces to its column's width.
func tableRows(out []byte, rows [][]string, widths []int, line0, line1 int) []byte {
	for _, row := range rows[line0:line1] {
		for j, c := range row {
			out = append(out, c...)
			if j < len(widths) {
				for range widths[j] - utf8.RuneCountInString(c) {
					out = append(out, ' ')
				}
			}
		}
		out = append(out, '\n')
	}
	return out
}
