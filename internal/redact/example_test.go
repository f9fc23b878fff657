package redact_test

import (
	"fmt"

	"github.com/cordon-rag/cordon/internal/redact"
)

// A provider's 401 echoes the key in a JSON string, its "/" escaped and its
// "+" percent-encoded; the message around it is kept.
func ExampleRedactor_String() {
	r := redact.New("rk-Ab9/x+Yz")
	fmt.Println(r.String(`{"error":"invalid key Bearer rk-Ab9\/x%2BYz"}`))
	// Output: {"error":"invalid key Bearer [redacted]"}
}
