package sysmem

import (
	"testing"
	"testing/fstest"
)

func TestRead(t *testing.T) {
	const meminfo = "MemTotal:       24683584 kB\nMemFree:        1000 kB\n"
	const total = 24683584 << 10
	file := func(s string) *fstest.MapFile { return &fstest.MapFile{Data: []byte(s)} }
	tests := []struct {
		name       string
		files      fstest.MapFS
		want       int64
		wantSource string
		wantErr    bool
	}{
		{
			name:  "no cgroup: physical memory",
			files: fstest.MapFS{"proc/meminfo": file(meminfo)},
			want:  total, wantSource: "/proc/meminfo MemTotal",
		},
		{
			name: "cgroup v2 limit of the group",
			files: fstest.MapFS{
				"proc/meminfo":     file(meminfo),
				"proc/self/cgroup": file("0::/kubepods/pod1/c1\n"),
				"sys/fs/cgroup/kubepods/pod1/c1/memory.max": file("2147483648\n"),
				"sys/fs/cgroup/kubepods/memory.max":         file("max\n"),
			},
			want: 2 << 30, wantSource: "cgroup v2 memory.max",
		},
		{
			name: "cgroup v2: an ancestor's tighter limit wins",
			files: fstest.MapFS{
				"proc/meminfo":                 file(meminfo),
				"proc/self/cgroup":             file("0::/a/b\n"),
				"sys/fs/cgroup/a/b/memory.max": file("max\n"),
				"sys/fs/cgroup/a/memory.max":   file("1073741824\n"),
			},
			want: 1 << 30, wantSource: "cgroup v2 memory.max",
		},
		{
			name: "cgroup v2 inside a container: the group is the mount's root",
			files: fstest.MapFS{
				"proc/meminfo":             file(meminfo),
				"proc/self/cgroup":         file("0::/\n"),
				"sys/fs/cgroup/memory.max": file("536870912\n"),
			},
			want: 512 << 20, wantSource: "cgroup v2 memory.max",
		},
		{
			name: "cgroup v2 max: physical memory",
			files: fstest.MapFS{
				"proc/meminfo":             file(meminfo),
				"proc/self/cgroup":         file("0::/\n"),
				"sys/fs/cgroup/memory.max": file("max\n"),
			},
			want: total, wantSource: "/proc/meminfo MemTotal",
		},
		{
			name: "cgroup v1 limit",
			files: fstest.MapFS{
				"proc/meminfo":     file(meminfo),
				"proc/self/cgroup": file("5:devices:/\n4:memory:/process_api/x\n0::/\n"),
				"sys/fs/cgroup/memory/process_api/x/memory.limit_in_bytes": file("3221225472\n"),
				"sys/fs/cgroup/memory/memory.limit_in_bytes":               file("9223372036854771712\n"),
			},
			want: 3 << 30, wantSource: "cgroup v1 memory.limit_in_bytes",
		},
		{
			name: "cgroup v1 unlimited: physical memory",
			files: fstest.MapFS{
				"proc/meminfo":     file(meminfo),
				"proc/self/cgroup": file("4:memory:/process_api/x\n0::/\n"),
				"sys/fs/cgroup/memory/process_api/x/memory.limit_in_bytes": file("9223372036854771712\n"),
			},
			want: total, wantSource: "/proc/meminfo MemTotal",
		},
		{
			name: "cgroup v1, controllers joined, path missing under the mount",
			files: fstest.MapFS{
				"proc/meminfo":     file(meminfo),
				"proc/self/cgroup": file("3:cpu,memory:/docker/abc\n"),
				"sys/fs/cgroup/memory/memory.limit_in_bytes": file("268435456\n"),
			},
			want: 256 << 20, wantSource: "cgroup v1 memory.limit_in_bytes",
		},
		{
			name: "a limit above physical memory: physical memory",
			files: fstest.MapFS{
				"proc/meminfo":             file(meminfo),
				"proc/self/cgroup":         file("0::/\n"),
				"sys/fs/cgroup/memory.max": file("107374182400\n"),
			},
			want: total, wantSource: "/proc/meminfo MemTotal",
		},
		{
			name:    "nothing readable",
			files:   fstest.MapFS{},
			wantErr: true,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := read(tt.files)
			if tt.wantErr {
				if err == nil {
					t.Fatalf("got %+v, want an error", got)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got.Bytes != tt.want || got.Source != tt.wantSource {
				t.Errorf("got %d bytes from %q, want %d from %q", got.Bytes, got.Source, tt.want, tt.wantSource)
			}
		})
	}
}
