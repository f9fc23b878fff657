package eval

import (
	"flag"
	"os"
	"path/filepath"
	"testing"

	"github.com/cordon-rag/cordon/cordontype"
	"github.com/cordon-rag/cordon/index"
	"github.com/cordon-rag/cordon/index/memindex"
)

var bytesBEIR = flag.String("bytes-beir", "", "BenchmarkBEIRIndexBytes: the BEIR dataset directory whose corpus.jsonl to index (e.g. ../../../shared/eval/scifact)")

// BenchmarkBEIRIndexBytes indexes a BEIR corpus (-bytes-beir DIR) under
// the default settings, each document with its title as its title, as a
// cache load builds a tenant (memindex.Builder), and reports what the
// index is charged (Index.Bytes) per chunk: the memory of a real corpus,
// whose many rare terms weigh more than the bench corpus's. (The live heap
// the build adds would be less than the charge here: the index shares the
// texts and term strings index.Prepare made before it, which a cache load
// makes for the index alone.)
//
//	go test ./lab/eval -run '^$' -bench BEIRIndexBytes -benchtime 1x -bytes-beir /path/to/scifact
func BenchmarkBEIRIndexBytes(b *testing.B) {
	if *bytesBEIR == "" {
		b.Skip("no -bytes-beir DIR given")
	}
	f, err := os.Open(filepath.Join(*bytesBEIR, "corpus.jsonl"))
	if err != nil {
		b.Fatal(err)
	}
	docs, err := ReadBEIRCorpus(f, "corpus.jsonl", TitleField, false)
	f.Close()
	if err != nil {
		b.Fatal(err)
	}
	s := index.DefaultSettings()
	prepared := make([][]index.PreparedChunk, len(docs))
	chunks := 0
	for i, d := range docs {
		pcs, err := index.Prepare(&cordontype.Document{Tenant: "t", DocID: d.ID, Text: d.Text, Title: d.Title, Classification: cordontype.Public}, s)
		if err != nil {
			b.Fatal(err)
		}
		prepared[i] = pcs
		chunks += len(pcs)
	}
	var charged int64
	for b.Loop() {
		bl := memindex.NewBuilder(s, chunks)
		for i, d := range docs {
			bl.Add(d.ID, prepared[i])
		}
		charged = bl.Index().Bytes()
	}
	b.ReportMetric(float64(chunks), "chunks")
	b.ReportMetric(float64(charged)/float64(chunks), "bytes/chunk")
}
