package cordontest_test

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"

	"github.com/moby/moby/client"
	"github.com/testcontainers/testcontainers-go"

	"github.com/cordon-rag/cordon/cordontest"
	"github.com/cordon-rag/cordon/internal/dockertest"
)

// TestRunDefaultNetworking runs Cordon with Run's default options, as the
// README does (no WithHostNetwork), whatever the engine: on one without a
// bridge (make test/containers' engine) Run must use the host's network by
// itself. The engine's networks must be the same afterwards: no
// reaper_default left behind.
func TestRunDefaultNetworking(t *testing.T) {
	dockertest.Require(t)
	ctx := context.Background()
	before := networks(t)
	t.Logf("the engine's networks: %q", before)

	c, err := cordontest.Run(ctx, dockertest.PostgresImage(), cordontest.WithTenants("acme"))
	if err != nil {
		if c != nil {
			t.Logf("container log:\n%s", cordontest.Logs(ctx, c))
		}
		testcontainers.CleanupContainer(t, c)
		t.Fatal(err)
	}
	tok := token(t, c, cordontest.Principal{Subject: "alice", Tenant: "acme", Clearance: "internal", Roles: []string{"reader"}})
	if got := retrieve(t, c.Client(tok), c.URL()+"/v1/tenants/acme/retrieve", "anything"); len(got) != 0 {
		t.Errorf("got documents %q in a new tenant, want none", got)
	}
	if err := testcontainers.TerminateContainer(c); err != nil {
		t.Fatal(err)
	}
	if after := networks(t); !slices.Equal(after, before) {
		t.Errorf("the engine's networks: got %q after Run and Terminate, want %q as before", after, before)
	}
}

// TestRunBridgelessRyuk: on an engine without a bridge, Ryuk (which
// needs the bridge) enabled is ErrNoBridge, naming what to set, and Run
// creates nothing. testcontainers-go reads its configuration once per
// process, so the check runs in a child process with Ryuk enabled.
func TestRunBridgelessRyuk(t *testing.T) {
	if os.Getenv("CORDONTEST_RYUK_CHILD") == "1" {
		c, err := cordontest.Run(context.Background(), dockertest.PostgresImage(), cordontest.WithoutServer())
		testcontainers.CleanupContainer(t, c)
		if !errors.Is(err, cordontest.ErrNoBridge) || !strings.Contains(err.Error(), "TESTCONTAINERS_RYUK_DISABLED=true") {
			t.Fatalf("got error %v, want ErrNoBridge naming TESTCONTAINERS_RYUK_DISABLED=true", err)
		}
		if c != nil {
			t.Fatalf("got a container, want nil")
		}
		t.Logf("Run: %v", err)
		return
	}
	dockertest.Require(t)
	before := networks(t)
	if slices.Contains(before, testcontainers.Bridge) {
		t.Skipf("the engine has a bridge network (%q): nothing to check", before)
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestRunBridgelessRyuk$", "-test.v", "-test.count=1")
	cmd.Env = append(os.Environ(), "CORDONTEST_RYUK_CHILD=1", "TESTCONTAINERS_RYUK_DISABLED=false")
	out, err := cmd.CombinedOutput()
	t.Logf("child:\n%s", out)
	if err != nil {
		t.Fatalf("child: %v", err)
	}
	if !strings.Contains(string(out), "--- PASS: TestRunBridgelessRyuk") {
		t.Fatal("the child ran no check")
	}
	if after := networks(t); !slices.Equal(after, before) {
		t.Errorf("the engine's networks: got %q, want %q as before", after, before)
	}
}

// networks lists the names of the engine's networks, sorted.
func networks(t *testing.T) []string {
	t.Helper()
	p, err := testcontainers.NewDockerProvider()
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	nets, err := p.Client().NetworkList(context.Background(), client.NetworkListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, n := range nets.Items {
		names = append(names, n.Name)
	}
	slices.Sort(names)
	return names
}
