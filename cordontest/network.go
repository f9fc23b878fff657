package cordontest

import (
	"context"
	"fmt"
	"net/url"

	"github.com/moby/moby/client"
	"github.com/testcontainers/testcontainers-go"
)

// engineNetworking decides how Run's containers reach the network, once
// per Run. On an engine with a default bridge network nothing changes:
// ports are published, unless [WithHostNetwork] was given. On an engine without one (dockerd
// --bridge=none), testcontainers-go would create a bridge network of its
// own, reaper_default, attach every container to it, and never remove it
// (only Ryuk removes networks, and Ryuk itself needs the default bridge).
// So there Run uses the host's network, as WithHostNetwork asks, when the
// engine runs on this machine (a Unix socket; WithHostNetwork skips that
// check) and Ryuk is disabled; otherwise it returns [ErrNoBridge] before
// anything is created.
func engineNetworking(ctx context.Context, o *options) error {
	p, err := testcontainers.NewDockerProvider()
	if err != nil {
		return fmt.Errorf("cordontest: %w", err)
	}
	defer p.Close()
	bridge, err := hasBridge(ctx, p.Client())
	if err != nil {
		return fmt.Errorf("cordontest: %w", err)
	}
	if bridge {
		return nil
	}
	host := p.Client().DaemonHost()
	if u, err := url.Parse(host); !o.hostNetwork && (err != nil || u.Scheme != "unix") {
		return fmt.Errorf("cordontest: %w at %s, and its host network is not this machine's: "+
			"run the tests on the engine's machine (cordontest then uses the host's network, as WithHostNetwork() does), "+
			"or use an engine with a bridge", ErrNoBridge, host)
	}
	if !testcontainers.ReadConfig().RyukDisabled {
		return fmt.Errorf("cordontest: %w at %s, which Ryuk (testcontainers-go's reaper) runs on: "+
			"set TESTCONTAINERS_RYUK_DISABLED=true (Terminate removes what Run started; "+
			"cordontest then uses the host's network, as WithHostNetwork() does)", ErrNoBridge, host)
	}
	o.hostNetwork = true
	return nil
}

// hasBridge reports whether the engine has a default bridge network:
// Docker's "bridge", or Podman's "podman".
func hasBridge(ctx context.Context, c client.APIClient) (bool, error) {
	nets, err := c.NetworkList(ctx, client.NetworkListOptions{})
	if err != nil {
		return false, fmt.Errorf("list the engine's networks: %w", err)
	}
	for _, n := range nets.Items {
		if n.Name == testcontainers.Bridge || n.Name == testcontainers.Podman {
			return true, nil
		}
	}
	return false, nil
}
