package audit

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/kubectl-gitops/kubectl-gitops/next"
)

// FileStore keeps a chain as JSON Lines: one stored record document per line,
// line N holding record N. It is the export format (`audit log -o jsonl`) and
// works offline; its last line is its head.
type FileStore struct {
	Path string
}

// ErrNotExport is a file given as an audit log that is not a JSONL export:
// a JSON array, a CSV export, some other file. Told apart from tampering,
// which is a break in an export's records.
var ErrNotExport = errors.New("not a JSONL export")

// maxLine is the longest line a JSONL export holds: a record is a few
// kilobytes, and a line past it is not one.
const maxLine = 8 << 20

// OpenExport opens a JSONL export to read, after checking that it is one:
// at least one of its lines is an audit record, or it is empty. A file none of whose lines
// is (a JSON array, a CSV export, random bytes) would read as every line
// altered, which is tampering; it is ErrNotExport instead.
func OpenExport(path string) (*FileStore, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	found := errors.New("found")
	text := false
	err = scanLines(f, func(_ uint64, line []byte) error {
		if _, perr := Parse(line); perr == nil {
			return found
		}
		text = text || len(bytes.TrimSpace(line)) > 0
		return nil
	})
	switch {
	case err == found || err == nil && !text:
		// An empty file is an empty log: the commands say where they
		// found nothing.
		return &FileStore{Path: path}, nil
	case err != nil:
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return nil, fmt.Errorf("%s is %w (`%s`): none of its lines is an audit record", path, ErrNotExport, next.AuditExport())
}

// Append implements Store. An exclusive file lock serialises writers on
// one machine.
func (s *FileStore) Append(_ context.Context, r *Record) error {
	f, err := os.OpenFile(s.Path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return err
	}
	defer f.Close()
	if err := lockFile(f); err != nil {
		return fmt.Errorf("locking %s: %w", s.Path, err)
	}
	var last []byte // only the last line matters: keep one
	var lines uint64
	if err := scanLines(f, func(line uint64, doc []byte) error { last, lines = append(last[:0], doc...), line; return nil }); err != nil {
		return err
	}
	tip := HeadState{}
	if lines > 0 {
		rec, err := Parse(last)
		if err != nil {
			return fmt.Errorf("%s line %d is unreadable, run `%s`: %w", s.Path, lines, next.AuditVerifyFile(s.Path), err)
		}
		tip = HeadState{Seq: rec.Seq, Hash: rec.Hash}
	}
	sealed := *r
	doc, err := seal(&sealed, tip.Seq+1, tip.Hash)
	if err != nil {
		return err
	}
	if _, err := f.Seek(0, io.SeekEnd); err != nil {
		return err
	}
	if _, err := f.Write(append(doc, '\n')); err != nil {
		return fmt.Errorf("writing %s: %w", s.Path, err)
	}
	if err := f.Sync(); err != nil {
		return err
	}
	*r = sealed
	return nil
}

// Entries implements Store.
func (s *FileStore) Entries(ctx context.Context, filter Filter) ([]Entry, error) {
	return collect(ctx, s.Walk, filter)
}

// Walk implements Store, line by line.
func (s *FileStore) Walk(_ context.Context, _ Filter, fn func(Entry) error) error {
	f, err := os.Open(s.Path)
	if err != nil {
		return err
	}
	defer f.Close()
	return walkLines(f, fn)
}

// Head implements Store: a file has no separate head.
func (s *FileStore) Head(context.Context) (*HeadState, error) { return nil, nil }

// WriteJSONL writes entries' documents as JSON Lines, the FileStore format.
func WriteJSONL(w io.Writer, entries []Entry) error {
	for _, e := range entries {
		if _, err := w.Write(append(bytes.TrimSpace(e.Doc), '\n')); err != nil {
			return err
		}
	}
	return nil
}

// walkLines hands each line of r to fn as an entry. Its slot is the
// sequence number of the record it holds when that record is what its
// writer wrote (its hash matches): an export's line number promises
// nothing once a line is deleted, and the cluster's log names a deleted
// record missing, not every record after it reordered. A line that is no
// such record takes the position after the line before it, where an
// altered record stood.
func walkLines(r io.Reader, fn func(Entry) error) error {
	var slot uint64
	return scanLines(r, func(line uint64, doc []byte) error {
		slot++
		if rec, err := Parse(doc); err == nil {
			if h, err := hashDocument(doc); err == nil && h == rec.Hash {
				slot = rec.Seq
			}
		}
		return fn(Entry{Slot: slot, Name: fmt.Sprintf("line %d", line), Doc: append([]byte(nil), doc...)})
	})
}

// scanLines hands each line of r, numbered from 1, to fn; a line longer
// than any record is ErrNotExport.
func scanLines(r io.Reader, fn func(line uint64, doc []byte) error) error {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64*1024), maxLine)
	line := uint64(1)
	for ; sc.Scan(); line++ {
		if err := fn(line, sc.Bytes()); err != nil {
			return err
		}
	}
	if errors.Is(sc.Err(), bufio.ErrTooLong) {
		return fmt.Errorf("line %d is longer than %d MiB: %w (`%s`)", line, maxLine>>20, ErrNotExport, next.AuditExport())
	}
	return sc.Err()
}
