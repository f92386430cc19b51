package mutants

// lockWithoutTTL claims the key like a Redis SET NX without EX: when the handler fails, the
// claim is never released and nothing expires it, so every retry gets 409 for ever.
func lockWithoutTTL(l *Layer) {
	l.Finish = func(scope, fp string, tx *Tx, resp *Recorder) {
		if resp.Status >= 500 {
			tx.Rollback()
			return // the claim stays, in progress, with no expiry
		}
		tx.Commit()
		l.k.Put(scope, resp.Record(fp))
	}
}
