package replay

import "testing"

func TestIntRejectsNonIntegers(t *testing.T) {
	tests := []struct {
		raw  string
		want int64
		ok   bool
	}{
		{"2", 2, true}, {"-7", -7, true}, {"2.0", 0, false}, {"1e3", 0, false},
		{`"2"`, 0, false}, {"9223372036854775808", 0, false}, {"true", 0, false},
	}
	for _, tt := range tests {
		t.Run(tt.raw, func(t *testing.T) {
			var i Int
			err := i.UnmarshalJSON([]byte(tt.raw))
			if (err == nil) != tt.ok || (tt.ok && i.V != tt.want) {
				t.Errorf("Int(%s) = %d, err %v; want %d, ok %v", tt.raw, i.V, err, tt.want, tt.ok)
			}
		})
	}
}
