// Package corpus turns real text nobody on the project wrote into Markdown
// documents Cordon can index, and builds known-item query sets from them, for
// the retrieval-quality evaluation of package eval.
//
// # Manual pages
//
// [ManPages] renders the machine's own manual pages with man-db
// (man -l, groff's tty output) and converts each page with [ConvertRendered]:
// the page's section titles (NAME, SYNOPSIS, DESCRIPTION, ...) become "#"
// headings, its subsection titles "##" headings, and the body text is kept as
// rendered. Everything that could vary between runs is pinned: pages are
// visited in sorted order, the line width is fixed, the locale is C.UTF-8,
// hyphenation and justification are off, and every environment variable man
// reads is set explicitly. Two runs on the same installed pages write
// byte-identical files.
//
// A page's document id is "man/<section>/<name>", its file
// "<out>/man/<section>/<name>.md". Aliases (symbolic links and ".so" stubs
// that point at another page in the same run) are skipped, so one text is
// indexed once. A page that fails to render, renders to nothing, or would be
// refused by Cordon (no token, not UTF-8, too large) is reported and skipped.
//
// # Go documentation
//
// [GoDocs] renders the documentation of the Go standard library installed on
// the machine (GOROOT/src; packages under internal, vendor, cmd and testdata
// left out) with go/doc, the library "go doc" is built on, one Markdown
// document per package: "# package NAME", the package comment, then
// "## Constants", "## Variables", "## Functions" and "## Types", every
// function, type and method a "###" heading over its declaration (a fenced
// Go block) and its doc comment, one paragraph per line. Files are chosen
// for a fixed GOOS/GOARCH (linux/amd64 by default), packages visited in
// import-path order, so two runs on the same installation write
// byte-identical files. A package's document id is "go/<import path>".
//
// # PostgreSQL documentation (HTML)
//
// [PGDocs] converts the HTML pages of the PostgreSQL documentation (Debian's
// postgresql-doc-15 installs them under /usr/share/doc/postgresql-doc-15/html)
// with Cordon's own HTML conversion (package htmltext, what `cordon ingest`
// of the page stores) into a BEIR-format dataset, one document per page
// titled by its <title>, and builds two query kinds from its reference
// pages ([PGKindCommand], [PGKindPurpose]): a newcomer's "what does the NAME command do" and
// the page's one-line purpose.
//
// # Loading
//
// [Load] reads every "*.md" file under a directory as a document whose id is
// its path relative to the directory without ".md". Any directory of Markdown
// files is a corpus, not just the man pages.
//
// # Known-item queries
//
// [KnownItemQueries] builds one query per page from its NAME line
// ("ls - list directory contents" gives "list directory contents"), with
// every token of the page's own names removed, so the query describes the page
// without naming it. Pages whose descriptions give the same query are all
// relevant to it. [Queries] builds the other kinds: for man pages body,
// option and held-out sentences, for Go documentation ([GoKinds]) summary
// sentences, signatures and held-out doc-comment sentences, several per
// package.
package corpus
