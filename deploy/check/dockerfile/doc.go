// Package dockerfile checks deploy/Dockerfile against the build contract
// (Go builder with cgo, distroless base non-root image with glibc and
// libssl3 for OpenSSL signing, one ARG SERVICE) and the
// Go workspace: every module go.work uses is either copied into the
// builder or dropped from its workspace, so adding a module to go.work
// cannot silently break the image build. Docker cannot run where the
// checks run, so this reads the file rather than building it.
package dockerfile
