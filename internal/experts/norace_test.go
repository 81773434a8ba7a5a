//go:build !race

package experts

const raceEnabled = false
