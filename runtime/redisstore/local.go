package redisstore

import (
	"bytes"
	"hash/maphash"
	"sync"
	"time"

	"github.com/idemgen/idemgen/runtime/store"
)

// localTier is the cache's in-process tier: completed records, each with a deadline on this
// process's monotonic clock that the record outlives, in a bounded amount of memory. It is
// split in shards (one mutex each) and evicts, in each shard, the entries inserted first:
// copies of hot records come back from Redis at the cost of one lookup.
type localTier struct {
	seed   maphash.Seed
	shards [localShards]localShard
	// budget is each shard's share of the memory budget, in bytes.
	budget int64
}

const localShards = 16

// localOverhead approximates what an entry costs besides its strings and byte slices: the map
// slot, the record's fixed fields, the queue slot.
const localOverhead = 200

type localShard struct {
	mu      sync.Mutex
	entries map[store.ID]*localEntry
	// queue holds the shard's entries in insertion order (oldest first); entries replaced or
	// expired meanwhile stay in it until they reach its head.
	queue []*localEntry
	head  int
	// dead counts the entries in queue[head:] that are gone.
	dead  int
	bytes int64
}

type localEntry struct {
	id       store.ID
	rec      store.Record
	deadline int64 // nanoseconds on the cache's clock (Cache.nanos)
	size     int64
	gone     bool // replaced or removed: skipped when it reaches the queue's head
}

func newLocalTier(budget int64) *localTier {
	l := &localTier{seed: maphash.MakeSeed(), budget: max(budget/localShards, 1)}
	for i := range l.shards {
		l.shards[i].entries = map[store.ID]*localEntry{}
	}
	return l
}

func (l *localTier) shard(id store.ID) *localShard {
	var h maphash.Hash
	h.SetSeed(l.seed)
	h.WriteString(id.Scope)
	h.WriteByte(0)
	h.WriteString(id.Key)
	return &l.shards[h.Sum64()%localShards]
}

// get returns the record of id when its copy is still before its deadline at now.
func (l *localTier) get(id store.ID, now int64) (store.Record, bool) {
	s := l.shard(id)
	s.mu.Lock()
	defer s.mu.Unlock()
	e := s.entries[id]
	if e == nil {
		return store.Record{}, false
	}
	if now >= e.deadline {
		s.remove(e)
		return store.Record{}, false
	}
	rec := e.rec
	rec.RetentionLeft = time.Duration(e.deadline - now) // at least: the record outlives the copy
	return rec, true
}

// put keeps a copy of rec (a completed record) until deadline; a record larger than a shard's
// budget is not kept.
func (l *localTier) put(id store.ID, rec *store.Record, deadline int64) {
	size := int64(localOverhead + len(id.Scope) + len(id.Key) + len(rec.Operation) + len(rec.Response.Header) + len(rec.Response.Body))
	if size > l.budget {
		return
	}
	e := &localEntry{id: id, rec: *rec, deadline: deadline, size: size}
	e.rec.Response.Header = bytes.Clone(rec.Response.Header)
	if !rec.Response.BodyOmitted {
		e.rec.Response.Body = append([]byte{}, rec.Response.Body...)
	}
	s := l.shard(id)
	s.mu.Lock()
	defer s.mu.Unlock()
	if old := s.entries[id]; old != nil {
		if old.deadline >= deadline {
			return // the copy we have lives as long
		}
		s.remove(old)
	}
	for s.bytes+size > l.budget && s.head < len(s.queue) {
		if oldest := s.queue[s.head]; !oldest.gone {
			s.remove(oldest)
		}
		s.queue[s.head] = nil
		s.head++
		s.dead--
	}
	if s.dead > len(s.entries)+16 || s.head > len(s.queue)/2 {
		// Rebuild the queue once it holds more gone entries than live ones (records replaced
		// or expired without memory pressure), or its popped head is the larger half.
		live := s.queue[:0]
		for _, e := range s.queue[s.head:] {
			if !e.gone {
				live = append(live, e)
			}
		}
		clear(s.queue[len(live):])
		s.queue, s.head, s.dead = live, 0, 0
	}
	s.entries[id] = e
	s.queue = append(s.queue, e)
	s.bytes += size
}

// forget removes id's copy.
func (l *localTier) forget(id store.ID) {
	s := l.shard(id)
	s.mu.Lock()
	defer s.mu.Unlock()
	if e := s.entries[id]; e != nil {
		s.remove(e)
	}
}

// remove takes e out of the map and the byte count (mu held); its queue slot goes later.
func (s *localShard) remove(e *localEntry) {
	if e.gone {
		return
	}
	e.gone = true
	delete(s.entries, e.id)
	s.bytes -= e.size
	s.dead++
}
