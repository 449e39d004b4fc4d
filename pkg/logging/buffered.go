package logging

import (
	"io"
	"os"
	"sync"
	"time"
)

// BufferedWriter batches log lines: a write system call per request line
// cost as much as formatting it. Lines reach the underlying writer within
// the flush interval, at once when the buffer fills, and at once with any
// record at Warn or above (the handler flushes after those), so what
// explains a failure is never held back. Close flushes and makes later
// writes synchronous. A process killed outright loses at most one interval
// of lines.
type BufferedWriter struct {
	mu       sync.Mutex
	w        io.Writer
	buf      []byte
	size     int
	interval time.Duration
	timer    *time.Timer // pending flush; nil when none
	closed   bool
	err      error // the first write error, returned by Flush and Close
}

// NewBufferedWriter buffers up to size bytes for at most interval.
func NewBufferedWriter(w io.Writer, interval time.Duration, size int) *BufferedWriter {
	return &BufferedWriter{w: w, size: size, interval: interval, buf: make([]byte, 0, size)}
}

// Write appends p, a whole record (slog handlers write one per call).
func (b *BufferedWriter) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return b.w.Write(p)
	}
	if len(b.buf)+len(p) > b.size {
		b.flushLocked()
		if len(p) > b.size {
			return b.w.Write(p)
		}
	}
	b.buf = append(b.buf, p...)
	if b.timer == nil {
		b.timer = time.AfterFunc(b.interval, b.timed)
	}
	return len(p), nil
}

func (b *BufferedWriter) timed() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.timer = nil
	b.flushLocked()
}

// Flush writes what is buffered.
func (b *BufferedWriter) Flush() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.flushLocked()
	return b.err
}

func (b *BufferedWriter) flushLocked() {
	if b.timer != nil {
		b.timer.Stop()
		b.timer = nil
	}
	if len(b.buf) == 0 {
		return
	}
	if _, err := b.w.Write(b.buf); err != nil && b.err == nil {
		b.err = err
	}
	b.buf = b.buf[:0]
}

// Close flushes; later writes go straight to the underlying writer.
func (b *BufferedWriter) Close() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.flushLocked()
	b.closed = true
	return b.err
}

// Buffer returns w buffered when it is a file or pipe that is not a
// terminal (a process's stderr in production: under a container runtime or
// redirected to a file), and w itself otherwise; close is a no-op then.
// On a terminal a person watches the lines as they happen.
func Buffer(w io.Writer) (io.Writer, func() error) {
	f, ok := w.(*os.File)
	if !ok || isTerminal(f) {
		return w, func() error { return nil }
	}
	bw := NewBufferedWriter(w, 100*time.Millisecond, 64<<10)
	return bw, bw.Close
}
