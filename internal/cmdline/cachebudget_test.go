package cmdline

import (
	"errors"
	"strings"
	"testing"
)

func TestCacheBudget(t *testing.T) {
	tests := []struct {
		name     string
		value    string
		unit     int64
		want     int64
		wantRule string
		wantErr  bool
	}{
		{name: "bytes", value: "1073741824", unit: 1, want: 1 << 30, wantRule: "set by --cache-bytes"},
		{name: "MiB", value: "2048", unit: 1 << 20, want: 2 << 30, wantRule: "set by --cache-bytes"},
		{name: "zero turns it off", value: "0", unit: 1, want: 0, wantRule: "off"},
		{name: "negative", value: "-1", unit: 1, wantErr: true},
		{name: "not a number", value: "4GB", unit: 1, wantErr: true},
		{name: "overflow", value: "9000000000000", unit: 1 << 20, wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, rule, err := CacheBudget("--cache-bytes", tt.value, tt.unit)
			if tt.wantErr {
				if !errors.Is(err, ErrUsage) {
					t.Fatalf("got %d, %v; want a usage error", got, err)
				}
				return
			}
			if err != nil || got != tt.want || !strings.HasPrefix(rule, tt.wantRule) {
				t.Fatalf("got %d (%q), %v; want %d (%q...)", got, rule, err, tt.want, tt.wantRule)
			}
		})
	}
	// auto: a quarter of what this process may use, whatever that is here.
	for _, v := range []string{"auto", ""} {
		got, rule, err := CacheBudget("--cache-bytes", v, 1)
		if err != nil {
			t.Fatal(err)
		}
		if strings.HasPrefix(rule, "auto: off") {
			t.Skipf("no memory figure on this system: %s", rule)
		}
		if got <= 0 || !strings.HasPrefix(rule, "auto: 1/4 of ") {
			t.Fatalf("%q: got %d (%q); want a positive quarter", v, got, rule)
		}
	}
}
