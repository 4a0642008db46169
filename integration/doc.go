// Package integration holds end-to-end tests: real processes, a real
// embedded store on disk, and (with later issues) the real S3 server and a
// real FUSE mount driven by real clients.
package integration
