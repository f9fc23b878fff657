package cmdline

import (
	"slices"
	"testing"
)

func TestParseFlagsInterspersed(t *testing.T) {
	tests := []struct {
		name     string
		args     []string
		wantX    string
		wantB    bool
		wantArgs []string
	}{
		{"flags first", []string{"--x", "1", "-b", "a", "b"}, "1", true, []string{"a", "b"}},
		{"flags last", []string{"a", "b", "--x=1", "-b"}, "1", true, []string{"a", "b"}},
		{"flags between", []string{"a", "--x", "1", "b", "-b"}, "1", true, []string{"a", "b"}},
		{"double dash ends flags", []string{"a", "--x", "1", "--", "-b", "--x"}, "1", false, []string{"a", "-b", "--x"}},
		{"dash is an argument", []string{"-", "--x", "2"}, "2", false, []string{"-"}},
		{"no flags", []string{"a"}, "", false, []string{"a"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := &Command{Name: "t"}
			fs := NewFlagSet(c)
			x := fs.String("x", "", "")
			b := fs.Bool("b", false, "")
			if err := ParseFlags(fs, c, Env{}, tt.args); err != nil {
				t.Fatal(err)
			}
			if *x != tt.wantX || *b != tt.wantB || !slices.Equal(fs.Args(), tt.wantArgs) {
				t.Errorf("got x=%q b=%v args=%q, want x=%q b=%v args=%q", *x, *b, fs.Args(), tt.wantX, tt.wantB, tt.wantArgs)
			}
		})
	}
}
