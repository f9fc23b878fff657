package jsonstrict

import "testing"

func TestValidUTF8(t *testing.T) {
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
			if got := ValidUTF8([]byte(tt.raw)); got != tt.want {
				t.Errorf("ValidUTF8(%s) = %v, want %v", tt.raw, got, tt.want)
			}
		})
	}
}
