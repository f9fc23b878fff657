package replay_test

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/cordon-rag/cordon/replay"
)

// FuzzRun feeds arbitrary bytes to Run as a script. Run must not panic, and
// when it returns nil its output is one JSON object with an "op" key per step.
func FuzzRun(f *testing.F) {
	scripts, _ := filepath.Glob(filepath.Join(goldenDir, "*.json"))
	for _, p := range scripts {
		data, err := os.ReadFile(p)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
	for _, s := range []string{
		``, `{}`, `[]`, `null`, `{"steps":[]}`, `{"steps":[null,1,"x",[],{}]}`,
		`{"config":{"max_words":1,"overlap_words":0,"dims":1},"steps":[{"op":"put","document":{"tenant":"a","doc_id":"d","text":"a b c","classification":"public"}},{"op":"retrieve","principal":{"tenant":"a","clearance":"public"},"query":"a"},{"op":"ground","claims":["a"]},{"op":"assemble","question":"q","budget_tokens":1}]}`,
		`{"steps":[{"op":"retrieve","principal":{"tenant":"a","clearance":"public"},"query":"a","now_tick":4611686018427387904,"policy":{"rrf_k":9223372036854775807,"top_n":9223372036854775807,"limit":9223372036854775807,"rerank_depth":9223372036854775807,"max_stale_ticks":9223372036854775807}}]}`,
		`{"steps":[{"op":"put","document":{"tenant":"a","doc_id":"d","text":"\ud800 x","classification":"public"}}]}`,
		`{"steps":[{"op":"ground","answer":"a. b! c?"},{"op":"assemble","question":"","budget_tokens":9223372036854775807}]}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, script []byte) {
		var out bytes.Buffer
		if err := replay.Run(context.Background(), script, openMemory, &out); err != nil {
			return
		}
		checkLines(t, script, out.Bytes())
	})
}
