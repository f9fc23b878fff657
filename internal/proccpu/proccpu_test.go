package proccpu

import (
	"os"
	"runtime"
	"testing"
	"time"
)

func TestParseStat(t *testing.T) {
	// A title with spaces and parentheses in the command name.
	stat := []byte("4242 (postgres: u (x) db) S 1 4242 4242 0 -1 4194560 500 0 0 0 250 37 0 0 20 0 1 0 100 0 0")
	d, ok := ParseStat(stat)
	if !ok || d != 2870*time.Millisecond {
		t.Fatalf("ParseStat = %v, %v; want 2.87s", d, ok)
	}
	for _, bad := range []string{"", "4242 (x", "4242 (x) S 1 2", "4242 (x) S 1 4242 4242 0 -1 4194560 500 0 0 0 -5 37"} {
		if _, ok := ParseStat([]byte(bad)); ok {
			t.Errorf("ParseStat(%q) accepted", bad)
		}
	}
}

func TestSelfGrows(t *testing.T) {
	a := Self()
	x := 0
	for i := range 20_000_000 {
		x ^= i * i
	}
	if b := Self(); b <= a {
		t.Fatalf("process CPU did not grow: %v then %v (x=%d)", a, b, x)
	}
}

func TestOfSelf(t *testing.T) {
	if runtime.GOOS != "linux" {
		if _, err := Of(os.Getpid()); err == nil {
			t.Fatal("Of read a /proc that this OS does not have")
		}
		return
	}
	d, err := Of(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	// /proc counts in ticks of 10 ms; getrusage is finer.
	if self := Self(); d < 0 || d > self+20*time.Millisecond {
		t.Fatalf("Of(self) = %v, getrusage %v", d, self)
	}
	if _, err := Of(-1); err == nil {
		t.Fatal("Of(-1) succeeded")
	}
}
