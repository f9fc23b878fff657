package postgres

import (
	"context"
	"testing"
)

func TestParseToken(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want Token
		ok   bool
	}{
		{"0/0", 0, true},
		{"16/B374D848", 0x16_B374D848, true},
		{"FFFFFFFF/FFFFFFFF", ^Token(0), true},
		{"3/8e000000", 0x3_8E000000, true},
		{"", 0, false},
		{"16", 0, false},
		{"/1", 0, false},
		{"1/", 0, false},
		{"1/2/3", 0, false},
		{"G/0", 0, false},
		{"100000000/0", 0, false},
		{"-1/0", 0, false},
		{"+1/0", 0, false},
	} {
		t.Run(tc.in, func(t *testing.T) {
			got, err := ParseToken(tc.in)
			if (err == nil) != tc.ok || got != tc.want {
				t.Fatalf("ParseToken(%q) = %v, %v; want %v, ok %v", tc.in, got, err, tc.want, tc.ok)
			}
			if tc.ok {
				if back, err := ParseToken(got.String()); err != nil || back != got {
					t.Fatalf("%q does not round-trip: %q, %v", tc.in, got.String(), err)
				}
			}
		})
	}
}

func TestWithConsistency(t *testing.T) {
	ctx := context.Background()
	if got := tokenFrom(ctx); got != 0 {
		t.Fatalf("no token: %v", got)
	}
	if got := tokenFrom(WithConsistency(ctx, 0x1_00000010)); got != 0x1_00000010 {
		t.Fatalf("token: %v", got)
	}
}
