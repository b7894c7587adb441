// Package flightsvc owns tileflight's Arrow Flight service: descriptors and
// tickets become queries (package query), queries become record batch
// streams (package reader), DoPut streams become fragments (package
// writer); actions, authentication, limits, and the mapping of errors to
// gRPC status codes (package errkind) live here too.
package flightsvc
