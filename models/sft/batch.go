package sft

import (
	"fmt"
	"math/rand/v2"
)

// Batch is a [Batch, Seq] block of token ids and labels, row-major: row r
// is IDs[r*Seq:(r+1)*Seq]. Padding has IgnoreIndex labels.
type Batch struct {
	// IDs are the token ids.
	IDs []int32
	// Labels are the labels, aligned with IDs (not shifted).
	Labels []int32
	// Batch is the number of rows and Seq their length.
	Batch, Seq int
	// Tokens counts the labels other than IgnoreIndex: the positions the
	// loss is taken over.
	Tokens int
}

// Pad makes one batch of batch rows of seq tokens from examples, one row
// each: its ids and labels truncated to seq and right-padded with id pad
// and label IgnoreIndex. There must be exactly batch examples (fewer leave
// rows missing, an error), each with as many labels as ids.
func Pad(examples []Example, batch, seq int, pad int32) (Batch, error) {
	if batch <= 0 || seq <= 0 {
		return Batch{}, fmt.Errorf("sft: batch %d, seq %d: both must be positive", batch, seq)
	}
	if len(examples) != batch {
		return Batch{}, fmt.Errorf("sft: %d examples for a batch of %d rows", len(examples), batch)
	}
	b := Batch{IDs: make([]int32, batch*seq), Labels: make([]int32, batch*seq), Batch: batch, Seq: seq}
	for r, e := range examples {
		if len(e.IDs) != len(e.Labels) {
			return Batch{}, fmt.Errorf("sft: example %d: %d ids and %d labels: %w", r, len(e.IDs), len(e.Labels), ErrData)
		}
		ids, labels := b.IDs[r*seq:(r+1)*seq], b.Labels[r*seq:(r+1)*seq]
		n := copy(ids, e.IDs)
		copy(labels, e.Labels)
		for i := n; i < seq; i++ {
			ids[i], labels[i] = pad, IgnoreIndex
		}
		for _, l := range labels[:n] {
			if l != IgnoreIndex {
				b.Tokens++
			}
		}
	}
	return b, nil
}

// Pack concatenates examples, in order, and cuts the result into rows of
// exactly seq tokens, each label following its token: the packing of
// Hugging Face's run_clm (group_texts), with the labels kept. An example
// may span two or more rows, and the final partial row is dropped. The
// examples should each end in EOS, which separates them in a row; each
// must have as many labels as ids (Pack panics otherwise). Pack returns
// nil if seq is not positive or there are fewer than seq tokens in all.
func Pack(examples []Example, seq int) []Example {
	if seq <= 0 {
		return nil
	}
	total := 0
	for i, e := range examples {
		if len(e.IDs) != len(e.Labels) {
			panic(fmt.Sprintf("sft: Pack: example %d has %d ids and %d labels", i, len(e.IDs), len(e.Labels)))
		}
		total += len(e.IDs)
	}
	rows := make([]Example, total/seq)
	if len(rows) == 0 {
		return nil
	}
	ids := make([]int32, 0, len(rows)*seq)
	labels := make([]int32, 0, len(rows)*seq)
	for _, e := range examples {
		n := min(len(e.IDs), cap(ids)-len(ids))
		ids = append(ids, e.IDs[:n]...)
		labels = append(labels, e.Labels[:n]...)
	}
	for r := range rows {
		rows[r] = Example{IDs: ids[r*seq : (r+1)*seq : (r+1)*seq], Labels: labels[r*seq : (r+1)*seq : (r+1)*seq]}
	}
	return rows
}

// Loader yields training batches from a data set, epoch after epoch.
//
// Each epoch visits the examples in the order of a seeded permutation: one
// math/rand/v2 PCG generator seeded with (seed, 0) draws a fresh
// permutation (rand.Perm) for every epoch, so the batches are the same for
// the same examples, shapes and seed. Without packing, every example is
// one row, truncated to seq and padded; an example with no label left after
// truncation is dropped when the Loader is made. With packing, every epoch's
// rows are Pack's rows of the examples in that epoch's order (an example
// with no label at all is dropped); a row can then be all prompt, so a
// batch's Tokens can be 0.
//
// Batches are filled row after row; a batch that reaches the end of an
// epoch continues with the next epoch's first rows. Every batch is
// [batch, seq]. A Loader is not safe for concurrent use.
type Loader struct {
	examples   []Example // kept examples; truncated to seq unless packing
	batch, seq int
	pad        int32
	pack       bool
	rng        *rand.Rand
	dropped    int

	rows  []Example // the current epoch's rows, in order
	pos   int       // the next row of rows
	epoch int       // completed epochs
}

// NewLoader returns a Loader of batch rows of seq tokens over examples,
// with pad as the padding id (for Llama, 0, the <unk> id, as Alpaca's Llama
// recipes pad with unk), packing the examples or not, shuffled with seed.
// examples is not modified. An example whose ids and labels differ in
// length, or that has a negative id or a label that is neither IgnoreIndex
// nor an id, is an error wrapping ErrData; so is a data set left with no
// example (or, packing, with fewer than seq tokens).
func NewLoader(examples []Example, batch, seq int, pad int32, pack bool, seed uint64) (*Loader, error) {
	if batch <= 0 || seq <= 0 {
		return nil, fmt.Errorf("sft: batch %d, seq %d: both must be positive", batch, seq)
	}
	if pad < 0 {
		return nil, fmt.Errorf("sft: pad id %d is negative", pad)
	}
	if len(examples) == 0 {
		return nil, fmt.Errorf("sft: no examples: %w", ErrData)
	}
	l := &Loader{batch: batch, seq: seq, pad: pad, pack: pack, rng: rand.New(rand.NewPCG(seed, 0))}
	total := 0
	for i, e := range examples {
		if err := check(e); err != nil {
			return nil, fmt.Errorf("sft: example %d: %w", i, err)
		}
		if !pack && len(e.IDs) > seq {
			e = Example{IDs: e.IDs[:seq:seq], Labels: e.Labels[:seq:seq]}
		}
		if e.Tokens() == 0 {
			l.dropped++
			continue
		}
		total += len(e.IDs)
		l.examples = append(l.examples, e)
	}
	switch {
	case len(l.examples) == 0 && pack:
		return nil, fmt.Errorf("sft: none of the %d examples has a label to learn: %w", len(examples), ErrData)
	case len(l.examples) == 0:
		return nil, fmt.Errorf("sft: none of the %d examples has a label to learn in its first %d tokens: %w", len(examples), seq, ErrData)
	case pack && total < seq:
		return nil, fmt.Errorf("sft: %d tokens in all, too few to pack a row of %d: %w", total, seq, ErrData)
	}
	return l, nil
}

// check reports what is wrong with an example.
func check(e Example) error {
	if len(e.IDs) != len(e.Labels) {
		return fmt.Errorf("%d ids and %d labels: %w", len(e.IDs), len(e.Labels), ErrData)
	}
	for i, id := range e.IDs {
		if id < 0 {
			return fmt.Errorf("id %d at %d is negative: %w", id, i, ErrData)
		}
	}
	for i, l := range e.Labels {
		if l < 0 && l != IgnoreIndex {
			return fmt.Errorf("label %d at %d is neither %d nor an id: %w", l, i, IgnoreIndex, ErrData)
		}
	}
	return nil
}

// Next returns the next batch. Its slices are new: the caller may keep or
// change them.
func (l *Loader) Next() Batch {
	rows := make([]Example, l.batch)
	for r := range rows {
		if l.rows == nil {
			l.shuffle()
		}
		rows[r] = l.rows[l.pos]
		l.pos++
		if l.pos == len(l.rows) {
			l.rows, l.pos = nil, 0
			l.epoch++
		}
	}
	b, err := Pad(rows, l.batch, l.seq, l.pad)
	if err != nil {
		// NewLoader checked the examples and the shapes.
		panic("sft: Loader.Next: " + err.Error())
	}
	return b
}

// shuffle lays out the next epoch's rows.
func (l *Loader) shuffle() {
	perm := l.rng.Perm(len(l.examples))
	order := make([]Example, len(perm))
	for i, p := range perm {
		order[i] = l.examples[p]
	}
	if l.pack {
		order = Pack(order, l.seq)
	}
	l.rows = order
}

// Dropped returns how many examples NewLoader dropped for having no label
// to learn (after truncation to seq, without packing).
func (l *Loader) Dropped() int { return l.dropped }

// Epoch returns how many epochs the batches returned so far have
// completed: 0 until Next has returned every row of the first epoch, 1
// from then until it has returned every row of the second, and so on.
func (l *Loader) Epoch() int { return l.epoch }

// RowsPerEpoch returns the number of rows in an epoch: the examples kept,
// or with packing the rows they pack into.
func (l *Loader) RowsPerEpoch() int {
	if !l.pack {
		return len(l.examples)
	}
	total := 0
	for _, e := range l.examples {
		total += len(e.IDs)
	}
	return total / l.seq
}
