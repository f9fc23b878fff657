// Command links writes, for a corpus rendered by 'cordon-lab corpus', a
// JSON map from each doc id to the doc ids of the same corpus it links to:
// docs/quality.md's measurement of link expansion ("Links, measured"). Man
// pages link through their SEE ALSO references, name(section), resolved
// through manifest.json's source paths; Go package docs through import
// paths and [pkg.Name] doc links (and, with -wide, qualified identifiers
// in Go code blocks). Statistics go to stderr.
//
//	go run ./lab/eval/peers/links -genre man -corpus DIR > man.json
//	go run ./lab/eval/peers/links -genre go -corpus DIR [-wide] > go.json
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
)

func main() {
	genre := flag.String("genre", "man", "man or go")
	corpus := flag.String("corpus", "", "corpus directory")
	wide := flag.Bool("wide", false, "go: also qualified identifiers (io.Reader) in code blocks")
	flag.Parse()
	if *corpus == "" {
		fmt.Fprintln(os.Stderr, "links: -corpus DIR is required (a corpus written by 'cordon-lab corpus')")
		os.Exit(2)
	}
	docs, err := readCorpus(*corpus)
	if err != nil {
		fmt.Fprintln(os.Stderr, "links:", err)
		os.Exit(1)
	}
	var links map[string][]string
	switch *genre {
	case "man":
		links, err = manLinks(*corpus, docs)
	case "go":
		links = goLinks(docs, *wide)
	default:
		err = fmt.Errorf("unknown genre %q", *genre)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "links:", err)
		os.Exit(1)
	}
	stats(links, len(docs))
	enc := json.NewEncoder(os.Stdout)
	enc.SetIndent("", " ")
	if err := enc.Encode(links); err != nil {
		fmt.Fprintln(os.Stderr, "links:", err)
		os.Exit(1)
	}
}

// readCorpus maps doc id (path without .md) to text.
func readCorpus(dir string) (map[string]string, error) {
	docs := map[string]string{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(p, ".md") {
			return err
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		docs[strings.TrimSuffix(filepath.ToSlash(rel), ".md")] = string(b)
		return nil
	})
	return docs, err
}

func stats(links map[string][]string, n int) {
	with, edges := 0, 0
	in := map[string]int{}
	for _, l := range links {
		if len(l) > 0 {
			with++
		}
		edges += len(l)
		for _, t := range l {
			in[t]++
		}
	}
	type kv struct {
		k string
		v int
	}
	var top []kv
	for k, v := range in {
		top = append(top, kv{k, v})
	}
	sort.Slice(top, func(i, j int) bool { return top[i].v > top[j].v || top[i].v == top[j].v && top[i].k < top[j].k })
	if len(top) > 5 {
		top = top[:5]
	}
	fmt.Fprintf(os.Stderr, "docs %d, with out-links %d (%.1f%%), edges %d, mean out-degree %.2f (%.2f over linking docs), docs with in-links %d, top in-degree %v\n",
		n, with, 100*float64(with)/float64(n), edges, float64(edges)/float64(n), float64(edges)/float64(max(with, 1)), len(in), top)
}

// manifest is the part of manifest.json the man mapping needs.
type manifest struct {
	Documents []struct {
		DocID  string `json:"doc_id"`
		Source string `json:"source"`
	} `json:"documents"`
}

var (
	heading = regexp.MustCompile(`(?m)^# `)
	// name(section), allowing markdown emphasis around the name.
	manRef = regexp.MustCompile(`([A-Za-z0-9_.:+@-]+)\**_*\(([0-9][a-z]*)\)`)
)

// manLinks parses each page's SEE ALSO section for name(section)
// references and maps them, through the manifest's source paths, to doc ids.
func manLinks(dir string, docs map[string]string) (map[string][]string, error) {
	b, err := os.ReadFile(filepath.Join(dir, "manifest.json"))
	if err != nil {
		return nil, fmt.Errorf("read manifest: %w", err)
	}
	var m manifest
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, fmt.Errorf("decode manifest: %w", err)
	}
	// name -> section -> doc id, from /usr/share/man/man1/openssl-s_client.1ssl.gz.
	bySec := map[string]map[string]string{}
	for _, d := range m.Documents {
		base := strings.TrimSuffix(filepath.Base(d.Source), ".gz")
		i := strings.LastIndex(base, ".")
		if i < 0 {
			continue
		}
		name, sec := base[:i], base[i+1:]
		if bySec[name] == nil {
			bySec[name] = map[string]string{}
		}
		bySec[name][sec] = d.DocID
	}
	resolve := func(name, sec string) string {
		if id, ok := bySec[name][sec]; ok {
			return id
		}
		// openssl-x509(1) is filed as 1ssl: a reference to the main section
		// matches a subsection of it.
		var cands []string
		for s, id := range bySec[name] {
			if strings.HasPrefix(s, sec[:1]) {
				cands = append(cands, id)
			}
		}
		if len(cands) == 1 {
			return cands[0]
		}
		return ""
	}
	links := map[string][]string{}
	refs, resolved := 0, 0
	for id, text := range docs {
		sa := seeAlso(text)
		// Undo the renderer's line wrapping: "git-ls-\n       files(1)".
		sa = regexp.MustCompile(`-\n\s+`).ReplaceAllString(sa, "-")
		set := map[string]bool{}
		for _, mm := range manRef.FindAllStringSubmatch(sa, -1) {
			refs++
			name := strings.Trim(mm[1], "*_")
			if t := resolve(name, mm[2]); t != "" && t != id {
				resolved++
				set[t] = true
			}
		}
		links[id] = keys(set)
	}
	fmt.Fprintf(os.Stderr, "man: %d SEE ALSO references, %d resolve to another corpus page\n", refs, resolved)
	return links, nil
}

// seeAlso returns the body of the "# SEE ALSO" section, or "".
func seeAlso(text string) string {
	i := strings.Index(text, "\n# SEE ALSO")
	if i < 0 {
		return ""
	}
	body := text[i+len("\n# SEE ALSO"):]
	if j := heading.FindStringIndex(body); j != nil {
		body = body[:j[0]]
	}
	return body
}

var (
	quoted   = regexp.MustCompile(`"([a-z0-9]+(?:/[a-z0-9]+)*)"`)
	slashed  = regexp.MustCompile(`\b([a-z0-9]+(?:/[a-z0-9]+)+)\b`)
	docLink  = regexp.MustCompile(`\[\*?([a-z0-9]+(?:/[a-z0-9]+)*)\.[A-Za-z_]`)
	importLn = regexp.MustCompile("(?m)^import \"[^\"]+\"$")
	codeBlk  = regexp.MustCompile("(?s)```go\n(.*?)```")
	qualID   = regexp.MustCompile(`\b([a-z][a-z0-9]*)\.[A-Z][A-Za-z0-9_]*`)
)

// goLinks finds references to other packages: quoted import paths, import
// paths with a slash in the text, and doc links [pkg.Name] whose pkg is a
// full path or a last element naming one package of the corpus. With wide,
// qualified identifiers in Go code blocks (signatures: io.Reader) count too.
func goLinks(docs map[string]string, wide bool) map[string][]string {
	byPath := map[string]string{} // import path -> doc id
	byLast := map[string][]string{}
	for id := range docs {
		p := strings.TrimPrefix(id, "go/")
		byPath[p] = id
		last := p[strings.LastIndex(p, "/")+1:]
		byLast[last] = append(byLast[last], id)
	}
	short := func(s string) string {
		if id, ok := byPath[s]; ok && strings.Contains(s, "/") {
			return id
		}
		if l := byLast[s]; len(l) == 1 {
			return l[0]
		}
		if id, ok := byPath[s]; ok { // io, fmt: the top-level package
			return id
		}
		return ""
	}
	links := map[string][]string{}
	for id, text := range docs {
		// The page's own import line names itself.
		text = importLn.ReplaceAllString(text, "")
		set := map[string]bool{}
		add := func(t string) {
			if t != "" && t != id {
				set[t] = true
			}
		}
		for _, m := range quoted.FindAllStringSubmatch(text, -1) {
			add(byPath[m[1]])
		}
		for _, m := range slashed.FindAllStringSubmatch(text, -1) {
			add(byPath[m[1]])
		}
		for _, m := range docLink.FindAllStringSubmatch(text, -1) {
			add(short(m[1]))
		}
		if wide {
			for _, blk := range codeBlk.FindAllStringSubmatch(text, -1) {
				for _, m := range qualID.FindAllStringSubmatch(blk[1], -1) {
					add(short(m[1]))
				}
			}
		}
		links[id] = keys(set)
	}
	return links
}

func keys(set map[string]bool) []string {
	out := make([]string, 0, len(set))
	for k := range set {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
