package cordontest

import "errors"

// ErrNoBridge is returned by [Run] when the Docker engine has no bridge
// network (dockerd --bridge=none) and Run cannot use the host's network
// instead: the engine is not on this machine, or Ryuk (testcontainers-go's
// reaper, which needs the bridge) is enabled. The error's text says which,
// and what to set.
var ErrNoBridge = errors.New("the Docker engine has no bridge network")
