package htmltext_test

import (
	"fmt"

	"github.com/cordon-rag/cordon/htmltext"
)

func ExampleConvert() {
	res, err := htmltext.Convert(`<html><head><title>Payments</title><script>track()</script></head>
<body><nav><a href="/">Home</a></nav>
<h2>Holds &amp; releases</h2>
<p>A <b>PMT-771</b> hold needs dual approval.</p>
<pre><code class="language-sh">cordon release PMT-771</code></pre>
<ul><li>treasury</li><li>operations</li></ul></body></html>`)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Printf("title: %s\n%s", res.Title, res.Text)
	// Output:
	// title: Payments
	// ## Holds & releases
	//
	// A PMT-771 hold needs dual approval.
	//
	// ```sh
	// cordon release PMT-771
	// ```
	//
	// - treasury
	// - operations
}
