package grounding

import (
	"fmt"
	"strings"
	"testing"

	"github.com/cordon-rag/cordon/cordontype"
)

// BenchmarkCheck grounds 5 claims against 10 chunks of about 200 words.
func BenchmarkCheck(b *testing.B) {
	var chunks []cordontype.Chunk
	for i := range 10 {
		text := strings.Repeat(fmt.Sprintf("Payment PMT-%d is on hold pending sanctions review; release requires two approvals. ", 700+i), 15)
		chunks = append(chunks, cordontype.Chunk{ChunkID: fmt.Sprintf("d::%d", i), DocID: "d", Section: "body", Text: text})
	}
	claims := []string{"PMT-705 is on hold", "release needs two approvals", "sanctions review is pending", "the wire was returned", "PMT-709 released"}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Check(claims, chunks, 0.5); err != nil {
			b.Fatal(err)
		}
	}
}
