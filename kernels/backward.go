package kernels

// MatMulBackward computes the gradients of out = a·bᵀ + bias, the linear
// layer of every model here (a [rows, K], weight b [N, K], dout [rows, N]):
// da = dout·b, db = doutᵀ·a and dbias = Σ rows of dout. Any of da, db, dbias
// may be nil to skip it. When accumulate is set, db and da are added to
// rather than overwritten (for weights shared across steps of a sequence).
func MatMulBackward(be Backend, da, db, dbias, dout, a, b *Tensor, accumulate bool) error {
	beta := float32(0)
	if accumulate {
		beta = 1
	}
	if da != nil {
		if err := be.MatMul(da, dout, b, MatMulParams{Beta: beta}); err != nil {
			return err
		}
	}
	if db != nil {
		if err := be.MatMul(db, dout, a, MatMulParams{TransA: true, Beta: beta}); err != nil {
			return err
		}
	}
	if dbias != nil {
		return be.SumRows(dbias, dout)
	}
	return nil
}
