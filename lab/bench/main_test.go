package bench

import (
	"os"
	"testing"
)

// TestMain lets the test binary be the http system's server process (see
// serverChildEnv) when a test starts it as one.
func TestMain(m *testing.M) {
	ServeChildIfAsked()
	os.Exit(m.Run())
}
