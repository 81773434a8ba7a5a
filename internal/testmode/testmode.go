// Package testmode says how thorough a test run is. By default the tests
// run the long repetitions — kill loops, the seeds of randomized crash
// tests — a few times, so that `go test -race ./...` stays quick on a
// small machine; with STREAMLEARN_FULL=1 in the environment (.ci/run sets
// it) they run in full. What a repetition asserts is the same in both
// modes: only how many there are changes.
//
// The soaks (STREAMLEARN_SOAK=1: ten million events, minutes each) are a
// separate switch that neither mode turns on.
package testmode

import "os"

// EnvFull is the environment variable that asks for full repetitions.
const EnvFull = "STREAMLEARN_FULL"

// Full reports whether the environment asks for full repetitions
// (STREAMLEARN_FULL=1).
func Full() bool { return os.Getenv(EnvFull) == "1" }

// Reps returns full when Full, else quick: the number of repetitions of a
// loop whose every repetition checks the same promise.
func Reps(quick, full int) int {
	if Full() {
		return full
	}
	return quick
}
