package tokenizer

import (
	"container/heap"
	"unicode/utf8"
)

// merge is the rank of a merge (its index in model.merges; lower merges
// first) and the id of the token it makes.
type merge struct {
	rank, id int32
}

func pairKey(a, b int32) uint64 { return uint64(uint32(a))<<32 | uint64(uint32(b)) }

// hfSymbol is one symbol of a word being merged, in a list linked by
// index; a symbol merged into its left neighbour has length 0.
type hfSymbol struct {
	id         int32
	prev, next int32
	len        int32
}

// hfMerge is a candidate merge of the symbol at pos with the next one.
type hfMerge struct {
	pos, rank, id int32
}

// hfQueue orders candidate merges by rank, then position: the order of
// tokenizers' Word::merge_all.
type hfQueue []hfMerge

func (q hfQueue) Len() int { return len(q) }
func (q hfQueue) Less(i, j int) bool {
	if q[i].rank != q[j].rank {
		return q[i].rank < q[j].rank
	}
	return q[i].pos < q[j].pos
}
func (q hfQueue) Swap(i, j int) { q[i], q[j] = q[j], q[i] }
func (q *hfQueue) Push(x any)   { *q = append(*q, x.(hfMerge)) }
func (q *hfQueue) Pop() any {
	old := *q
	x := old[len(old)-1]
	*q = old[:len(old)-1]
	return x
}

// bpe appends the ids of one pre-token to ids, as tokenizers' BPE model
// tokenizes it: each character is its token, or its bytes' <0xXX> tokens
// (byte_fallback), or unk (consecutive unknowns fused into one with
// fuse_unk); then merges apply by rank until none applies.
func (m *hfModel) bpe(word string, ids []int) []int {
	if word == "" {
		return ids
	}
	if m.ignoreMerges {
		if id, ok := m.vocab[word]; ok {
			return append(ids, int(id))
		}
	}
	syms := make([]hfSymbol, 0, len(word))
	add := func(id int32, n int) {
		syms = append(syms, hfSymbol{id: id, prev: int32(len(syms)) - 1, next: int32(len(syms)) + 1, len: int32(n)})
	}
	unk, unkLen := int32(-1), 0
	for i := 0; i < len(word); {
		_, n := utf8.DecodeRuneInString(word[i:])
		c := word[i : i+n]
		i += n
		if id, ok := m.vocab[c]; ok {
			if unk >= 0 {
				add(unk, unkLen)
				unk = -1
			}
			add(id, n)
			continue
		}
		if m.byteFallback && m.hasBytes(c) {
			for j := range len(c) {
				add(m.byteIDs[c[j]], 1)
			}
			continue
		}
		if m.unk < 0 {
			// Not reached: Load refuses a model without unk unless
			// byte fallback covers every byte.
			continue
		}
		switch {
		case unk >= 0 && m.fuseUnk:
			unkLen += n
		case unk >= 0:
			add(unk, unkLen)
			unk, unkLen = m.unk, n
		default:
			unk, unkLen = m.unk, n
		}
	}
	if unk >= 0 {
		add(unk, unkLen)
	}
	if len(syms) == 0 {
		return ids
	}
	syms[len(syms)-1].next = -1

	q := make(hfQueue, 0, len(syms))
	for i := 0; i+1 < len(syms); i++ {
		if mg, ok := m.merges[pairKey(syms[i].id, syms[i+1].id)]; ok {
			q = append(q, hfMerge{pos: int32(i), rank: mg.rank, id: mg.id})
		}
	}
	heap.Init(&q)
	for q.Len() > 0 {
		top := heap.Pop(&q).(hfMerge)
		cur := &syms[top.pos]
		if cur.len == 0 || cur.next == -1 {
			continue
		}
		next := cur.next
		right := syms[next]
		// Skip a candidate made out of date by an earlier merge.
		if mg, ok := m.merges[pairKey(cur.id, right.id)]; !ok || mg.id != top.id {
			continue
		}
		cur.id = top.id
		cur.len += right.len
		cur.next = right.next
		syms[next].len = 0
		if right.next >= 0 {
			syms[right.next].prev = top.pos
		}
		if cur.prev >= 0 {
			if mg, ok := m.merges[pairKey(syms[cur.prev].id, cur.id)]; ok {
				heap.Push(&q, hfMerge{pos: cur.prev, rank: mg.rank, id: mg.id})
			}
		}
		if cur.next >= 0 {
			if mg, ok := m.merges[pairKey(cur.id, syms[cur.next].id)]; ok {
				heap.Push(&q, hfMerge{pos: top.pos, rank: mg.rank, id: mg.id})
			}
		}
	}
	for _, s := range syms {
		if s.len != 0 {
			ids = append(ids, int(s.id))
		}
	}
	return ids
}

// hasBytes reports whether every byte of c has a <0xXX> token.
func (m *hfModel) hasBytes(c string) bool {
	for i := range len(c) {
		if m.byteIDs[c[i]] < 0 {
			return false
		}
	}
	return true
}
