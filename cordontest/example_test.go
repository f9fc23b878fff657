package cordontest_test

import (
	"context"
	"fmt"
	"io"
	"log"
	"net/http"
	"strings"

	"github.com/testcontainers/testcontainers-go"

	"github.com/cordon-rag/cordon/cordontest"
)

// A test of your application against a real Cordon: start it with a
// tenant, load a document as a writer, retrieve it as a reader. In a test,
// call testcontainers.CleanupContainer(t, c) right after Run instead of
// the deferred TerminateContainer. (Not run by 'go test': it needs a
// Docker engine; cordontest's TestRun runs the same steps.)
func Example() {
	ctx := context.Background()
	c, err := cordontest.Run(ctx, "pgvector/pgvector:pg16", cordontest.WithTenants("acme"))
	defer func() { _ = testcontainers.TerminateContainer(c) }()
	if err != nil {
		log.Fatal(err)
	}

	writer, err := c.Token(cordontest.Principal{Subject: "loader", Tenant: "acme", Clearance: "internal", Roles: []string{"writer"}})
	if err != nil {
		log.Fatal(err)
	}
	req, _ := http.NewRequest(http.MethodPut, c.URL()+"/v1/tenants/acme/documents/holds",
		strings.NewReader(`{"text": "PMT-771 hold release requires dual approval.", "classification": "internal"}`))
	req.Header.Set("Content-Type", "application/json")
	resp, err := c.Client(writer).Do(req)
	if err != nil {
		log.Fatal(err)
	}
	resp.Body.Close()

	reader, err := c.Token(cordontest.Principal{Subject: "alice", Tenant: "acme", Clearance: "internal", Roles: []string{"reader"}})
	if err != nil {
		log.Fatal(err)
	}
	resp, err = c.Client(reader).Post(c.URL()+"/v1/tenants/acme/retrieve", "application/json",
		strings.NewReader(`{"query": "PMT-771 hold"}`))
	if err != nil {
		log.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	fmt.Println(resp.Status, strings.Contains(string(body), `"doc_id":"holds"`))
}
