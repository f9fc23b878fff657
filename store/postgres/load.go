package postgres

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/cordon-rag/cordon/cordontype"
)

// MaxLoadChunks bounds how many chunk ids one [Store.LoadChunks] call takes.
const MaxLoadChunks = 1000

// LoadChunks loads the chunks with the given ids, in the given order, for
// principal p, re-checking visibility (classification and barriers) in SQL in
// one snapshot. If any id is unknown, or names a chunk p may not see, it
// returns [ErrChunkNotFound] and no chunk: the caller cannot tell a hidden
// chunk from a missing one. It also returns the tenant's index version.
func (s *Store) LoadChunks(ctx context.Context, p cordontype.Principal, ids []string) ([]cordontype.Chunk, int64, error) {
	if err := p.Validate(); err != nil {
		return nil, 0, err
	}
	if len(ids) > MaxLoadChunks {
		return nil, 0, fmt.Errorf("%w: %d chunk ids: at most %d are allowed", cordontype.ErrInvalid, len(ids), MaxLoadChunks)
	}
	var out []cordontype.Chunk
	var version int64
	found, err := s.inSnapshot(ctx, p.Tenant, func(tx pgx.Tx, t tenantInfo, st statsRow) error {
		version = st.version
		if len(ids) == 0 {
			return nil
		}
		rows, err := tx.Query(ctx, `SELECT `+chunkColumns+` FROM `+t.tables.chunks+` c
			WHERE c.chunk_id = ANY($1::text[]) AND `+visibleSQL,
			ids, int16(p.Clearance), p.Barriers)
		if err != nil {
			return classify(err)
		}
		byID, err := collectChunks(rows, p.Tenant, len(ids))
		if err != nil {
			return err
		}
		out = make([]cordontype.Chunk, 0, len(ids))
		for _, id := range ids {
			c, ok := byID[id]
			if !ok {
				return ErrChunkNotFound
			}
			out = append(out, c)
		}
		return nil
	})
	if err == nil && !found && len(ids) > 0 {
		err = ErrChunkNotFound
	}
	if err != nil {
		return nil, 0, fmt.Errorf("load chunks of tenant %q: %w", p.Tenant, err)
	}
	return out, version, nil
}

// chunkColumns are the columns of chunks c that scanChunk reads.
const chunkColumns = `c.chunk_id, c.doc_id, c.section, c.text, c.start_char, c.end_char, c.length,
	c.classification, c.barriers, c.as_of_tick`

// scanChunk reads the current row, chunkColumns after the columns lead
// scans into, as a chunk of tenant.
func scanChunk(rows pgx.Rows, tenant string, lead ...any) (cordontype.Chunk, error) {
	var c cordontype.Chunk
	var class int16
	var start, end, length int32
	dst := append(lead, &c.ChunkID, &c.DocID, &c.Section, &c.Text, &start, &end, &length, &class, &c.Barriers, &c.AsOfTick)
	if err := rows.Scan(dst...); err != nil {
		return c, err
	}
	c.Tenant = tenant
	c.StartChar, c.EndChar, c.Length = int(start), int(end), int(length)
	c.Classification = cordontype.Classification(class)
	return c, nil
}

// collectChunks reads rows of chunkColumns into chunks of tenant by chunk
// id; n sizes the map.
func collectChunks(rows pgx.Rows, tenant string, n int) (map[string]cordontype.Chunk, error) {
	defer rows.Close()
	out := make(map[string]cordontype.Chunk, n)
	for rows.Next() {
		c, err := scanChunk(rows, tenant)
		if err != nil {
			return nil, err
		}
		out[c.ChunkID] = c
	}
	if err := rows.Err(); err != nil {
		return nil, classify(err)
	}
	return out, nil
}

// collectChunksByID reads rows of c.id and chunkColumns into chunks of
// tenant by internal id; n sizes the map.
func collectChunksByID(rows pgx.Rows, tenant string, n int) (map[int64]cordontype.Chunk, error) {
	defer rows.Close()
	out := make(map[int64]cordontype.Chunk, n)
	for rows.Next() {
		var id int64
		c, err := scanChunk(rows, tenant, &id)
		if err != nil {
			return nil, err
		}
		out[id] = c
	}
	if err := rows.Err(); err != nil {
		return nil, classify(err)
	}
	return out, nil
}

// DocumentHashes returns the BLAKE2b-256 content hash of every document of
// tenant (documents stored before hashes existed have none). Ingestion uses
// it to skip unchanged files.
func (s *Store) DocumentHashes(ctx context.Context, tenant string) (map[string][]byte, error) {
	t, found, err := lookupTenant(ctx, s.pool, tenant, nil)
	if err != nil {
		return nil, err
	}
	if !found {
		return nil, fmt.Errorf("%w: %q", ErrTenantNotFound, tenant)
	}
	rows, err := s.pool.Query(ctx, `SELECT doc_id, content_hash FROM `+t.tables.documents+` WHERE content_hash IS NOT NULL`)
	if err != nil {
		return nil, classify(err)
	}
	out := make(map[string][]byte)
	for rows.Next() {
		var id string
		var h []byte
		if err := rows.Scan(&id, &h); err != nil {
			rows.Close()
			return nil, err
		}
		out[id] = h
	}
	if err := rows.Err(); err != nil {
		return nil, classify(err)
	}
	return out, nil
}
