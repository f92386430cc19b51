package pgstore

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgtype"
)

// This file is a replay's read without pgx's query path: the record's SELECT (read, readProbe)
// run on the connection's pgconn as a statement prepared by name, its parameters encoded here,
// its row decoded by readRow, and its bound a deadline set on the connection's socket rather
// than a context pgx watches. A replay is that one read, so what pgx does around it (arguments
// through its type map, result formats, the rows object, and for the watch of the call's
// context a context.AfterFunc registration and its stop on every query) is most of a replay's
// cost beyond the round trip (bench/README.md, "A replay at the cost of a read").
//
// It is taken only for a call bounded by a deadline (the runtime's store calls, bounded by
// Config.StoreTimeout) on a connection of the store's pool in a caching exec mode outside a
// transaction-pooling proxy (Store.prepared), and falls back to pgx whenever anything differs
// from what it was built for. What it keeps of pgx's query path:
//   - the pool's tracer (pgx.QueryTracer) sees the read as it does through pgx: TraceQueryStart
//     with the statement's SQL and arguments, TraceQueryEnd with its command tag or error;
//   - a read that passes its deadline fails with an error wrapping context.DeadlineExceeded, and
//     its connection is closed (pgconn closes a connection whose read failed), so the pool
//     destroys it on release, as pgx does for a query whose context ended;
//   - one statement, one round trip (Bind, Execute, Sync of the prepared statement).
//
// What it does not do is end the read when the call's context is canceled before its deadline
// (the client went away): the read runs to its end, at most until the deadline, its answer is
// dropped for the context's error then, as pgx would have answered, and the connection goes
// back to the pool, where pgx would have closed it (docs/runtime.md, "Problems (RFC 9457)", on
// a replay's read).

// directKey is the entry of a connection's pgconn.CustomData holding its directReads.
const directKey = "github.com/idemgen/idemgen/runtime/pgstore.direct"

// directReads are the read statements prepared on one connection: at most a few (one per
// statement text: read and readProbe, of each layout the pool's stores use).
type directReads struct {
	stmts []directStmt
}

// directStmt is one read statement on one connection: sd nil when its parameters or columns are
// not those the direct read encodes and decodes (pgx reads it then).
type directStmt struct {
	sql string
	sd  *pgconn.StatementDescription
}

// The formats of the direct read: its parameters and its columns all binary (text's binary
// form is its text). Shared, never modified.
var (
	binaryFormats = []int16{pgtype.BinaryFormatCode}
	readParamOIDs = [...]uint32{pgtype.Int8OID, pgtype.UUIDOID, pgtype.Int8OID}
)

// errNotDirect is readDirect's answer when the statement cannot be read directly on this
// connection: the caller reads it through pgx.
var errNotDirect = errors.New("pgstore: not a direct read")

// direct reports whether a read of ctx on q may be direct, and its deadline.
func (s *Store) direct(ctx context.Context, q querier) (*pgx.Conn, time.Time, bool) {
	if !s.prepared {
		return nil, time.Time{}, false
	}
	conn, ok := q.(*pgx.Conn)
	if !ok {
		return nil, time.Time{}, false
	}
	deadline, ok := ctx.Deadline()
	return conn, deadline, ok
}

// runRead runs sql (read, readProbe or readLock: rr's shape) into rr: directly on the
// connection where it can (readDirect), else through pgx, which decodes the row with
// readRow.ScanRow. pgx.ErrNoRows when it returned none.
func (s *Store) runRead(ctx context.Context, q querier, sql string, rr *readRow) error {
	if conn, deadline, ok := s.direct(ctx, q); ok {
		if err := s.readDirect(ctx, conn, deadline, sql, rr); err != errNotDirect {
			return err
		}
	}
	return q.QueryRow(ctx, sql, rr.args[:rr.nargs()]...).Scan(rr)
}

// readDirect runs rr's statement sql on conn, bounded by deadline, and decodes its row into rr;
// pgx.ErrNoRows when it returned none. errNotDirect, before anything was sent, when it cannot.
func (s *Store) readDirect(ctx context.Context, conn *pgx.Conn, deadline time.Time, sql string, rr *readRow) error {
	if err := ctx.Err(); err != nil {
		return err // as pgx answers a query whose context has ended: nothing sent
	}
	if !rr.key.Valid {
		return errNotDirect
	}
	sd, err := s.directStatement(ctx, conn, sql, rr.tailType())
	if err != nil || sd == nil {
		if err == nil {
			err = errNotDirect
		}
		return err
	}
	args := rr.args[:rr.nargs()]
	tracer, call := s.tracer, ctx
	if tracer != nil {
		ctx = tracer.TraceQueryStart(ctx, conn, pgx.TraceQueryStartData{SQL: sql, Args: args})
	}
	pc := conn.PgConn()
	nc := pc.Conn()
	if err := nc.SetDeadline(deadline); err != nil {
		if tracer != nil {
			tracer.TraceQueryEnd(ctx, conn, pgx.TraceQueryEndData{Err: err})
		}
		return err
	}
	params := rr.encode()
	res := pc.ExecStatement(context.Background(), sd, params, binaryFormats, binaryFormats)
	found, decoded := false, true
	if res.NextRow() {
		found = true
		decoded = rr.decode(res.FieldDescriptions(), res.Values())
	}
	tag, err := res.Close()
	if !pc.IsClosed() {
		// A connection whose read failed on its deadline is closed by pgconn (and destroyed by
		// the pool on release); an open one goes back without a deadline.
		if derr := nc.SetDeadline(time.Time{}); derr != nil && err == nil {
			err = derr
			_ = conn.Close(context.Background())
		}
	}
	stale := err != nil && isStale(err) && !pc.IsClosed()
	switch {
	case stale:
		// The statement no longer is what was prepared (a migration changed a column's type)
		// or no longer exists (DEALLOCATE ALL): forgotten, and read through pgx now.
		s.forgetDirect(call, conn, sql)
	case err != nil && pgconn.Timeout(err):
		err = fmt.Errorf("%w (%w)", context.DeadlineExceeded, err)
	case err == nil && !decoded:
		err = fmt.Errorf("%d columns of unexpected types", len(res.FieldDescriptions()))
	}
	if tracer != nil {
		// As pgx: a query that returned no row ended without an error (pgx.ErrNoRows is
		// QueryRow's answer, not the query's).
		tracer.TraceQueryEnd(ctx, conn, pgx.TraceQueryEndData{CommandTag: tag, Err: err})
	}
	switch {
	case stale:
		return errNotDirect
	case err == nil && errors.Is(call.Err(), context.Canceled):
		// The client went away during the read: the request ends as it did when pgx's watch
		// ended the read then (nothing claimed, outcome canceled), but the connection, whose
		// read ended normally, stays open.
		return call.Err()
	case err == nil && !found:
		return pgx.ErrNoRows
	}
	return err
}

// isStale reports the errors of a prepared statement that is not what it was: PostgreSQL's
// "cached plan must not change result type" (0A000, after a column's type changed) and
// invalid_sql_statement_name (26000, the statement deallocated behind pgx's back).
func isStale(err error) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe) && (pe.Code == "0A000" || pe.Code == "26000")
}

// forgetDirect deallocates sql's statement on conn and forgets it, so that the next read
// prepares it again (and checks its shape again).
func (s *Store) forgetDirect(ctx context.Context, conn *pgx.Conn, sql string) {
	if reads, _ := conn.PgConn().CustomData()[directKey].(*directReads); reads != nil {
		for i, st := range reads.stmts {
			if st.sql == sql {
				reads.stmts = append(reads.stmts[:i], reads.stmts[i+1:]...)
				break
			}
		}
	}
	if err := conn.Deallocate(ctx, sql); err != nil {
		// The connection cannot say which statements it has: it is closed, and the pool
		// destroys it on release.
		_ = conn.Close(context.WithoutCancel(ctx))
	}
}

// directStatement returns sql prepared on conn, preparing it the first time (pgx.Conn.Prepare
// by its text, so that pgx's own queries of it use the same statement); nil when its
// parameters or columns are not the direct read's (tail: readRow.tailType).
func (s *Store) directStatement(ctx context.Context, conn *pgx.Conn, sql string, tail uint32) (*pgconn.StatementDescription, error) {
	data := conn.PgConn().CustomData()
	reads, _ := data[directKey].(*directReads)
	if reads != nil {
		for _, st := range reads.stmts {
			if st.sql == sql {
				return st.sd, nil
			}
		}
	}
	sd, err := conn.Prepare(ctx, sql, sql)
	if err != nil {
		return nil, fmt.Errorf("prepare: %w", err)
	}
	if !directShape(sd, tail) {
		sd = nil
	}
	if reads == nil {
		reads = &directReads{}
		data[directKey] = reads
	}
	reads.stmts = append(reads.stmts, directStmt{sql: sql, sd: sd})
	return sd, nil
}

// directShape reports whether sd takes the parameters and returns the columns of read (or of
// readProbe or readLock: the column after readCols of type tail), which readDirect encodes and
// decodes.
func directShape(sd *pgconn.StatementDescription, tail uint32) bool {
	nargs, cols := 2, len(readColTypes)-1
	if tail != 0 {
		nargs, cols = 3, cols+1
	}
	if len(sd.ParamOIDs) != nargs || len(sd.Fields) != cols {
		return false
	}
	for i, oid := range sd.ParamOIDs {
		if oid != readParamOIDs[i] {
			return false
		}
	}
	for i, f := range sd.Fields {
		want := readColTypes[i]
		if i == readColBusy {
			want = tail
		}
		if f.DataTypeOID != want {
			return false
		}
	}
	return true
}

// nargs is how many of rr.args its statement takes: read $1, $2; readProbe and readLock $1,
// $2, $3.
func (rr *readRow) nargs() int {
	if rr.tailType() != 0 {
		return 3
	}
	return 2
}

// encode returns the statement's parameters in binary, in rr.
func (rr *readRow) encode() [][]byte {
	binary.BigEndian.PutUint64(rr.enc[0:8], uint64(rr.scope.Int64))
	copy(rr.enc[8:24], rr.key.Bytes[:])
	binary.BigEndian.PutUint64(rr.enc[24:32], uint64(rr.lock.Int64))
	rr.params = [3][]byte{rr.enc[0:8], rr.enc[8:24], rr.enc[24:32]}
	return rr.params[:rr.nargs()]
}
