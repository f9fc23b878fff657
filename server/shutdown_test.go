package server

import (
	"bytes"
	"context"
	"log/slog"
	"net"
	"strings"
	"sync"
	"testing"
)

// lockedBuffer is a bytes.Buffer safe for the two listeners' goroutines.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// TestShutdownLoggedOnce: the API and metrics listeners stop on the same
// signal, and "shutting down" is logged once.
func TestShutdownLoggedOnce(t *testing.T) {
	var logs lockedBuffer
	srv := New(Config{Logger: slog.New(slog.NewJSONHandler(&logs, nil))}, nil, &Verifier{})
	listen := func() net.Listener {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		return ln
	}
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 2)
	go func() { errc <- srv.Serve(ctx, listen()) }()
	go func() { errc <- srv.ServeMetrics(ctx, listen()) }()
	cancel()
	for range 2 {
		if err := <-errc; err != nil {
			t.Fatalf("serve: %v", err)
		}
	}
	if n := strings.Count(logs.String(), "shutting down"); n != 1 {
		t.Fatalf("got %d shutting-down lines, want 1:\n%s", n, logs.String())
	}
}
