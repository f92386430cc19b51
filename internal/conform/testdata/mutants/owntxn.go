package mutants

// ownTransaction commits the handler's writes on their own and completes the record
// afterwards: when the request then fails (or the process dies in between), the payment is
// made but the key is free, and the retry pays again.
func ownTransaction(l *Layer) {
	l.Finish = func(scope, fp string, tx *Tx, resp *Recorder) {
		tx.Commit() // the business writes are already committed here
		if resp.Status >= 500 {
			l.k.Delete(scope)
			return
		}
		l.k.Put(scope, resp.Record(fp))
	}
}
