//go:build race

package experts

const raceEnabled = true
