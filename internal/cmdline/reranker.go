package cmdline

import (
	"flag"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"time"

	"github.com/cordon-rag/cordon/rerank"
	"github.com/cordon-rag/cordon/retrieval"
)

// RerankerFlags are the model reranker's flags, shared by serve and eval.
type RerankerFlags struct {
	url, api, model, keyFile *string
	batch, failures          *int64
	coolDown                 *time.Duration
	truncate                 *bool
}

// RerankerUsage is the help text's paragraph on the reranker flags.
const RerankerUsage = `A model reranker (a cross-encoder behind text-embeddings-inference's
/rerank, or a Cohere-style /v2/rerank such as Cohere's or Jina's) makes
the policy rerank "model" available: --reranker-url is the server's base
URL (or a full endpoint URL), --reranker-api tei or cohere its wire
format, --reranker-model the model (required for cohere; for tei it names
the model in audit records), --reranker-key-file a file holding a bearer
API key (or $CORDON_RERANKER_API_KEY; never a flag), --reranker-batch the
most passages per request. After --reranker-breaker-failures consecutive
failures a circuit breaker stops calling the model for
--reranker-breaker-cooldown, then lets one probe through; meanwhile the
stage is shed at once.
`

// AddRerankerFlags registers the reranker flags on fs; a bad environment
// value is appended to errs.
func AddRerankerFlags(fs *flag.FlagSet, env Env, errs *[]error) *RerankerFlags {
	i64 := func(name, envName string, def int64, usage string) *int64 {
		p, err := EnvInt64(fs, env, name, envName, def, usage)
		if err != nil {
			*errs = append(*errs, err)
			p = new(int64)
		}
		return p
	}
	f := &RerankerFlags{
		url:      EnvString(fs, env, "reranker-url", "CORDON_RERANKER_URL", "", "model reranker base URL, e.g. http://127.0.0.1:8081, or full endpoint URL (empty: no rerank \"model\")"),
		api:      EnvString(fs, env, "reranker-api", "CORDON_RERANKER_API", string(rerank.TEI), "model reranker wire format: tei (POST /rerank) or cohere (POST /v2/rerank)"),
		model:    EnvString(fs, env, "reranker-model", "CORDON_RERANKER_MODEL", "", "model name (sent to cohere-style servers; recorded in audit records)"),
		keyFile:  EnvString(fs, env, "reranker-key-file", "CORDON_RERANKER_KEY_FILE", "", "file holding the reranker's bearer API key (or set $CORDON_RERANKER_API_KEY)"),
		batch:    i64("reranker-batch", "CORDON_RERANKER_BATCH", rerank.DefaultBatchSize, "most passages per reranker request"),
		failures: i64("reranker-breaker-failures", "CORDON_RERANKER_BREAKER_FAILURES", rerank.DefaultBreakerFailures, "consecutive reranker failures that open its circuit breaker"),
		truncate: fs.Bool("reranker-truncate", EnvBool(env, "CORDON_RERANKER_TRUNCATE"), "ask text-embeddings-inference to truncate passages longer than the model's input ($CORDON_RERANKER_TRUNCATE=1)"),
	}
	cd, err := EnvDuration(fs, env, "reranker-breaker-cooldown", "CORDON_RERANKER_BREAKER_COOLDOWN", rerank.DefaultBreakerCoolDown, "how long the open breaker refuses reranker calls before one probe")
	if err != nil {
		*errs = append(*errs, err)
		cd = new(time.Duration)
	}
	f.coolDown = cd
	return f
}

// Build returns the configured reranker behind its circuit breaker, nil
// when no URL is given. Breaker state changes are logged on log.
func (f *RerankerFlags) Build(env Env, log *slog.Logger) (rerank.Reranker, error) {
	envKey := env.Getenv("CORDON_RERANKER_API_KEY")
	if *f.url == "" {
		if *f.keyFile != "" || envKey != "" || *f.model != "" {
			return nil, fmt.Errorf("%w: a reranker key or model without --reranker-url: give the model server's URL too", ErrUsage)
		}
		return nil, nil
	}
	key := envKey
	if *f.keyFile != "" {
		if envKey != "" {
			return nil, fmt.Errorf("%w: both --reranker-key-file and $CORDON_RERANKER_API_KEY are set: keep one", ErrUsage)
		}
		data, err := os.ReadFile(*f.keyFile)
		if err != nil {
			return nil, fmt.Errorf("reranker key file: %w", err)
		}
		if key = strings.TrimSpace(string(data)); key == "" {
			return nil, fmt.Errorf("%w: reranker key file %s is empty", ErrUsage, *f.keyFile)
		}
	}
	if *f.batch < 1 || *f.batch > rerank.MaxBatchSize {
		return nil, fmt.Errorf("%w: --reranker-batch %d: want 1 to %d", ErrUsage, *f.batch, rerank.MaxBatchSize)
	}
	if *f.failures < 1 || *f.failures > 1<<20 {
		return nil, fmt.Errorf("%w: --reranker-breaker-failures %d: want >= 1", ErrUsage, *f.failures)
	}
	if *f.coolDown <= 0 {
		return nil, fmt.Errorf("%w: --reranker-breaker-cooldown %v: want > 0, e.g. 10s", ErrUsage, *f.coolDown)
	}
	c, err := rerank.New(rerank.Config{URL: *f.url, API: rerank.API(*f.api), Model: *f.model, APIKey: key,
		BatchSize: int(*f.batch), Truncate: *f.truncate})
	if err != nil {
		return nil, fmt.Errorf("%w: --reranker-*: %w", ErrUsage, err)
	}
	b, err := rerank.NewBreaker(c, rerank.BreakerConfig{Failures: int(*f.failures), CoolDown: *f.coolDown,
		OnStateChange: func(from, to string) {
			log.Warn("reranker circuit breaker", "from", from, "to", to, "reranker_api", *f.api, "reranker_model", *f.model)
		}})
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrUsage, err)
	}
	return b, nil
}

// LogAttrs describes the reranker configuration for the config log line,
// the key redacted.
func (f *RerankerFlags) LogAttrs(env Env) []any {
	key := "unset"
	if *f.keyFile != "" || env.Getenv("CORDON_RERANKER_API_KEY") != "" {
		key = "set (redacted)"
	}
	return []any{"reranker_url", RedactURL(*f.url), "reranker_api", *f.api, "reranker_model", *f.model,
		"reranker_key", key, "reranker_key_file", *f.keyFile, "reranker_batch", *f.batch,
		"reranker_breaker_failures", *f.failures, "reranker_breaker_cooldown", f.coolDown.String()}
}

// ParseBudget reads a rerank budget: a duration from 1ms to
// retrieval.MaxRerankBudgetMS.
func ParseBudget(what, s string) (time.Duration, error) {
	d, err := time.ParseDuration(s)
	if err != nil {
		return 0, fmt.Errorf("%w: %s %q is not a duration such as 300ms", ErrUsage, what, s)
	}
	if max := retrieval.MaxRerankBudgetMS * time.Millisecond; d < time.Millisecond || d > max {
		return 0, fmt.Errorf("%w: %s %v: want 1ms to %v", ErrUsage, what, d, max)
	}
	return d, nil
}

// BudgetMS is a budget in whole milliseconds, rounded up.
func BudgetMS(d time.Duration) int {
	return int((d + time.Millisecond - 1) / time.Millisecond)
}
