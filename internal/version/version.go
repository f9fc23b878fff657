// Package version says which build of Cordon is running: the version,
// commit and build date stamped at link time (make build, deploy/Dockerfile:
// -ldflags "-X github.com/cordon-rag/cordon/internal/version.version=..."),
// else what the Go toolchain recorded in the binary (module version, VCS
// revision and time), else "unknown".
package version

import (
	"runtime"
	"runtime/debug"
)

// Set with -ldflags -X at link time; empty otherwise.
var (
	version string
	commit  string
	date    string
)

// Info describes the running binary.
type Info struct {
	Version   string `json:"version"`
	Revision  string `json:"revision"`
	BuildDate string `json:"build_date"`
	GoVersion string `json:"go_version"`
	// Modified reports a build from a work tree with uncommitted changes
	// (the toolchain's vcs.modified).
	Modified bool `json:"modified,omitempty"`
}

// Get returns the running binary's build information.
func Get() Info {
	info := Info{Version: version, Revision: commit, BuildDate: date, GoVersion: runtime.Version()}
	if bi, ok := debug.ReadBuildInfo(); ok {
		info = fromBuildInfo(info, bi)
	}
	for _, f := range []*string{&info.Version, &info.Revision, &info.BuildDate} {
		if *f == "" {
			*f = "unknown"
		}
	}
	return info
}

// fromBuildInfo fills what the linker flags left empty from the toolchain's
// record.
func fromBuildInfo(info Info, bi *debug.BuildInfo) Info {
	if info.Version == "" && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
		info.Version = bi.Main.Version
	}
	if bi.GoVersion != "" {
		info.GoVersion = bi.GoVersion
	}
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			if info.Revision == "" {
				info.Revision = s.Value
			}
		case "vcs.time":
			if info.BuildDate == "" {
				info.BuildDate = s.Value
			}
		case "vcs.modified":
			info.Modified = s.Value == "true"
		}
	}
	return info
}
