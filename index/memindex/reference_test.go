package memindex_test

import (
	"bytes"
	"context"
	"testing"

	"github.com/cordon-rag/cordon/index"
	"github.com/cordon-rag/cordon/index/memindex/memindextest"
	"github.com/cordon-rag/cordon/replay"
	"github.com/cordon-rag/cordon/store/memory"
)

// compare runs script on the reference store and on a memindex Store and
// requires byte-identical output; it returns the memindex Store, for tests
// that look inside it afterwards.
func compare(t *testing.T, name string, script []byte) *memindextest.Store {
	t.Helper()
	var want, got bytes.Buffer
	if err := replay.Run(context.Background(), script, func(_ context.Context, s index.Settings) (replay.Store, error) { return memory.New(s) }, &want); err != nil {
		t.Fatal(err)
	}
	var st *memindextest.Store
	if err := replay.Run(context.Background(), script, func(_ context.Context, s index.Settings) (replay.Store, error) {
		var err error
		st, err = memindextest.NewStore(s)
		return st, err
	}, &got); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(want.Bytes(), got.Bytes()) {
		t.Fatalf("%s: memindex differs from the reference\nwant %s\ngot  %s", name, want.Bytes(), got.Bytes())
	}
	return st
}
