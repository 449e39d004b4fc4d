//go:build !unix

package secrets

// allocHashMemory falls back to the Go heap where anonymous mappings are
// not at hand; the memory is still reused from check to check.
func allocHashMemory(n int) []byte { return make([]byte, n) }

func freeHashMemory([]byte) {}
