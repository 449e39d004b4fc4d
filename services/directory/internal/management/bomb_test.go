package management_test

import (
	"bytes"
	"compress/gzip"
	"net/http"
	"runtime"
	"testing"

	"github.com/gatehouse-id/gatehouse/pkg/db"
	"github.com/gatehouse-id/gatehouse/services/directory/internal/mgmttest"
)

// A small compressed request never makes the service decompress more
// than restapi.MaxMessageBytes: connect-go and vanguard read a message
// whole before authorization, so an anonymous 64 KiB gzip body of zeros
// was inflated to its 64 MiB (a 4 MiB one, all edge admits, to 4 GiB).
func TestCompressedBombIsRefusedBeforeItExpands(t *testing.T) {
	e := mgmttest.Start(t, db.SQLite)
	var buf bytes.Buffer
	zw, _ := gzip.NewWriterLevel(&buf, gzip.BestCompression)
	zeros := make([]byte, 1<<20)
	for range 64 {
		_, _ = zw.Write(zeros)
	}
	_ = zw.Close()
	bomb := buf.Bytes()
	// gRPC needs HTTP/2: prior knowledge over cleartext, as the server
	// accepts it.
	protocols := new(http.Protocols)
	protocols.SetUnencryptedHTTP2(true)
	client := &http.Client{Transport: &http.Transport{Protocols: protocols}}
	for _, tc := range []struct {
		name, path string
		header     map[string]string
		bound      uint64 // allocation allowed (the internal API's messages may be larger)
	}{
		{"Connect", "/gatehouse.management.v1.ManagementService/ListOrgs", map[string]string{
			"Content-Type": "application/proto", "Content-Encoding": "gzip", "Connect-Protocol-Version": "1"}, 40 << 20},
		{"internal API, without its token", "/gatehouse.directory.v1.DirectoryService/GetUser", map[string]string{
			"Content-Type": "application/proto", "Content-Encoding": "gzip", "Connect-Protocol-Version": "1"}, 80 << 20},
		{"gRPC", "/gatehouse.management.v1.ManagementService/ListOrgs", map[string]string{
			"Content-Type": "application/grpc", "Grpc-Encoding": "gzip", "Te": "trailers"}, 40 << 20},
		{"REST", "/management/v1/orgs/_search", map[string]string{"Content-Type": "application/json", "Content-Encoding": "gzip"}, 40 << 20},
		{"reflection", "/grpc.reflection.v1.ServerReflection/ServerReflectionInfo", map[string]string{
			"Content-Type": "application/grpc", "Grpc-Encoding": "gzip", "Te": "trailers"}, 40 << 20},
	} {
		body := bomb
		if tc.header["Content-Type"] == "application/grpc" {
			// One length-prefixed message, flagged compressed.
			frame := []byte{1, byte(len(bomb) >> 24), byte(len(bomb) >> 16), byte(len(bomb) >> 8), byte(len(bomb))}
			body = append(frame, bomb...)
		}
		req, _ := http.NewRequest(http.MethodPost, e.Base+tc.path, bytes.NewReader(body))
		for k, v := range tc.header {
			req.Header.Set(k, v)
		}
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		resp, err := client.Do(req)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		_ = resp.Body.Close()
		runtime.ReadMemStats(&after)
		if grew := after.TotalAlloc - before.TotalAlloc; grew > tc.bound {
			t.Errorf("%s: a %d KiB compressed request allocated %d MiB; want it refused within the message bound", tc.name, len(bomb)>>10, grew>>20)
		}
		if resp.StatusCode == http.StatusOK && resp.Header.Get("Grpc-Status") == "0" {
			t.Errorf("%s: accepted", tc.name)
		}
	}
}
