package audit

import (
	"bufio"
	"bytes"
	"context"
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
	var last *Entry // only the last line matters: keep one
	if err := walkLines(f, func(e Entry) error { last = &e; return nil }); err != nil {
		return err
	}
	tip := HeadState{}
	if last != nil {
		rec, err := Parse(last.Doc)
		if err != nil {
			return fmt.Errorf("%s line %d is unreadable, run `%s`: %w", s.Path, last.Slot, next.AuditVerifyFile(s.Path), err)
		}
		tip = HeadState{Seq: last.Slot, Hash: rec.Hash}
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

// walkLines hands each line of r to fn as the entry of that position.
func walkLines(r io.Reader, fn func(Entry) error) error {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64*1024), 8*1024*1024)
	for line := uint64(1); sc.Scan(); line++ {
		if err := fn(Entry{Slot: line, Name: fmt.Sprintf("line %d", line), Doc: append([]byte(nil), sc.Bytes()...)}); err != nil {
			return err
		}
	}
	return sc.Err()
}
