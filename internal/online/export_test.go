package online

// The assembly kernel and its Go version, for BenchmarkKernelsText in
// package online_test (which decodes real text with package event, an
// importer of this package).
var DotNorm2, DotNorm2Go = dotNorm2, dotNorm2Generic
