package bench

import (
	"os"
	"reflect"
	"runtime"
	"strconv"
	"strings"

	"github.com/cordon-rag/cordon/retrieval"
)

// Report is one run's result, written by 'cordon-lab bench --json'.
type Report struct {
	Chunks      int `json:"chunks"`
	Tenants     int `json:"tenants"`
	Queries     int `json:"queries"`
	Concurrency int `json:"concurrency"`
	Writers     int `json:"writers"`
	// Batch is the documents per ingest transaction.
	Batch int `json:"batch"`
	// CacheBytes is the cordon store's in-memory query path budget, and
	// CacheRule how it was chosen ("auto: ...": the default of 'cordon
	// serve').
	CacheBytes int64  `json:"cache_bytes"`
	CacheRule  string `json:"cache_budget_rule,omitempty"`
	// Headline is the system the report leads with: cordon as 'cordon
	// serve' runs it by default.
	Headline string `json:"headline"`
	Seed     uint64 `json:"seed"`
	// Reference is the system whose top-10 lists define recall and identity.
	Reference string `json:"reference"`
	// PolicyName says which policy the retriever-backed systems ran: "seed
	// profile" (BasePolicy), "service profile" (retrieval.ServicePolicy,
	// limit 10) or "custom"; Policy is that policy as a SPEC section 9
	// object.
	PolicyName string                 `json:"policy_name"`
	Policy     *retrieval.PolicyPatch `json:"policy"`
	// Mix is the http system's operation mix (empty: none ran).
	Mix string `json:"mix,omitempty"`
	// Systems has every system's key; a system not run is null.
	Systems map[string]*SystemResult `json:"systems"`
	Env     Env                      `json:"env"`
}

// SystemResult is one system's measurements. Pointer fields are null where
// they do not apply.
type SystemResult struct {
	P50 float64 `json:"p50_ms"`
	P95 float64 `json:"p95_ms"`
	P99 float64 `json:"p99_ms"`
	QPS float64 `json:"qps"`
	// SerialP50..99 are the latencies of Options.Serial queries run again
	// with one client (omitted when not run).
	SerialP50        *float64 `json:"serial_p50_ms,omitempty"`
	SerialP95        *float64 `json:"serial_p95_ms,omitempty"`
	SerialP99        *float64 `json:"serial_p99_ms,omitempty"`
	IngestChunksPerS *float64 `json:"ingest_chunks_per_s"`
	IngestSeconds    *float64 `json:"ingest_s"`
	BytesPerChunk    *float64 `json:"bytes_per_chunk"`
	// CompactedBytesPerChunk is BytesPerChunk after VACUUM FULL (cordon
	// only; omitted otherwise): storage without reclaimable row versions.
	CompactedBytesPerChunk *float64 `json:"compacted_bytes_per_chunk,omitempty"`
	// RecallAt10 is the mean over queries with a non-empty reference list of
	// |top10 ∩ reference top10| / |reference top10|.
	RecallAt10 *float64 `json:"recall_at_10"`
	// Identical counts queries whose list equals the reference's exactly.
	Identical *int `json:"identical_lists"`
	// PeakHeapBytes is the bench process's peak Go heap while this system
	// ingested and answered: the whole index for the memory store, the
	// client side (pool, rows, fusion, rerank) for the Postgres systems.
	PeakHeapBytes int64 `json:"peak_heap_bytes"`
	// MemoryBudgetBytes and MemoryUsedBytes are the cordon store's
	// in-memory query path budget and its use after the queries (omitted
	// when the path is off).
	MemoryBudgetBytes *int64 `json:"memory_budget_bytes,omitempty"`
	MemoryUsedBytes   *int64 `json:"memory_used_bytes,omitempty"`
	// ColdFirstQueryMS is the latency of the first query of a tenant not
	// yet in memory (ranked in SQL while the tenant starts loading), and
	// LoadedAfterS the time from its start until every load the warm-up
	// queries started was done (cordon and http with the in-memory path).
	ColdFirstQueryMS *float64 `json:"cold_first_query_ms,omitempty"`
	LoadedAfterS     *float64 `json:"loaded_after_s,omitempty"`
	// Cache is the in-memory path's work (omitted when it is off).
	Cache *CacheResult `json:"cache,omitempty"`
	// QPSRatioToCordon is the http system's qps over the cordon system's,
	// same corpus, queries and clients: what the service path keeps of the
	// store's throughput (http only, when cordon ran).
	QPSRatioToCordon *float64 `json:"qps_ratio_to_cordon,omitempty"`
	// CPURatioToCordon is the http system's CPU per query over the cordon
	// system's, each its CPUMsPerQuery plus its DBCPUMsPerQuery (http
	// only, when both systems' CPU was measured, PostgreSQL's for both or
	// for neither): what a retrieve through the service costs over the
	// store's. AddedCPUMsPerQuery is the difference, in ms a query.
	CPURatioToCordon   *float64 `json:"cpu_ratio_to_cordon,omitempty"`
	AddedCPUMsPerQuery *float64 `json:"added_cpu_ms_per_query,omitempty"`
	// Connections is how many connections the http system's server had
	// accepted by the end of the measured run, warm-up included: with
	// keep-alive, at most one per client (http only).
	Connections *int64 `json:"connections,omitempty"`
	// AuditRecordsPerCommit is the mean number of audit records committed
	// per transaction in the measured run (http only): what the per-tenant
	// group commit saved.
	AuditRecordsPerCommit *float64 `json:"audit_records_per_commit,omitempty"`
	// CPUMsPerQuery is the bench process's CPU (every thread: the clients,
	// the store, for http the server too) over the measured run, per query;
	// for http with ServerProcess, the server process's CPU alone, and
	// ClientCPUMsPerQuery the bench process's (the clients').
	// DBCPUMsPerQuery is the CPU of the PostgreSQL backends serving the
	// bench database, per query, when they run on this machine and are
	// visible in /proc (omitted otherwise). On a saturated machine their
	// sum is what a query costs, a steadier figure than qps.
	CPUMsPerQuery       *float64 `json:"cpu_ms_per_query,omitempty"`
	DBCPUMsPerQuery     *float64 `json:"db_cpu_ms_per_query,omitempty"`
	ClientCPUMsPerQuery *float64 `json:"client_cpu_ms_per_query,omitempty"`
	// ServerProcess is set when the http system's server ran in a process
	// of its own (Options.HTTPServerProcess).
	ServerProcess bool `json:"server_process,omitempty"`
	// Mix is the http system's mixed run (Options.Mix; omitted otherwise).
	Mix *MixResult `json:"mix,omitempty"`
}

// CacheResult is what the in-memory query path did in a run
// (postgres.CacheStats): tenants held at the end, loads of whole tenants
// and their total time, evictions, the largest accounted size, and the
// measured queries answered from memory and in SQL.
type CacheResult struct {
	Tenants       int     `json:"tenants"`
	Loads         int64   `json:"loads"`
	LoadFailures  int64   `json:"load_failures"`
	LoadS         float64 `json:"load_s"`
	Evictions     int64   `json:"evictions"`
	Declined      int64   `json:"loads_declined"`
	PeakBytes     int64   `json:"peak_bytes"`
	MemoryAnswers int64   `json:"memory_answers"`
	SQLAnswers    int64   `json:"sql_answers"`
}

// Env describes where the run happened.
type Env struct {
	GoVersion   string `json:"go"`
	OS          string `json:"os"`
	Arch        string `json:"arch"`
	CPUs        int    `json:"cpus"`
	Postgres    string `json:"postgres,omitempty"`
	MaxRSSBytes int64  `json:"max_rss_bytes"`
	// LoadAvg is the 1-minute load average at the start and the end of the
	// run: other work on the machine shows here.
	LoadAvg [2]float64 `json:"load_avg"`
}

// loadAvg reads the 1-minute load average (Linux), 0 elsewhere.
func loadAvg() float64 {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return 0
	}
	f := strings.Fields(string(b))
	if len(f) == 0 {
		return 0
	}
	v, _ := strconv.ParseFloat(f[0], 64)
	return v
}

func newReport(o Options) *Report {
	r := &Report{
		Chunks: o.Chunks, Tenants: o.Tenants, Queries: o.Queries,
		Concurrency: o.Concurrency, Writers: o.Writers, Batch: o.Batch, Seed: o.Seed, CacheBytes: o.CacheBytes, CacheRule: o.CacheRule, Headline: Headline,
		Systems:    map[string]*SystemResult{},
		Mix:        o.Mix.String(),
		PolicyName: policyName(o.Policy),
		Policy:     effectivePolicy(o.Policy).Patch(),
		Env:        Env{GoVersion: runtime.Version(), OS: runtime.GOOS, Arch: runtime.GOARCH, CPUs: runtime.NumCPU()},
	}
	for _, s := range AllSystems {
		r.Systems[s] = nil
	}
	return r
}

// effectivePolicy is p, or BasePolicy when p is nil.
func effectivePolicy(p *retrieval.Policy) retrieval.Policy {
	if p == nil {
		return BasePolicy()
	}
	return *p
}

// policyName names the policy p (nil: BasePolicy) for the report.
func policyName(p *retrieval.Policy) string {
	service := retrieval.ServicePolicy()
	service.Limit = Limit
	switch {
	case p == nil || reflect.DeepEqual(*p, BasePolicy()):
		return "seed profile"
	case reflect.DeepEqual(*p, service):
		return "service profile"
	}
	return "custom"
}
