package audit

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
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
	entries, err := readEntries(f)
	if err != nil {
		return err
	}
	tip := HeadState{}
	if n := len(entries); n > 0 {
		last, err := Parse(entries[n-1].Doc)
		if err != nil {
			return fmt.Errorf("%s line %d is unreadable, run `kubectl gitops audit verify --file`: %w", s.Path, n, err)
		}
		tip = HeadState{Seq: uint64(n), Hash: last.Hash}
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
func (s *FileStore) Entries(context.Context, Filter) ([]Entry, error) {
	f, err := os.Open(s.Path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return readEntries(f)
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

func readEntries(r io.Reader) ([]Entry, error) {
	var entries []Entry
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64*1024), 8*1024*1024)
	for line := uint64(1); sc.Scan(); line++ {
		entries = append(entries, Entry{Slot: line, Name: fmt.Sprintf("line %d", line), Doc: append([]byte(nil), sc.Bytes()...)})
	}
	return entries, sc.Err()
}
