package localmodel_test

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/cordon-rag/cordon/embed/localmodel"
	"github.com/cordon-rag/cordon/embed/localmodel/localmodeltest"
)

// corpusNames reads the NAME line of every man page in the evaluation
// corpus (testdata/eval/corpus/man), sorted.
func corpusNames(b *testing.B) []string {
	b.Helper()
	files, err := filepath.Glob(filepath.Join("..", "..", "testdata", "eval", "corpus", "man", "*", "*.md"))
	if err != nil || len(files) == 0 {
		b.Fatalf("no man pages under testdata/eval/corpus/man (%v)", err)
	}
	var names []string
	for _, f := range files {
		fh, err := os.Open(f)
		if err != nil {
			b.Fatal(err)
		}
		sc := bufio.NewScanner(fh)
		for sc.Scan() {
			if sc.Text() == "# NAME" && sc.Scan() {
				names = append(names, strings.TrimSpace(sc.Text()))
				break
			}
		}
		fh.Close()
	}
	sort.Strings(names)
	return names
}

// BenchmarkEmbeddings measures /v1/embeddings end to end (HTTP, JSON, model)
// at batch sizes 1, 32 and 200 over the corpus's NAME lines; ms/text is the
// figure to read.
//
//	go test -run '^$' -bench Embeddings -benchtime 400x ./embed/localmodel/
func BenchmarkEmbeddings(b *testing.B) {
	srv := localmodeltest.Require(b)
	names := corpusNames(b)
	for _, size := range []int{1, 32, 200} {
		b.Run(fmt.Sprintf("batch=%d", size), func(b *testing.B) {
			batch := make([]string, size)
			for i := range batch {
				batch[i] = names[i%len(names)]
			}
			b.ResetTimer()
			texts := 0
			for texts < b.N {
				embedOpenAI(b, srv, batch...)
				texts += size
			}
			b.ReportMetric(float64(b.Elapsed().Microseconds())/1000/float64(texts), "ms/text")
		})
	}
}

// BenchmarkStart measures Start to "listening" (Node start, model load, one
// warm-up inference) and Close.
func BenchmarkStart(b *testing.B) {
	localmodeltest.Require(b)
	for b.Loop() {
		start := time.Now()
		srv, err := localmodel.Start(context.Background(), localmodel.Options{})
		if err != nil {
			b.Fatal(err)
		}
		b.ReportMetric(float64(time.Since(start).Milliseconds()), "ms/start")
		if err := srv.Close(); err != nil {
			b.Fatal(err)
		}
	}
}
