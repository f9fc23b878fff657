package memindextest

import (
	"context"
	"maps"
	"slices"
	"sync"

	"github.com/cordon-rag/cordon/cordontype"
	"github.com/cordon-rag/cordon/embed"
	"github.com/cordon-rag/cordon/index"
	"github.com/cordon-rag/cordon/index/memindex"
	"github.com/cordon-rag/cordon/retrieval"
)

var (
	_ retrieval.Store         = (*Store)(nil)
	_ retrieval.QueryEmbedder = (*Store)(nil)
)

// Store is an in-memory, multi-tenant store over one [memindex.Index] per
// tenant. It gives the same results as store/memory; the differential
// tests hold memindex to that through it.
type Store struct {
	settings index.Settings
	models   *embed.Registry
	mu       sync.RWMutex
	tenants  map[string]*memindex.Index
}

// NewStore returns an empty store.
func NewStore(s index.Settings) (*Store, error) { return NewStoreWithModels(s, nil) }

// NewStoreWithModels returns an empty store whose settings may name an
// embedding model other than hashing: models serves it (document vectors at
// Put).
func NewStoreWithModels(s index.Settings, models *embed.Registry) (*Store, error) {
	if err := s.Validate(); err != nil {
		return nil, err
	}
	if err := models.Check(s.Spec()); err != nil {
		return nil, err
	}
	return &Store{settings: s, models: models, tenants: make(map[string]*memindex.Index)}, nil
}

// Put validates, prepares and stores doc.
func (s *Store) Put(ctx context.Context, doc cordontype.Document) ([]cordontype.Chunk, error) {
	prepared, err := index.Prepare(&doc, s.settings)
	if err != nil {
		return nil, err
	}
	if err := index.Vectorize(ctx, s.models, s.settings.Spec(), prepared); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	x := s.tenants[doc.Tenant]
	if x == nil {
		x = memindex.New(s.settings)
		s.tenants[doc.Tenant] = x
	}
	x.Put(doc.DocID, prepared)
	out := make([]cordontype.Chunk, len(prepared))
	for i := range prepared {
		out[i] = prepared[i].Chunk
	}
	return out, nil
}

// Delete removes a document.
func (s *Store) Delete(_ context.Context, tenant, docID string) (bool, error) {
	if err := cordontype.ValidateTenant(tenant); err != nil {
		return false, err
	}
	if err := cordontype.ValidateDocID(docID); err != nil {
		return false, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	x := s.tenants[tenant]
	if x == nil {
		return false, nil
	}
	return x.Remove(docID), nil
}

// Rank implements retrieval.Store.
func (s *Store) Rank(_ context.Context, req retrieval.RankRequest) (retrieval.Rankings, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	x := s.tenants[req.Principal.Tenant]
	if x == nil {
		return retrieval.Funnel(req, nil, nil), nil
	}
	return x.Rank(req)
}

// TenantModel implements [retrieval.QueryEmbedder]: the store's model
// for every tenant it holds, hashing for one it does not.
func (s *Store) TenantModel(_ context.Context, tenant string) (embed.Spec, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.tenants[tenant] == nil {
		return embed.Spec{Model: embed.Hash}, nil
	}
	return s.settings.Spec(), nil
}

// EmbedQuery implements [retrieval.QueryEmbedder] with the store's
// registry.
func (s *Store) EmbedQuery(ctx context.Context, spec embed.Spec, text string, tokens []string) (*retrieval.DenseQuery, error) {
	return retrieval.EmbedQuery(ctx, s.models, spec, text, tokens)
}

// IDF implements retrieval.Store.
func (s *Store) IDF(_ context.Context, p cordontype.Principal, terms []string) ([]float64, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	x := s.tenants[p.Tenant]
	if x == nil {
		return make([]float64, len(terms)), nil
	}
	return x.IDF(p, terms), nil
}

// Tenant is the index of tenant, nil before its first Put.
func (s *Store) Tenant(tenant string) *memindex.Index {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.tenants[tenant]
}

// Tenants are the tenants put into s, sorted.
func (s *Store) Tenants() []string {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return slices.Sorted(maps.Keys(s.tenants))
}
