package replay

import "testing"

func TestValidUTF8JSON(t *testing.T) {
	tests := []struct {
		name string
		raw  string
		want bool
	}{
		{"plain", `{"text":"hello"}`, true},
		{"pair", `{"text":"\ud83d\ude00"}`, true},
		{"escaped backslash before u", `{"text":"\\udc80"}`, true},
		{"lone low surrogate", `{"text":"\udc80"}`, false},
		{"lone high surrogate at end", `{"text":"\ud83d"}`, false},
		{"high surrogate then letter", `{"text":"\ud83dx"}`, false},
		{"high then non-low escape", `{"text":"\ud83d\u0041"}`, false},
		{"invalid byte", "{\"text\":\"\xff\"}", false},
		{"bmp escape", `{"text":"\u00e9"}`, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := validUTF8JSON([]byte(tt.raw)); got != tt.want {
				t.Errorf("validUTF8JSON(%s) = %v, want %v", tt.raw, got, tt.want)
			}
		})
	}
}

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
