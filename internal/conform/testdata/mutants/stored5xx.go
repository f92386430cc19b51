package mutants

// stores5xx stores every answer, a server error too (its writes rolled back): the client's
// retry gets the 500 again, forever, and the payment can never be made under that key.
func stores5xx(l *Layer) {
	l.Finish = func(scope, fp string, tx *Tx, resp *Recorder) {
		if resp.Status >= 500 {
			tx.Rollback()
		} else {
			tx.Commit()
		}
		l.k.Put(scope, resp.Record(fp))
	}
}
