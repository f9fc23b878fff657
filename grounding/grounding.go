package grounding

import (
	"fmt"
	"unicode/utf8"

	"github.com/cordon-rag/cordon/analysis"
	"github.com/cordon-rag/cordon/cordontype"
)

// DefaultThreshold is the share of a claim's tokens a chunk must hold to
// support it.
const DefaultThreshold = 0.6

// Claim is one claim's verdict. Citation is nil when unsupported; Overlap is
// the best share found either way.
type Claim struct {
	Claim     string
	Supported bool
	Citation  *Citation
	Overlap   float64
}

// Citation points a supported claim at its span.
type Citation struct {
	ChunkID   string
	DocID     string
	Section   string
	StartChar int
	EndChar   int
}

// Report is the grounding verdict of a whole answer.
type Report struct {
	Claims     []Claim
	Coverage   float64 // supported / claims; 1 for no claims
	IsGrounded bool    // every claim supported
}

// Check grounds claims against retrieved chunks in rank order.
func Check(claims []string, retrieved []cordontype.Chunk, threshold float64) (Report, error) {
	if !(threshold >= 0 && threshold <= 1) {
		return Report{}, fmt.Errorf("%w: threshold %v must be in [0, 1]", ErrInvalidThreshold, threshold)
	}
	sets := make([]map[string]struct{}, len(retrieved))
	counter := analysis.NewCounter()
	for i, c := range retrieved {
		terms, _ := counter.Count(c.Text)
		m := make(map[string]struct{}, len(terms))
		for _, t := range terms {
			m[t] = struct{}{}
		}
		sets[i] = m
	}
	rep := Report{Claims: make([]Claim, 0, len(claims)), IsGrounded: true}
	supported := 0
	for _, text := range claims {
		cl := Claim{Claim: text}
		terms := analysis.TokenSet(text)
		best := -1
		for i, set := range sets {
			if len(terms) == 0 {
				break
			}
			n := 0
			for _, t := range terms {
				if _, ok := set[t]; ok {
					n++
				}
			}
			ov := float64(n) / float64(len(terms))
			if best < 0 || ov > cl.Overlap {
				best, cl.Overlap = i, ov
			}
		}
		if best >= 0 && cl.Overlap > 0 && cl.Overlap >= threshold {
			c := retrieved[best]
			cl.Supported = true
			cl.Citation = &Citation{ChunkID: c.ChunkID, DocID: c.DocID, Section: c.Section, StartChar: c.StartChar, EndChar: c.EndChar}
			supported++
		} else {
			rep.IsGrounded = false
		}
		rep.Claims = append(rep.Claims, cl)
	}
	rep.Coverage = 1
	if len(claims) > 0 {
		rep.Coverage = float64(supported) / float64(len(claims))
	}
	return rep, nil
}

// SplitClaims splits an answer into claims at '.', '!' or '?' followed by
// whitespace or the end of the text. Each claim keeps its terminator and is
// trimmed of surrounding whitespace; empty pieces are dropped.
func SplitClaims(answer string) []string {
	var out []string
	start := 0
	for i, r := range answer {
		if r != '.' && r != '!' && r != '?' {
			continue
		}
		end := i + utf8.RuneLen(r)
		next, _ := utf8.DecodeRuneInString(answer[end:])
		if end == len(answer) || analysis.IsSpace(next) {
			out = appendClaim(out, answer[start:end])
			start = end
		}
	}
	return appendClaim(out, answer[start:])
}

func appendClaim(out []string, s string) []string {
	b, e := 0, len(s)
	for b < e {
		r, n := utf8.DecodeRuneInString(s[b:])
		if !analysis.IsSpace(r) {
			break
		}
		b += n
	}
	for e > b {
		r, n := utf8.DecodeLastRuneInString(s[b:e])
		if !analysis.IsSpace(r) {
			break
		}
		e -= n
	}
	if b == e {
		return out
	}
	return append(out, s[b:e])
}
