package version

import (
	"runtime/debug"
	"testing"
)

func TestFromBuildInfo(t *testing.T) {
	bi := &debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Version: "v0.4.0"}, Settings: []debug.BuildSetting{
		{Key: "vcs.revision", Value: "8c40edf"}, {Key: "vcs.time", Value: "2026-01-02T03:04:05Z"}, {Key: "vcs.modified", Value: "true"},
	}}
	tests := []struct {
		name string
		in   Info
		bi   *debug.BuildInfo
		want Info
	}{
		{"toolchain record only", Info{}, bi, Info{Version: "v0.4.0", Revision: "8c40edf", BuildDate: "2026-01-02T03:04:05Z", GoVersion: "go1.26.8", Modified: true}},
		{"linker flags win", Info{Version: "v1.0.0", Revision: "abc", BuildDate: "2026-02-01"}, bi, Info{Version: "v1.0.0", Revision: "abc", BuildDate: "2026-02-01", GoVersion: "go1.26.8", Modified: true}},
		{"devel is no version", Info{}, &debug.BuildInfo{Main: debug.Module{Version: "(devel)"}}, Info{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := fromBuildInfo(tt.in, tt.bi); got != tt.want {
				t.Fatalf("got %+v, want %+v", got, tt.want)
			}
		})
	}
}

func TestGetNeverEmpty(t *testing.T) {
	info := Get()
	if info.Version == "" || info.Revision == "" || info.BuildDate == "" || info.GoVersion == "" {
		t.Fatalf("Get() = %+v: a field is empty", info)
	}
}
