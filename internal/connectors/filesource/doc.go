// Package filesource holds the sources `replay` runs the service on: Files,
// which reads files of events in their own formats (JSONL, LIBSVM, CSV,
// TSV, gzip-compressed or not) and decodes them with the decoder of each
// file (Framed), and Envelopes, which reads the recordings of
// `record --envelope` back as the broker's records, partition, offset and
// key included, one by one (Fetch) or in batches of one partition whose
// values the caller decodes where it learns them (FetchBatch).
//
// The sources sit beside the broker sources of package connectors and
// keep its Source contract (the conformance suite of sourcetest runs them
// through it); they are a package of their own because Files decodes
// events with package event, which connectors, the transports, does not
// depend on.
package filesource
