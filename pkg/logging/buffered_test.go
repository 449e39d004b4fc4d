package logging

import (
	"bytes"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"
)

// lockedBuffer is a bytes.Buffer safe for the flush timer's goroutine.
type lockedBuffer struct {
	mu     sync.Mutex
	b      bytes.Buffer
	writes int
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.writes++
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

func (l *lockedBuffer) Writes() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.writes
}

func TestBufferedWriterBatchesUntilTheInterval(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		var out lockedBuffer
		bw := NewBufferedWriter(&out, 200*time.Millisecond, 1<<10)
		log := New(bw, slog.LevelInfo)
		log.Info("one")
		time.Sleep(100 * time.Millisecond)
		log.Info("two")
		time.Sleep(100*time.Millisecond - time.Nanosecond)
		synctest.Wait()
		if out.String() != "" {
			t.Fatalf("written before the interval: %q", out.String())
		}
		time.Sleep(time.Nanosecond)
		synctest.Wait() // the flush timer's goroutine has run
		if !strings.Contains(out.String(), `"msg":"two"`) || out.Writes() != 1 {
			t.Errorf("%d writes at the interval: %q; want the two lines in one", out.Writes(), out.String())
		}
	})
}

func TestBufferedWriterFlushesWarningsAtOnce(t *testing.T) {
	var out lockedBuffer
	bw := NewBufferedWriter(&out, time.Hour, 1<<10)
	log := New(bw, slog.LevelInfo).With("process", "test")
	log.Info("before")
	log.Warn("trouble")
	s := out.String()
	if !strings.Contains(s, `"msg":"before"`) || !strings.Contains(s, `"msg":"trouble"`) {
		t.Fatalf("a warning must flush it and what came before: %q", s)
	}
}

func TestBufferedWriterFullBufferAndClose(t *testing.T) {
	var out lockedBuffer
	bw := NewBufferedWriter(&out, time.Hour, 64)
	line := []byte(strings.Repeat("a", 40) + "\n")
	_, _ = bw.Write(line)
	_, _ = bw.Write(line) // does not fit: the first goes out
	if got := out.String(); got != string(line) {
		t.Fatalf("after overflow: %q; want the first line", got)
	}
	big := []byte(strings.Repeat("b", 100) + "\n") // larger than the buffer: straight through, in order
	_, _ = bw.Write(big)
	if got := out.String(); got != string(line)+string(line)+string(big) {
		t.Fatalf("after a large record: %q", got)
	}
	_, _ = bw.Write(line)
	if err := bw.Close(); err != nil {
		t.Fatal(err)
	}
	if !strings.HasSuffix(out.String(), string(big)+string(line)) {
		t.Fatalf("Close did not flush: %q", out.String())
	}
	_, _ = bw.Write([]byte("after\n"))
	if !strings.HasSuffix(out.String(), "after\n") {
		t.Fatal("a write after Close is held back")
	}
}

func TestBufferOnlyFilesAndPipes(t *testing.T) {
	var b bytes.Buffer
	if w, _ := Buffer(&b); w != &b {
		t.Error("a non-file writer was buffered")
	}
	f, err := os.Create(filepath.Join(t.TempDir(), "log"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	w, closeLog := Buffer(f)
	if _, ok := w.(*BufferedWriter); !ok {
		t.Fatal("a regular file was not buffered")
	}
	New(w, slog.LevelInfo).Info("x")
	if err := closeLog(); err != nil {
		t.Fatal(err)
	}
	if got, _ := os.ReadFile(f.Name()); !strings.Contains(string(got), `"msg":"x"`) {
		t.Fatalf("file after close: %q; want the line, as JSON", got)
	}
}
