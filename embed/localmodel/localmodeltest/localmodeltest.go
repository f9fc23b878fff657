// Package localmodeltest gives tests one shared local embedding model
// server per test binary (see package localmodel).
//
//	func TestSomething(t *testing.T) {
//		srv := localmodeltest.Require(t)
//		resp, err := http.Post(srv.URL()+"/v1/embeddings", "application/json", body)
//		...
//	}
//
// When the model is not installed, Require skips the test with the install
// command in the message, or fails it where the model is required: when
// CORDON_REQUIRE_MODEL or CI is set ('make test' sets CORDON_REQUIRE_MODEL=1
// after installing the model).
package localmodeltest

import (
	"context"
	"os"
	"sync"
	"testing"

	"github.com/cordon-rag/cordon/embed/localmodel"
)

// EnvRequire names the variable that turns a missing model from a skip into
// a failure.
const EnvRequire = "CORDON_REQUIRE_MODEL"

var (
	once        sync.Once
	shared      *localmodel.Server
	unavailable error
	startErr    error
)

// Require returns the test binary's shared server, starting it on first
// use with default options. The server is never closed explicitly: it exits
// when the test binary does (its standard input closes). Tests must not
// call Close on it; a test that needs other options calls localmodel.Start
// itself.
func Require(tb testing.TB) *localmodel.Server {
	tb.Helper()
	once.Do(func() {
		if err := localmodel.Available(); err != nil {
			unavailable = err
			return
		}
		shared, startErr = localmodel.Start(context.Background(), localmodel.Options{})
	})
	if unavailable != nil {
		if Required() {
			tb.Fatalf("the local embedding model is required here (%s or CI is set): %v", EnvRequire, unavailable)
		}
		tb.Skipf("SKIPPING: %v (or run 'make model'; set %s=1 to fail instead of skipping)", unavailable, EnvRequire)
	}
	if startErr != nil {
		tb.Fatalf("start the local embedding model: %v", startErr)
	}
	return shared
}

// Required reports whether a missing model fails tests rather than skipping
// them: CORDON_REQUIRE_MODEL or CI is set to anything but "", "0" or "false".
func Required() bool {
	for _, name := range []string{EnvRequire, "CI"} {
		if v := os.Getenv(name); v != "" && v != "0" && v != "false" {
			return true
		}
	}
	return false
}
