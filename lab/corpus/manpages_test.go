package corpus

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// writeGz writes a gzip-compressed file.
func writeGz(t *testing.T, path, text string) {
	t.Helper()
	var b bytes.Buffer
	zw := gzip.NewWriter(&b)
	zw.Write([]byte(text))
	zw.Close()
	if err := os.WriteFile(path, b.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
}

// fakeRoot builds a small manual tree:
//
//	man1/ls.1.gz           a page
//	man1/dir.1.gz       -> ls.1.gz (symbolic link: an alias)
//	man1/c++.1.gz          a page whose name needs escaping
//	man1/broken.1.gz       a page the renderer fails on
//	man1/gcloud-x.1.gz     a page excluded by pattern
//	man1/vdir.1            ".so man1/ls.1" (a stub: an alias)
//	man1/README            not a page
//	man8/mount.8.gz        a page
func fakeRoot(t *testing.T) string {
	t.Helper()
	root := t.TempDir()
	for _, d := range []string{"man1", "man8"} {
		if err := os.MkdirAll(filepath.Join(root, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	writeGz(t, filepath.Join(root, "man1/ls.1.gz"), "ls|list directory contents")
	writeGz(t, filepath.Join(root, "man1/c++.1.gz"), "c++|compile C++ programs")
	writeGz(t, filepath.Join(root, "man1/broken.1.gz"), "FAIL")
	writeGz(t, filepath.Join(root, "man1/gcloud-x.1.gz"), "gcloud-x|manage clouds")
	writeGz(t, filepath.Join(root, "man8/mount.8.gz"), "mount|mount a filesystem")
	if err := os.Symlink("ls.1.gz", filepath.Join(root, "man1/dir.1.gz")); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, "man1/vdir.1"), []byte(".\\\" stub\n.so man1/ls.1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, "man1/README"), []byte("hi"), 0o644); err != nil {
		t.Fatal(err)
	}
	return root
}

// fakeRender "renders" a fake page "name|description" as groff would.
func fakeRender(_ context.Context, path string, width int) ([]byte, error) {
	data, err := readPage(path)
	if err != nil {
		return nil, err
	}
	name, desc, ok := strings.Cut(string(data), "|")
	if !ok {
		return nil, errors.New("exit status 3: cannot format")
	}
	return []byte("X(1)   Manual   X(1)\n\n" + bold("NAME") + "\n       " + name + " - " + desc +
		"\n\n" + bold("DESCRIPTION") + "\n       " + desc + " at width " + strings.Repeat("w", width/50) + "\n\nfooter   X(1)\n"), nil
}

func TestManPages(t *testing.T) {
	root := fakeRoot(t)
	out := t.TempDir()
	opts := ManPageOptions{Root: root, Sections: []string{"8", "1"}, Exclude: []string{"gcloud*"}, Render: fakeRender, Workers: 3}
	m, err := ManPages(context.Background(), out, opts)
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, d := range m.Documents {
		ids = append(ids, d.DocID)
	}
	if want := []string{"man/1/c_2b_2b", "man/1/ls", "man/8/mount"}; !reflect.DeepEqual(ids, want) {
		t.Errorf("documents: got %v, want %v", ids, want)
	}
	if len(m.Skipped) != 1 || m.Skipped[0].DocID != "man/1/broken" || !strings.Contains(m.Skipped[0].Reason, "cannot format") {
		t.Errorf("skipped: got %+v, want man/1/broken with the renderer's message", m.Skipped)
	}
	wantAliases := []Alias{
		{DocID: "man/1/dir", Source: filepath.Join(root, "man1/dir.1.gz"), AliasOf: "man/1/ls"},
		{DocID: "man/1/vdir", Source: filepath.Join(root, "man1/vdir.1"), AliasOf: "man/1/ls"},
	}
	if !reflect.DeepEqual(m.Aliases, wantAliases) {
		t.Errorf("aliases: got %+v, want %+v", m.Aliases, wantAliases)
	}
	got, err := os.ReadFile(filepath.Join(out, "man/1/ls.md"))
	if err != nil {
		t.Fatal(err)
	}
	want := "# NAME\n       ls - list directory contents\n\n# DESCRIPTION\n       list directory contents at width ww\n"
	if string(got) != want {
		t.Errorf("ls.md: got %q, want %q", got, want)
	}
	// The manifest on disk is the returned one.
	data, err := os.ReadFile(filepath.Join(out, ManifestName))
	if err != nil {
		t.Fatal(err)
	}
	var onDisk Manifest
	if err := json.Unmarshal(data, &onDisk); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(onDisk.Documents, m.Documents) || !reflect.DeepEqual(onDisk.Sections, []string{"1", "8"}) {
		t.Errorf("manifest on disk differs: %+v", onDisk)
	}
	// Loading the output gives the documents in id order.
	docs, err := Load(out)
	if err != nil {
		t.Fatal(err)
	}
	if len(docs) != 3 || docs[1].ID != "man/1/ls" || docs[1].Text != want {
		t.Errorf("load: got %+v", docs)
	}

	// A second run into the same directory is refused, then replaces with
	// --replace, byte for byte, whatever the number of workers.
	opts.Workers = 1
	if _, err := ManPages(context.Background(), out, opts); !errors.Is(err, ErrOutputNotEmpty) {
		t.Errorf("second run: got %v, want ErrOutputNotEmpty", err)
	}
	opts.Replace = true
	if _, err := ManPages(context.Background(), out, opts); err != nil {
		t.Fatal(err)
	}
	again, err := os.ReadFile(filepath.Join(out, ManifestName))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(again, data) {
		t.Errorf("a second run wrote a different manifest")
	}
}

func TestSelectPagesEveryAndLimit(t *testing.T) {
	root := fakeRoot(t)
	opts := ManPageOptions{Root: root, Sections: []string{"1", "8"}, Every: 2}
	pages, _, err := SelectPages(opts)
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, p := range pages {
		ids = append(ids, p.DocID)
	}
	// All pages in order: broken, c++, gcloud-x, ls, mount; every 2nd from the 1st.
	if want := []string{"man/1/broken", "man/1/gcloud-x", "man/8/mount"}; !reflect.DeepEqual(ids, want) {
		t.Errorf("every 2: got %v, want %v", ids, want)
	}
	opts.Limit = 1
	pages, _, err = SelectPages(opts)
	if err != nil || len(pages) != 1 || pages[0].DocID != "man/1/broken" {
		t.Errorf("every 2, limit 1: got %+v, %v", pages, err)
	}
}

func TestSelectPagesErrors(t *testing.T) {
	root := fakeRoot(t)
	tests := []struct {
		name string
		opts ManPageOptions
		want error
	}{
		{"missing section", ManPageOptions{Root: root, Sections: []string{"3"}}, ErrNoPages},
		{"everything excluded", ManPageOptions{Root: root, Sections: []string{"8"}, Exclude: []string{"*"}}, ErrNoPages},
		{"no sections", ManPageOptions{Root: root}, ErrInvalidOptions},
		{"path in section", ManPageOptions{Root: root, Sections: []string{"../1"}}, ErrInvalidOptions},
		{"bad pattern", ManPageOptions{Root: root, Sections: []string{"1"}, Exclude: []string{"["}}, ErrInvalidOptions},
		{"negative limit", ManPageOptions{Root: root, Sections: []string{"1"}, Limit: -1}, ErrInvalidOptions},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, _, err := SelectPages(tt.opts); !errors.Is(err, tt.want) {
				t.Errorf("got %v, want %v", err, tt.want)
			}
		})
	}
}

// TestManRendererRealPage renders one real page with the machine's man-db,
// the path every corpus run takes.
func TestManRendererRealPage(t *testing.T) {
	const page = "/usr/share/man/man1/ls.1.gz"
	if _, err := exec.LookPath("man"); err != nil {
		t.Skip("SKIP: man is not installed; the man-page corpus cannot be built on this machine")
	}
	if _, err := os.Stat(page); err != nil {
		t.Skipf("SKIP: %s is not installed", page)
	}
	out, err := ManRenderer(context.Background(), page, DefaultWidth)
	if err != nil {
		t.Fatal(err)
	}
	md, err := ConvertRendered(out)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"# NAME\n", "# SYNOPSIS\n", "# DESCRIPTION\n", "list directory contents"} {
		if !strings.Contains(md, want) {
			t.Errorf("rendered ls(1) lacks %q:\n%s", want, md[:min(len(md), 400)])
		}
	}
	if q, reason := KnownItemQuery("man/1/ls", md); q != "list directory contents" {
		t.Errorf("query: got %q (%s), want %q", q, reason, "list directory contents")
	}
}
