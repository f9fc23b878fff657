package replay

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/cordon-rag/cordon/chunk"
	"github.com/cordon-rag/cordon/index"
	"github.com/cordon-rag/cordon/store/memory"
)

func TestIntUnmarshal(t *testing.T) {
	tests := []struct {
		name    string
		in      string
		want    Int
		wantErr bool
	}{
		{"integer", "5", Int{5, true}, false},
		{"negative", "-7", Int{-7, true}, false},
		{"minus zero", "-0", Int{0, true}, false},
		{"2^62", "4611686018427387904", Int{1 << 62, true}, false},
		{"max int64", "9223372036854775807", Int{1<<63 - 1, true}, false},
		{"null is absent", "null", Int{}, false},
		{"fraction", "2.0", Int{}, true},
		{"exponent", "1e3", Int{}, true},
		{"upper-case exponent", "1E3", Int{}, true},
		{"string", `"5"`, Int{}, true},
		{"beyond int64", "9223372036854775808", Int{}, true},
		{"bool", "true", Int{}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got Int
			err := json.Unmarshal([]byte(tt.in), &got)
			if (err != nil) != tt.wantErr {
				t.Fatalf("Unmarshal(%s) error = %v, want error %v", tt.in, err, tt.wantErr)
			}
			if !tt.wantErr && got != tt.want {
				t.Errorf("Unmarshal(%s) = %+v, want %+v", tt.in, got, tt.want)
			}
		})
	}
}

func TestFloatUnmarshal(t *testing.T) {
	tests := []struct {
		name    string
		in      string
		want    Float
		wantErr bool
	}{
		{"integer literal", "1", Float{1, true}, false},
		{"fraction", "0.25", Float{0.25, true}, false},
		{"exponent", "2e-1", Float{0.2, true}, false},
		{"null is absent", "null", Float{}, false},
		{"string", `"0.5"`, Float{}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got Float
			err := json.Unmarshal([]byte(tt.in), &got)
			if (err != nil) != tt.wantErr {
				t.Fatalf("Unmarshal(%s) error = %v, want error %v", tt.in, err, tt.wantErr)
			}
			if !tt.wantErr && got != tt.want {
				t.Errorf("Unmarshal(%s) = %+v, want %+v", tt.in, got, tt.want)
			}
		})
	}
}

func TestParseSettings(t *testing.T) {
	custom := index.DefaultSettings()
	custom.Dims, custom.BM25.K1, custom.BM25.B = 16000, 0, 1
	custom.Chunking = chunk.Options{MaxWords: 1, OverlapWords: 0}
	tests := []struct {
		name    string
		raw     string
		want    index.Settings
		wantErr bool
	}{
		{"absent", "", index.DefaultSettings(), false},
		{"null", "null", index.DefaultSettings(), false},
		{"empty object", "{}", index.DefaultSettings(), false},
		{"null fields", `{"dims":null,"k1":null,"b":null,"max_words":null,"overlap_words":null}`, index.DefaultSettings(), false},
		{"edges", `{"dims":16000,"k1":0,"b":1,"max_words":1,"overlap_words":0}`, custom, false},
		{"dims 0", `{"dims":0}`, index.Settings{}, true},
		{"dims 16001", `{"dims":16001}`, index.Settings{}, true},
		{"dims 2.0", `{"dims":2.0}`, index.Settings{}, true},
		{"k1 negative", `{"k1":-0.5}`, index.Settings{}, true},
		{"b above 1", `{"b":1.5}`, index.Settings{}, true},
		{"b negative", `{"b":-0.1}`, index.Settings{}, true},
		{"overlap equals max", `{"max_words":10,"overlap_words":10}`, index.Settings{}, true},
		{"overlap above default max", `{"overlap_words":200}`, index.Settings{}, true},
		{"max below default overlap", `{"max_words":40}`, index.Settings{}, true},
		{"max_words 0", `{"max_words":0,"overlap_words":0}`, index.Settings{}, true},
		{"negative overlap", `{"overlap_words":-1}`, index.Settings{}, true},
		{"negative max_words", `{"max_words":-1}`, index.Settings{}, true},
		{"unknown field", `{"dim":8}`, index.Settings{}, true},
		{"not an object", `[1]`, index.Settings{}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseSettings(json.RawMessage(tt.raw))
			if (err != nil) != tt.wantErr {
				t.Fatalf("ParseSettings(%s) error = %v, want error %v", tt.raw, err, tt.wantErr)
			}
			// An out-of-range field is named in the error.
			for _, f := range []string{"max_words", "overlap_words", "dims"} {
				if err != nil && strings.Contains(tt.raw, `"`+f+`":-`) && !strings.HasPrefix(err.Error(), f+" ") {
					t.Errorf("ParseSettings(%s) error = %v, want it to name %s", tt.raw, err, f)
				}
			}
			if !tt.wantErr && got != tt.want {
				t.Errorf("ParseSettings(%s) = %+v, want %+v", tt.raw, got, tt.want)
			}
		})
	}
}

func openMemory(_ context.Context, s index.Settings) (Store, error) { return memory.New(s) }

func run(t *testing.T, script string) (string, error) {
	t.Helper()
	var out bytes.Buffer
	err := Run(context.Background(), []byte(script), openMemory, &out)
	return out.String(), err
}

func TestRunScriptErrors(t *testing.T) {
	tests := []struct {
		name    string
		script  string
		wantErr bool
		wantOut string
	}{
		{"not JSON", "not json", true, ""},
		{"array", "[]", true, ""},
		{"no steps", `{"config":{}}`, true, ""},
		{"null steps", `{"steps":null}`, true, ""},
		{"steps not a list", `{"steps":5}`, true, ""},
		{"trailing data", `{"steps":[]} x`, true, ""},
		{"empty steps", `{"steps":[]}`, false, ""},
		{"top-level description ignored", `{"description":"x","steps":[{"op":"delete","tenant":"w","doc_id":"d"}]}`, false,
			`{"op":"delete","doc_id":"d","deleted":false}` + "\n"},
		{"HTML not escaped", `{"steps":[{"op":"assemble","question":"<a&b>","budget_tokens":100}]}`, false,
			`{"op":"assemble","included":[],"dropped":[],"total_tokens":4,"stable_prefix_tokens":0,"cacheable_fraction":0,"text":"[question]\n<a&b>"}` + "\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, err := run(t, tt.script)
			if (err != nil) != tt.wantErr {
				t.Fatalf("Run error = %v, want error %v", err, tt.wantErr)
			}
			if tt.wantErr && !errors.Is(err, ErrScript) {
				t.Errorf("Run error = %v, want ErrScript", err)
			}
			if out != tt.wantOut {
				t.Errorf("Run output = %q, want %q", out, tt.wantOut)
			}
		})
	}
}

func TestRunOpenAndWriteFailures(t *testing.T) {
	boom := errors.New("boom")
	failOpen := func(context.Context, index.Settings) (Store, error) { return nil, boom }
	if err := Run(context.Background(), []byte(`{"steps":[]}`), failOpen, &bytes.Buffer{}); !errors.Is(err, boom) {
		t.Errorf("Run with a failing opener = %v, want it to wrap the open error", err)
	}
	// An invalid config never opens the store: every step reports it instead.
	out := &bytes.Buffer{}
	if err := Run(context.Background(), []byte(`{"config":{"dims":0},"steps":[{"op":"ground","claims":[]}]}`), failOpen, out); err != nil {
		t.Errorf("Run with an invalid config = %v, want nil", err)
	}
	if !strings.HasPrefix(out.String(), `{"op":"ground","error":"invalid config: `) {
		t.Errorf("output = %q, want a ground error naming the invalid config", out)
	}
	if err := Run(context.Background(), []byte(`{"steps":[{"op":"x"}]}`), openMemory, failWriter{}); err == nil {
		t.Errorf("Run with a failing writer = nil, want an error")
	}
}

type failWriter struct{}

func (failWriter) Write([]byte) (int, error) { return 0, errors.New("disk full") }

// TestGroundAnswer covers the "answer" extension of the ground step: an answer
// given as text is split into claims (SPEC section 6); giving both is refused.
func TestGroundAnswer(t *testing.T) {
	script := `{"steps":[
	 {"op":"put","document":{"tenant":"w","doc_id":"d","text":"PMT-771 is on hold. Release needs two approvals.","classification":"public"}},
	 {"op":"retrieve","principal":{"tenant":"w","clearance":"public"},"query":"PMT-771 hold release"},
	 {"op":"ground","answer":"PMT-771 is on hold. It was emailed! Release needs two approvals?"},
	 {"op":"ground","answer":"x","claims":["x"]}
	]}`
	out, err := run(t, script)
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	if len(lines) != 4 {
		t.Fatalf("got %d lines, want 4: %s", len(lines), out)
	}
	want := `{"op":"ground","claims":[{"claim":"PMT-771 is on hold.","supported":true,"chunk_id":"d::0","overlap":1},` +
		`{"claim":"It was emailed!","supported":false,"chunk_id":null,"overlap":0},` +
		`{"claim":"Release needs two approvals?","supported":true,"chunk_id":"d::0","overlap":1}],"coverage":0.6666666666666666,"is_grounded":false}`
	if lines[2] != want {
		t.Errorf("ground answer = %s, want %s", lines[2], want)
	}
	if !strings.HasPrefix(lines[3], `{"op":"ground","error":`) {
		t.Errorf("ground with claims and answer = %s, want an error", lines[3])
	}
}

// TestReplayRejectsUnrepairableText: SPEC section 2 says text must be valid
// UTF-8, "rejected, never repaired into U+FFFD". A script's JSON string can
// carry a lone surrogate escape (\ud800) or raw invalid bytes, which
// encoding/json alone would silently replace with U+FFFD. The step must be
// rejected and the replay go on; a rejected retrieve clears the chunks that
// ground and assemble see.
func TestReplayRejectsUnrepairableText(t *testing.T) {
	put := func(text string) string {
		return `{"op":"put","document":{"tenant":"w","doc_id":"d","text":"` + text + `","classification":"public"}}`
	}
	tests := []struct {
		name string
		step string
	}{
		{"lone high surrogate escape in text", put(`hold \ud800 release`)},
		{"lone low surrogate escape in text", put(`hold \udc00`)},
		{"raw invalid byte in text", put("hold \xff release")},
		{"lone surrogate in a query", `{"op":"retrieve","principal":{"tenant":"w","clearance":"public"},"query":"hold \ud800"}`},
		{"lone surrogate in a claim", `{"op":"ground","claims":["hold \udfff"]}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, err := run(t, `{"steps":[`+put("hold release")+`,`+tt.step+`,{"op":"delete","tenant":"w","doc_id":"d"}]}`)
			if err != nil {
				t.Fatalf("Run: %v", err)
			}
			lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
			if len(lines) != 3 {
				t.Fatalf("got %d lines, want 3: %s", len(lines), out)
			}
			if !strings.Contains(lines[1], `"error":`) {
				t.Errorf("step 2 = %s, want it rejected", lines[1])
			}
			if want := `{"op":"delete","doc_id":"d","deleted":true}`; lines[2] != want {
				t.Errorf("step 3 = %s, want %s (the rejected step stored nothing and the replay went on)", lines[2], want)
			}
		})
	}
	// A paired surrogate escape is valid and kept.
	out, err := run(t, `{"steps":[`+put(`hold \ud83d\ude00 release`)+`]}`)
	if err != nil || !strings.Contains(out, `"chunks":[{"chunk_id":"d::0","section":"body","start_char":0,"end_char":14,"length":2}]`) {
		t.Errorf("paired surrogate: got %s, %v, want a stored 14-code-point chunk", out, err)
	}
}

// TestReplayFieldNamesAreExact: the package doc promises that steps reject
// unknown fields (a misspelt field must not silently change a contract), and
// another implementation of SPEC section 9 will match names exactly.
// encoding/json matches field names case-insensitively, so "Max_Stale_Ticks"
// or "Document" are accepted as if spelt right.
func TestReplayFieldNamesAreExact(t *testing.T) {
	tests := []struct {
		name string
		step string
	}{
		{"policy field in another case", `{"op":"retrieve","principal":{"tenant":"w","clearance":"public"},"query":"x","policy":{"Max_Stale_Ticks":5}}`},
		{"document key in upper case", `{"op":"put","Document":{"tenant":"w","doc_id":"d","text":"x","classification":"public"}}`},
		{"op key in upper case", `{"OP":"delete","tenant":"w","doc_id":"d"}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, err := run(t, `{"steps":[`+tt.step+`]}`)
			if err != nil {
				t.Fatalf("Run: %v", err)
			}
			if !strings.Contains(out, `"error":`) {
				t.Errorf("got %s, want the step rejected", out)
			}
		})
	}
}
