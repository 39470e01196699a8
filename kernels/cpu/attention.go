package cpu

import (
	"math"
	"sync"

	"gonum.org/v1/gonum/blas"

	"github.com/zbench/zbench/kernels"
	"github.com/zbench/zbench/kernels/check"
	"github.com/zbench/zbench/kernels/cpu/internal/sgemmasm"
	"github.com/zbench/zbench/kernels/cpu/internal/vecmath"
)

// Softmax normalises the rows of x into out, scaled and masked as p says.
func (b *Backend) Softmax(out, x *kernels.Tensor, p kernels.AttentionParams) error {
	const op = "cpu: Softmax"
	g, err := check.Softmax(op, b, out, x, p)
	if err != nil {
		return err
	}
	lens, err := keyLens(op, p.KeyLens, g.Sk)
	if err != nil {
		return err
	}
	masked := p.Causal || p.KeyLens != nil
	sk, sq, rows, perBatch := g.Sk, g.Sq, g.Rows, g.RowsPerBatch
	scale := p.Scale
	if scale == 0 {
		scale = 1
	}

	mapRows(out, x, rows, sk, 6*sk, func(r int, dst, row []float32) {
		n := sk
		if masked {
			n = attnVisible(r%sq, sq, sk, p.Causal, lens, r/perBatch)
		}
		softmaxRow(dst, row, n, scale)
	})
	return nil
}

// softmaxRow sets dst[:n] to softmax(scale·src[:n]) and the rest of dst to
// zero; dst may be src. It returns the largest scaled value m and the
// denominator Σ e^(scale·src[j] − m), whose log plus m is the logsumexp.
func softmaxRow(dst, src []float32, n int, scale float32) (m float32, sum float64) {
	src, rest := src[:n], dst[n:]
	dst = dst[:n]
	if useVecmath && scale > 0 && scale <= math.MaxFloat32 {
		// Rounding is monotonic, so for a finite positive scale the
		// largest scaled value is the largest value scaled, NaN included.
		m = vecmath.Max(src) * scale
	} else {
		m = float32(math.Inf(-1))
		for _, v := range src {
			m = max(m, v*scale)
		}
	}
	if useVecmath && !math.IsInf(float64(m), 0) {
		sum = vecmath.ExpScaledSum(dst, src, scale, m)
	} else {
		for j, v := range src {
			e := expf(v*scale - m)
			dst[j] = e
			sum += float64(e)
		}
	}
	inv := float32(1 / sum)
	if useVecmath {
		vecmath.Scale(dst, dst, inv)
	} else {
		for j := range dst {
			dst[j] *= inv
		}
	}
	clear(rest)
	return m, sum
}

// SoftmaxBackward sets dx = y ⊙ (dy − Σ dy⊙y) per row.
func (b *Backend) SoftmaxBackward(dx, dy, y *kernels.Tensor) error {
	dims, err := check.SoftmaxBackward("cpu: SoftmaxBackward", b, dx, dy, y)
	if err != nil {
		return err
	}
	n, rows := dims.D, dims.Rows
	ys, dys := in32(y), in32(dy)
	o, flush := out32(dx, false)
	parallelFor(rows, 3*n, func(lo, hi int) {
		for r := lo; r < hi; r++ {
			yr, dyr, dst := ys[r*n:(r+1)*n], dys[r*n:(r+1)*n], o[r*n:(r+1)*n]
			dyr = dyr[:len(yr)]
			var s float64
			for j, v := range yr {
				s += float64(v * dyr[j])
			}
			sf := float32(s)
			for j, v := range yr {
				dst[j] = v * (dyr[j] - sf)
			}
		}
	})
	flush()
	return nil
}

// keyLens returns the values of the optional KeyLens tensor t, whose dtype
// and shape the op's validator has checked, after checking that each lies in
// [0, sk]; it returns nil without one.
func keyLens(op string, t *kernels.Tensor, sk int) ([]int32, error) {
	if t == nil {
		return nil, nil
	}
	lens := i32(t)[:t.Len()]
	for i, n := range lens {
		if n < 0 || int(n) > sk {
			return nil, check.Op(op).That(false, kernels.ErrValue, "KeyLens[%d] = %d, want it in [0, %d]", i, n, sk).Err()
		}
	}
	return lens, nil
}

// attnVisible returns how many leading keys query row i (of sq, over sk keys)
// of batch entry bi may attend to: the masks only ever hide a suffix.
func attnVisible(i, sq, sk int, causal bool, lens []int32, bi int) int {
	n := sk
	if causal {
		n = min(n, i+sk-sq+1)
	}
	if lens != nil {
		n = min(n, int(lens[bi]))
	}
	return max(n, 0)
}

// attnShape is the geometry of one Attention call with its resolved
// parameters.
type attnShape struct {
	kernels.AttentionDims
	scale  float32
	causal bool
	lens   []int32
}

// visible returns how many keys query row i of batch entry bi sees.
func (g *attnShape) visible(i, bi int) int {
	return attnVisible(i, g.Sq, g.Sk, g.causal, g.lens, bi)
}

// newAttnShape checks the values of p.KeyLens for op and resolves p against
// the validated geometry: the default scale is 1/sqrt(D).
func newAttnShape(op string, dims kernels.AttentionDims, p kernels.AttentionParams) (attnShape, error) {
	lens, err := keyLens(op, p.KeyLens, dims.Sk)
	if err != nil {
		return attnShape{}, err
	}
	return attnShape{AttentionDims: dims, scale: kernels.AttentionScale(p, dims), causal: p.Causal, lens: lens}, nil
}

// attnRowBlock is the number of query rows one work item of the attention
// kernels handles.
const attnRowBlock = 8

// attnGemmRows is the number of query rows whose scores one pair of GEMMs
// computes: a tile of attnGemmRows×Sk scores per goroutine.
const attnGemmRows = 64

// Attention computes softmax(scale·q·kᵀ + mask)·v with attend.
func (b *Backend) Attention(out, q, k, v *kernels.Tensor, p kernels.AttentionParams) error {
	const op = "cpu: Attention"
	dims, err := check.Attention(op, b, out, q, k, v, p)
	if err != nil {
		return err
	}
	g, err := newAttnShape(op, dims, p)
	if err != nil {
		return err
	}
	attend(out, q, k, v, attnRun{AttentionDims: g.AttentionDims, scale: g.scale, visible: g.visible})
	return nil
}

// AttentionPacked computes Attention over a fused projection: qkv's heads
// split into a [B, Hq+2·Hkv, S, D] copy that attend reads q, k and v from,
// and the result's heads merged into out.
func (b *Backend) AttentionPacked(out, qkv *kernels.Tensor, p kernels.AttentionParams) error {
	const op = "cpu: AttentionPacked"
	dims, err := check.AttentionPacked(op, b, out, qkv, p)
	if err != nil {
		return err
	}
	g, err := newAttnShape(op, dims, p)
	if err != nil {
		return err
	}
	dt, heads := qkv.DType(), dims.Hq+2*dims.Hkv
	split, err := b.Alloc(dt, dims.B, heads, dims.Sq, dims.D)
	if err != nil {
		return err
	}
	defer b.Free(split)
	o, err := b.Alloc(dt, dims.B, dims.Hq, dims.Sq, dims.D)
	if err != nil {
		return err
	}
	defer b.Free(o)
	if err := b.SwapAxes(split, qkv); err != nil {
		return err
	}
	attend(o, split, split, split, attnRun{AttentionDims: g.AttentionDims, scale: g.scale, visible: g.visible,
		qHeads: heads, kvHeads: heads, k0: dims.Hq, v0: dims.Hq + dims.Hkv})
	return b.SwapAxes(out, o)
}

// attnRun is one attention computation for attend: q [B, Hq, Sq, D] over
// k and v [B, Hkv, Sk, D], and how many leading keys row s of batch entry
// bi sees (the masks only ever hide a suffix, which shrinks as s grows).
type attnRun struct {
	kernels.AttentionDims
	scale   float32
	visible func(s, bi int) int
	// qHeads and kvHeads are the heads a batch entry holds in q's tensor
	// and in k's and v's, and k0 and v0 the first of k's and of v's heads
	// there: zero for Hq and Hkv heads from 0, or every head of a packed
	// projection (AttentionPacked), q, k and v being one tensor.
	qHeads, kvHeads, k0, v0 int
}

// attend computes out = softmax(scale·q·kᵀ)·v over the keys each row sees,
// a tile of query rows at a time with two GEMMs (scores = q·kᵀ over the
// keys any row of the tile sees, then out = P·v), each tile's on one
// goroutine (serialSgemm). A tile holds up to attnGemmRows of the rows
// that share a KV head (the Sq rows of each of its Hq/Hkv query heads,
// consecutive in q), so that a KV head's keys and values are read once
// for all of them.
func attend(out, q, k, v *kernels.Tensor, a attnRun) {
	d, sk, group := a.D, a.Sk, a.Hq/a.Hkv
	rows := group * a.Sq
	qHeads, kvHeads := a.Hq, a.Hkv
	if a.qHeads != 0 {
		qHeads, kvHeads = a.qHeads, a.kvHeads
	}
	tiles := (rows + attnGemmRows - 1) / attnGemmRows
	// bfloat16 runs both GEMMs on bfloat16 operands (the probabilities
	// rounded to bfloat16, as a bfloat16 softmax leaves them) where the
	// processor has AVX-512 BF16; other 16-bit types are widened a tile
	// and a KV head at a time.
	bf := q.DType() == kernels.BF16 && sgemmasm.AvailableBF16
	wide := q.DType() != kernels.F32 && !bf
	// Float32 products of whole 32-column panels run on the in-place
	// kernel, over a KV head's keys and values packed once (attnPanels).
	inPlace := !bf && sgemmasm.Available512 && d%32 == 0
	// The most keys any row sees (the last row of an entry: the masks
	// only ever hide a suffix): a cache's capacity may be far more.
	most := 0
	for bi := range a.B {
		most = max(most, a.visible(a.Sq-1, bi))
	}
	parallelFor(a.B*a.Hkv*tiles, 2*attnGemmRows*sk*d, func(lo, hi int) {
		buf := attnBufs.Get().(*attnBuf)
		defer attnBufs.Put(buf)
		need := attnGemmRows * most
		if inPlace { // whole groups of twelve rows of whole panels
			need = (attnGemmRows + 11) / 12 * 12 * ((most + 31) / 32 * 32)
		}
		buf.scores = grow(buf.scores, need)
		scores, panels := buf.scores, &buf.panels
		var qb, kb, vb, ob []float32
		var pb []uint16
		if wide || bf {
			buf.ob = grow(buf.ob, attnGemmRows*d)
			ob = buf.ob
		}
		if wide {
			buf.qb, buf.kb, buf.vb = grow(buf.qb, attnGemmRows*d), grow(buf.kb, most*d), grow(buf.vb, most*d)
			qb, kb, vb = buf.qb, buf.kb, buf.vb
		}
		if bf {
			buf.pb = grow(buf.pb, attnGemmRows*most)
			pb = buf.pb
		}
		var kt, vt []float32
		lastKV := -1
		for it := lo; it < hi; it++ {
			bk, tile := it/tiles, it%tiles
			bi, hk := bk/a.Hkv, bk%a.Hkv
			kh0, vh0 := (bi*kvHeads+a.k0+hk)*sk*d, (bi*kvHeads+a.v0+hk)*sk*d // this KV head's keys and values
			r0, r1 := tile*attnGemmRows, min(rows, (tile+1)*attnGemmRows)
			nr, first := r1-r0, (bk*rows+r0)*d // out's rows
			qf := ((bi*qHeads+hk*group)*a.Sq + r0) * d
			dst := destRange(out, first, first+nr*d, ob)
			n := 0
			for r := r0; r < r1; r++ {
				n = max(n, a.visible(r%a.Sq, bi))
			}
			if n == 0 {
				clear(dst)
				flushRange(out, first, dst)
				continue
			}
			sc := scores[:nr*n]
			if bf {
				kh, vh := u16(k)[kh0:kh0+n*d], u16(v)[vh0:vh0+n*d]
				bf16SerialWith(asmBF16Kernel, false, true, nr, n, d, a.scale, u16(q)[qf:qf+nr*d], d, kh, d, 0, sc, n)
				a.softmaxRows(sc, n, n, r0, bi, 1)
				p := pb[:nr*n]
				narrow16(kernels.BF16, p, sc)
				bf16SerialWith(asmBF16Kernel, false, false, nr, d, n, 1, p, n, vh, d, 0, dst, d)
				flushRange(out, first, dst)
				continue
			}
			if kh0 != lastKV { // a goroutine's tiles run through a KV head in order
				// The keys the rows of bi's last position see: the most any
				// tile of this KV head needs.
				keys := a.visible(a.Sq-1, bi)
				kt, vt = loadRange(k, kh0, kh0+keys*d, kb), loadRange(v, vh0, vh0+keys*d, vb)
				lastKV = kh0
				if inPlace {
					panels.pack(kt, vt, keys, d)
				}
			}
			qt := loadRange(q, qf, qf+nr*d, qb)
			if inPlace {
				ld := (n + 31) / 32 * 32
				panels.scores(scores, qt, nr, n, ld)
				a.softmaxRows(scores[:nr*ld], ld, n, r0, bi, a.scale)
				panels.values(dst, scores, nr, n, ld)
				flushRange(out, first, dst)
				continue
			}
			serialSgemm(blas.NoTrans, blas.Trans, nr, n, d, a.scale, qt, d, kt, d, 0, sc, n)
			a.softmaxRows(sc, n, n, r0, bi, 1)
			serialSgemm(blas.NoTrans, blas.NoTrans, nr, d, n, 1, sc, n, vt, d, 0, dst, d)
			flushRange(out, first, dst)
		}
	})
}

// attnProbs sets pr[j] to the softmax over j < len(pr) of scale·qi·k_j, the
// keys being consecutive rows of k, and returns the log of the softmax's
// denominator (the scores' logsumexp); it returns 0 for no keys.
func attnProbs(pr, qi, k []float32, scale float32) float64 {
	if len(pr) == 0 {
		return 0
	}
	d := len(qi)
	for j := range pr {
		pr[j] = scale * attnDot(qi, k[j*d:(j+1)*d])
	}
	m, sum := softmaxRow(pr, pr, len(pr), 1)
	return float64(m) + math.Log(sum)
}

// attnDot returns a·b over len(a), with four float32 accumulators.
func attnDot(a, b []float32) float32 {
	b = b[:len(a)]
	var s0, s1, s2, s3 float32
	i := 0
	for ; i+4 <= len(a); i += 4 {
		s0 += a[i] * b[i]
		s1 += a[i+1] * b[i+1]
		s2 += a[i+2] * b[i+2]
		s3 += a[i+3] * b[i+3]
	}
	for ; i < len(a); i++ {
		s0 += a[i] * b[i]
	}
	return (s0 + s1) + (s2 + s3)
}

// attnAxpy64 adds s·x to the float64 accumulator acc.
func attnAxpy64(acc []float64, s float32, x []float32) {
	x = x[:len(acc)]
	for t, xv := range x {
		acc[t] += float64(s * xv)
	}
}

// attnKeyBlock is the number of keys one work item of the second pass of
// AttentionBackward handles.
const attnKeyBlock = 16

// AttentionBackward computes dq, dk and dv from dout and the forward inputs,
// recomputing the probabilities in two passes that each own their outputs:
// the first, over query rows, computes dq with each row's logsumexp and
// Σ_j P·dP; the second, over blocks of keys of each KV head, computes dk and
// dv by summing over every query row of the heads that share it.
func (b *Backend) AttentionBackward(dq, dk, dv, dout, q, k, v *kernels.Tensor, p kernels.AttentionParams) error {
	const op = "cpu: AttentionBackward"
	dims, err := check.AttentionBackward(op, b, dq, dk, dv, dout, q, k, v, p)
	if err != nil {
		return err
	}
	g, err := newAttnShape(op, dims, p)
	if err != nil {
		return err
	}

	qs, ks, vs, dos := in32(q), in32(k), in32(v), in32(dout)
	d, sk, sq, group := g.D, g.Sk, g.Sq, g.Hq/g.Hkv
	rows := g.B * g.Hq * sq
	lse := make([]float64, rows)   // logsumexp of each query row's scores
	delta := make([]float64, rows) // Σ_j P_ij·dP_ij = dout_i·out_i

	// Pass 1: dq_i = scale·Σ_j P_ij (dP_ij − delta_i) k_j, dP_ij = dout_i·v_j.
	dqs, flushQ := out32(dq, false)
	blocks := (sq + attnRowBlock - 1) / attnRowBlock
	parallelFor(g.B*g.Hq*blocks, 3*attnRowBlock*sk*d, func(lo, hi int) {
		pr := make([]float32, sk)
		dp := make([]float32, sk)
		acc := make([]float64, d)
		for it := lo; it < hi; it++ {
			bh, blk := it/blocks, it%blocks
			bi, h := bh/g.Hq, bh%g.Hq
			kv := (bi*g.Hkv + h/group) * sk * d
			kh, vh := ks[kv:kv+sk*d], vs[kv:kv+sk*d]
			for i := blk * attnRowBlock; i < min(sq, (blk+1)*attnRowBlock); i++ {
				r := bh*sq + i
				qi, doi := qs[r*d:(r+1)*d], dos[r*d:(r+1)*d]
				n := g.visible(i, bi)
				lse[r] = attnProbs(pr[:n], qi, kh, g.scale)
				var dl float64
				for j, pj := range pr[:n] {
					dp[j] = attnDot(doi, vh[j*d:(j+1)*d])
					dl += float64(pj * dp[j])
				}
				delta[r] = dl
				clear(acc)
				dlf := float32(dl)
				for j, pj := range pr[:n] {
					attnAxpy64(acc, g.scale*pj*(dp[j]-dlf), kh[j*d:(j+1)*d])
				}
				dst := dqs[r*d : (r+1)*d]
				for t, a := range acc {
					dst[t] = float32(a)
				}
			}
		}
	})
	flushQ()

	// Pass 2: dk_j = scale·Σ_i dS_ij q_i and dv_j = Σ_i P_ij dout_i over the
	// query rows i of every head sharing the KV head.
	dks, flushK := out32(dk, false)
	dvs, flushV := out32(dv, false)
	kblocks := (sk + attnKeyBlock - 1) / attnKeyBlock
	parallelFor(g.B*g.Hkv*kblocks, 4*attnKeyBlock*group*sq*d, func(lo, hi int) {
		accK := make([]float64, attnKeyBlock*d)
		accV := make([]float64, attnKeyBlock*d)
		for it := lo; it < hi; it++ {
			bkv, kb := it/kblocks, it%kblocks
			bi, hk := bkv/g.Hkv, bkv%g.Hkv
			j0, j1 := kb*attnKeyBlock, min(sk, (kb+1)*attnKeyBlock)
			kv := bkv * sk * d
			clear(accK)
			clear(accV)
			for h := hk * group; h < (hk+1)*group; h++ {
				for i := range sq {
					je := min(j1, g.visible(i, bi))
					if je <= j0 {
						continue
					}
					r := (bi*g.Hq+h)*sq + i
					qi, doi := qs[r*d:(r+1)*d], dos[r*d:(r+1)*d]
					l, dl := lse[r], float32(delta[r])
					for j := j0; j < je; j++ {
						kj, vj := ks[kv+j*d:kv+(j+1)*d], vs[kv+j*d:kv+(j+1)*d]
						pij := float32(math.Exp(float64(g.scale*attnDot(qi, kj)) - l))
						ds := pij * (attnDot(doi, vj) - dl)
						off := (j - j0) * d
						attnAxpy64(accK[off:off+d], g.scale*ds, qi)
						attnAxpy64(accV[off:off+d], pij, doi)
					}
				}
			}
			dkb, dvb := dks[kv+j0*d:kv+j1*d], dvs[kv+j0*d:kv+j1*d]
			for t := range dkb {
				dkb[t] = float32(accK[t])
				dvb[t] = float32(accV[t])
			}
		}
	})
	flushK()
	flushV()
	return nil
}

// softmaxRows applies the masked softmax at scale to the first n scores of
// each row of sc (row stride ld), the tile's rows from r0 of batch entry
// bi.
func (a attnRun) softmaxRows(sc []float32, ld, n, r0, bi int, scale float32) {
	for r := range len(sc) / ld {
		row := sc[r*ld : r*ld+n]
		softmaxRow(row, row, a.visible((r0+r)%a.Sq, bi), scale)
	}
}

// attnBuf is one goroutine's buffers for attend, kept between calls.
type attnBuf struct {
	scores, qb, kb, vb, ob []float32
	pb                     []uint16
	panels                 attnPanels
}

var attnBufs = sync.Pool{New: func() any { return new(attnBuf) }}

// attnPanels is one goroutine's keys and values of a KV head packed for
// the in-place kernel (KernelRows12x32): kᵀ in panels of 32 keys, d rows
// deep, and v in panels of 32 of its d columns, keys rows deep; and the
// padded tiles of a last group of fewer than twelve query rows.
type attnPanels struct {
	kp, vp, qpad, tile []float32
	keys, d            int
}

// pack packs the first keys rows of kt and vt (rows of d values).
func (p *attnPanels) pack(kt, vt []float32, keys, d int) {
	p.keys, p.d = keys, d
	p.kp = grow(p.kp, (keys+31)/32*32*d)
	packB(p.kp, kt, d, true, 0, d, 0, keys, 32)
	p.vp = grow(p.vp, keys*d)
	for c0 := 0; c0 < d; c0 += 32 {
		packB(p.vp[c0*keys:], vt, d, false, 0, keys, c0, 32, 32)
	}
}

// scores sets the first n columns (whole panels: ld of them) of the nr
// rows of sc, of row stride ld, to q·kᵀ over the first n keys, unscaled,
// for the nr rows of q (rows of d values). sc holds nr rows rounded up to
// twelve, the last group computed from q's rows padded with zeros.
func (p *attnPanels) scores(sc, q []float32, nr, n, ld int) {
	d := p.d
	for g0 := 0; g0 < nr; g0 += 12 {
		a := q[g0*d:]
		if nr-g0 < 12 {
			p.qpad = grow(p.qpad, 12*d)
			clear(p.qpad[copy(p.qpad, q[g0*d:nr*d]):])
			a = p.qpad
		}
		_ = a[12*d-1]
		for j := 0; j < n; j += 32 {
			c := sc[g0*ld+j:]
			_ = c[11*ld+31]
			_ = p.kp[(j+32)*d-1]
			sgemmasm.KernelRows12x32(d, &a[0], d, 1, d, &p.kp[j*d], &c[0], ld, &c[0], 0, float32(math.Inf(-1)), &zeros32[0], nil)
		}
	}
}

// values sets the nr rows of dst (rows of d values) to P·v over the first
// n keys, P being the rows of sc (row stride ld) that scores laid out.
func (p *attnPanels) values(dst, sc []float32, nr, n, ld int) {
	d := p.d
	p.tile = grow(p.tile, 12*32)
	for g0 := 0; g0 < nr; g0 += 12 {
		a := sc[g0*ld:]
		_ = a[11*ld+n-1]
		for c0 := 0; c0 < d; c0 += 32 {
			b := p.vp[c0*p.keys:]
			_ = b[n*32-1]
			if nr-g0 >= 12 {
				c := dst[g0*d+c0:]
				_ = c[11*d+31]
				sgemmasm.KernelRows12x32(n, &a[0], ld, 1, ld, &b[0], &c[0], d, &c[0], 0, float32(math.Inf(-1)), &zeros32[0], nil)
				continue
			}
			sgemmasm.KernelRows12x32(n, &a[0], ld, 1, ld, &b[0], &p.tile[0], 32, &p.tile[0], 0, float32(math.Inf(-1)), &zeros32[0], nil)
			for i := range nr - g0 {
				copy(dst[(g0+i)*d+c0:(g0+i)*d+c0+32], p.tile[i*32:])
			}
		}
	}
}
